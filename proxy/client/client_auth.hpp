// Authenticating a client against auth_type and auth_file, as PgBouncer does:
//   trust  — no password; the user must be in auth_file when one is configured;
//   any    — like trust, and the user name is irrelevant (databases force their own user);
//   plain  — AuthenticationCleartextPassword, checked against a plain, md5 or SCRAM secret;
//   md5    — AuthenticationMD5Password against a plain or md5 secret, switching to SCRAM
//            when the stored secret is a SCRAM secret (it cannot answer an md5 challenge);
//   scram-sha-256 — SCRAM against a plain or SCRAM secret.
// A wrong password and an unknown user get the same 28P01 error, as from PostgreSQL, so that user
// names cannot be probed.
//
// PBKDF2 never runs here: where a step needs keys derived (a SCRAM exchange, a cleartext password
// against a SCRAM secret) it returns the derivation, the caller runs it off the event loop
// (proxy/client/login_work.hpp) and hands the result to on_derived. Every SCRAM exchange and
// every cleartext check derives exactly once, whatever the user -- a plain-text password, a
// SCRAM or md5 secret, or no such user (a random password then) -- so that timing tells no user
// from another (docs/tls-and-auth.md, "Password hashing").
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "protocol/bytes.hpp"
#include "protocol/scram.hpp"
#include "core/auth_file.hpp"
#include "core/config.hpp"
#include "proxy/client/login_work.hpp"

namespace pgtether {

class ClientAuth {
public:
    // PostgreSQL's and PgBouncer's default (scram_iterations).
    static constexpr int kDefaultScramIterations = 4096;
    enum class Outcome { Continue, Success, Failure };
    struct Step {
        Outcome outcome = Outcome::Continue;
        std::string reply;    // bytes to send to the client (authentication requests)
        std::string sqlstate; // on failure
        std::string message;  // on failure
        // Continue, once this is derived: nothing more is fed to the exchange until
        // on_derived has the result.
        std::optional<KeyDerivation> derive;
        // Continue, once PAM or LDAP has checked this password (auth_type = pam / ldap):
        // nothing more is fed to the exchange until on_external_check has the verdict.
        std::optional<std::string> external_check;
    };

    // `scram_iterations` (the key of that name): the iteration count of the SCRAM secrets made
    // from plain-text passwords, and of the mock secret of an unknown user.
    ClientAuth(AuthType type, const AuthFile& auth_file, bool auth_file_configured,
               std::string user, int scram_iterations = kDefaultScramIterations);
    // For a user not in auth_file whose secret auth_query fetched (nullopt: no usable secret;
    // the exchange then runs against a mock secret and fails like a wrong password).
    // `user_found`: auth_query returned the user's row (trust logs such a user in, with or
    // without a secret, as PgBouncer does; a user it did not find fails).
    ClientAuth(AuthType type, std::optional<UserSecret> fetched_secret, bool user_found,
               std::string user, int scram_iterations = kDefaultScramIterations);
    ~ClientAuth();

    // The first step: an authentication request, or an immediate verdict (trust, unknown method).
    Step start();
    // A PasswordMessage / SASLInitialResponse / SASLResponse body from the client.
    Step on_password_message(protocol::ByteSpan body);
    // The result of the derivation the last step asked for.
    Step on_derived(const protocol::ScramSecret& derived);
    // PAM's or LDAP's verdict on the password the last step asked it to check; on success the
    // password is kept as the user's (secret(): the pool's servers log in with it, as
    // PgBouncer's do).
    Step on_external_check(bool ok);

    // What the client must send next, in PostgreSQL's words for a message of another type
    // ("expected SASL response, got message type 0"): "SASL response" in a SCRAM exchange,
    // "password response" otherwise.
    [[nodiscard]] const char* expected_response() const {
        return method_ == Method::Scram ? "SASL response" : "password response";
    }
    // How PgBouncer names a failure of this exchange in its log ("closing because: ..."):
    // "\"trust\" authentication failed", "SASL authentication failed" or "password
    // authentication failed".
    [[nodiscard]] const char* failure_reason() const;

    [[nodiscard]] AuthType type() const { return type_; }
    // The secret the client proved it knows (for logging in to the server with it).
    [[nodiscard]] const std::optional<UserSecret>& secret() const { return secret_; }
    // After a successful SCRAM exchange: the ClientKey, which lets pgtether log in to a server
    // that stores the same SCRAM secret without knowing the password.
    [[nodiscard]] std::optional<protocol::ScramKey> scram_client_key() const;
    // After a failure whose reason is for pgtether's log only (the client hears only the usual
    // 28P01): why. Empty otherwise.
    [[nodiscard]] const std::string& failure_log() const { return failure_log_; }

private:
    enum class Method { None, Cleartext, Md5, Scram };
    Step fail_password() const;
    Step begin_scram();
    Step on_cleartext(protocol::ByteSpan body);
    Step on_md5(protocol::ByteSpan body);
    Step on_scram(protocol::ByteSpan body);
    // Plain and md5 secrets; SCRAM secrets are checked in on_derived.
    bool check_cleartext(const std::string& password) const;
    // The ScramServer, once the exchange's derivation is done.
    void build_scram_server(const protocol::ScramSecret& derived);
    // What the pending derivation is for.
    enum class Awaiting { Nothing, ScramSecret, CleartextCheck, ExternalCheck };

    AuthType type_;
    std::string user_;
    std::optional<UserSecret> secret_;
    bool auth_file_configured_;
    int scram_iterations_;
    bool user_listed_ = false;  // the user has a line in auth_file
    Method method_ = Method::None;
    std::array<std::uint8_t, 4> md5_salt_{};
    std::unique_ptr<protocol::ScramServer> scram_;
    bool scram_started_ = false;
    std::string failure_log_;
    Awaiting awaiting_ = Awaiting::Nothing;
    std::string pending_password_;  // CleartextCheck, ExternalCheck: what the client sent
};

}  // namespace pgtether
