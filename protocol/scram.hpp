// SCRAM-SHA-256 as PostgreSQL speaks it (protocol §55.3 "SASL Authentication"; RFC 5802 for the
// mechanism, RFC 7677 for the SHA-256 variant). Pure functions and two small state machines, no
// I/O: randomness (nonces, salts) is passed in by the caller so every exchange is reproducible.
//
// The exchange, with the names RFC 5802 §3 uses:
//   SaltedPassword  = PBKDF2-HMAC-SHA-256(password, salt, iterations)
//   ClientKey       = HMAC(SaltedPassword, "Client Key")     StoredKey = SHA-256(ClientKey)
//   ServerKey       = HMAC(SaltedPassword, "Server Key")
//   AuthMessage     = client-first-message-bare "," server-first-message ","
//                     client-final-message-without-proof
//   ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
//   ServerSignature = HMAC(ServerKey, AuthMessage)
// The server stores only StoredKey and ServerKey; a successful proof reveals ClientKey, which is
// what lets a pooler log in to PostgreSQL on a client's behalf without knowing the password
// ("SCRAM pass-through").
//
// Passwords: PostgreSQL normalizes passwords with SASLprep (RFC 4013) before hashing. For ASCII
// passwords SASLprep is the identity; we do not implement the normalization and hash the raw
// bytes of every password. PostgreSQL itself falls back to the raw bytes whenever SASLprep fails
// (e.g. the password is not valid UTF-8), so the only passwords on which we differ are non-ASCII
// UTF-8 ones that SASLprep would change (e.g. non-NFKC forms or mapped-to-nothing characters).
//
// Channel binding: we never offer SCRAM-SHA-256-PLUS, so a client requesting binding ("p=") is
// refused and "y" (client supports binding, thinks the server does not) is accepted, exactly as
// PostgreSQL does when it does not offer the -PLUS mechanism (auth-scram.c).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace pgtether::protocol {

using ScramKey = std::array<std::uint8_t, 32>;

// The SASL mechanism name in AuthenticationSASL / SASLInitialResponse.
inline constexpr std::string_view kScramSha256Mechanism = "SCRAM-SHA-256";
// PostgreSQL's default iteration count (scram_iterations / SCRAM_DEFAULT_ITERATIONS).
inline constexpr int kScramDefaultIterations = 4096;
// The most PBKDF2 iterations pgtether ever computes: for a stored secret it checks a cleartext
// password against (auth_type = plain, hba `password`), and as a client for a server's
// server-first-message. PBKDF2 runs on the worker's event loop at ~1-1.5 µs per iteration, so the
// cap bounds one login's stall of every other client of that worker to ~0.1-0.15 s. Without it,
// any role could `ALTER ROLE self PASSWORD 'SCRAM-SHA-256$2000000000:...'` (or a hostile server
// send i=2147483647) and freeze the worker for minutes with one login. 100,000 is ~25 times
// PostgreSQL's default of 4096 (scram_iterations) and above what hardening guides suggest for
// SCRAM secrets; a secret beyond it fails like a wrong password (the log says why).
inline constexpr int kScramMaxIterations = 100'000;

struct ScramSecret {
    int iterations = 0;
    std::string salt;  // raw bytes
    ScramKey stored_key{};
    ScramKey server_key{};
};

// Parses "SCRAM-SHA-256$<iterations>:<base64 salt>$<base64 StoredKey>:<base64 ServerKey>" (the
// pg_authid.rolpassword form, also accepted in PgBouncer's userlist.txt). Strict: iterations is a
// positive decimal int without sign or leading zeros, the salt is non-empty, both keys decode to
// exactly 32 bytes, all base64 canonical. So format_scram_secret(*parse_scram_secret(s)) == s.
std::optional<ScramSecret> parse_scram_secret(std::string_view text);
std::string format_scram_secret(const ScramSecret& secret);

// Derives a secret from a plain password (PBKDF2-HMAC-SHA-256 over the raw password bytes, see the
// SASLprep note above). `iterations` must be >= 1 and `salt` non-empty; otherwise (or if OpenSSL
// fails) the result has iterations == 0, which parse_scram_secret never produces and ScramServer
// refuses to authenticate against.
ScramSecret make_scram_secret(std::string_view password, std::string_view salt, int iterations);

// We are the server (authenticating a client against a stored secret).
class ScramServer {
  public:
    enum class Status { Continue, Done, Failed };
    struct Step {
        Status status;
        // server-first or server-final message to send; an error text for the log when Failed.
        std::string message;
        // When Failed: true if the client broke the protocol (malformed message, wrong nonce,
        // channel binding mismatch: PostgreSQL answers SQLSTATE 08P01), false if the proof was
        // wrong or the secret unusable (28P01 "password authentication failed").
        bool protocol_violation = false;
    };

    // `server_nonce` is raw random bytes (18 is what PostgreSQL uses); it is base64-encoded here.
    ScramServer(ScramSecret secret, std::string_view server_nonce);
    // Uses `nonce` verbatim as the server's half of the nonce (must be printable ASCII without
    // ','). For test vectors such as RFC 7677 §3, whose nonce is not base64 output.
    static ScramServer with_printable_nonce(ScramSecret secret, std::string_view nonce);

    // Handles the SASLInitialResponse payload (client-first-message). Rejects channel binding
    // requests ("p="), authorization identities ("a="), mandatory extensions ("m=") and malformed
    // messages with Failed. The user name in "n=" is ignored (PostgreSQL takes it from the
    // StartupMessage), so it may be empty.
    Step client_first(std::string_view message);
    // Handles the SASLResponse payload (client-final-message); Failed on a wrong proof.
    Step client_final(std::string_view message);
    // After a successful exchange: the ClientKey the proof revealed (for SCRAM pass-through).
    const std::optional<ScramKey>& client_key() const { return client_key_; }

  private:
    enum class State { AwaitingClientFirst, AwaitingClientFinal, Done, Failed };
    struct VerbatimNonce {};
    ScramServer(ScramSecret secret, std::string nonce, VerbatimNonce);

    Step fail(std::string message, bool protocol_violation);

    ScramSecret secret_;
    std::string server_nonce_;  // printable, as sent
    State state_ = State::AwaitingClientFirst;
    std::string gs2_header_;         // "n,," or "y,,": c= must echo it in base64
    std::string client_first_bare_;  // for AuthMessage
    std::string server_first_;       // for AuthMessage
    std::string nonce_;              // client nonce + server nonce
    std::optional<ScramKey> client_key_;
};

// We are the client (logging in to PostgreSQL).
// A client's two keys, derived from a password with the server's salt and iteration count
// (SaltedPassword = PBKDF2, then two HMACs): the costly step of a SCRAM login, and a function of
// those three inputs only.
struct ScramClientKeys {
    ScramKey client_key{};
    ScramKey server_key{};
};
[[nodiscard]] std::optional<ScramClientKeys> derive_scram_client_keys(std::string_view password,
                                                                     std::string_view salt,
                                                                     int iterations);

class ScramClient {
  public:
    // Where a password's keys come from once the server has named its salt and iteration count:
    // derive_scram_client_keys unless set (a caller that logs in often with one password may
    // remember the result).
    using KeyDeriver = std::function<std::optional<ScramClientKeys>(
        std::string_view password, std::string_view salt, int iterations)>;

    // `client_nonce` is raw random bytes (libpq uses 18); it is base64-encoded here, so it must not
    // be empty. `user` goes into "n=" (escaped per RFC 5802 §5.1); PostgreSQL ignores it and libpq
    // sends it empty, which is the default.
    //
    // Either from a password...
    ScramClient(std::string_view password, std::string_view client_nonce,
                std::string_view user = {});
    // ...or from keys learnt in a pass-through exchange (no password known). The server's salt and
    // iteration count are then not used: the keys must come from the secret the server stores.
    ScramClient(const ScramKey& client_key, const ScramKey& server_key,
                std::string_view client_nonce, std::string_view user = {});

    void set_key_deriver(KeyDeriver deriver) { deriver_ = std::move(deriver); }

    std::string client_first() const;  // "n,,n=<user>,r=<nonce>"
    // Handles server-first-message; returns client-final-message, or nullopt when the message is
    // malformed, the nonce does not extend ours, the salt is empty, the iteration count is < 1 or
    // > kScramMaxIterations, or this is not the first call.
    std::optional<std::string> handle_server_first(std::string_view message);
    // Verifies the server signature in server-final-message (constant time). False for a malformed
    // message, an "e=" error, a wrong signature, or before handle_server_first succeeded.
    [[nodiscard]] bool verify_server_final(std::string_view message) const;

    // The error text of a server-final-message of the form "e=<server-error-value>", for logging.
    static std::optional<std::string> server_error(std::string_view server_final);

  private:
    std::string password_;
    KeyDeriver deriver_;
    bool have_keys_ = false;  // true: client_key_/server_key_ given, no password
    ScramKey client_key_{};
    ScramKey server_key_{};
    std::string nonce_;  // our printable nonce
    std::string client_first_bare_;
    bool server_first_seen_ = false;
    std::optional<ScramKey> expected_server_signature_;
};

}  // namespace pgtether::protocol
