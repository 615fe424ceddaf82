#include "proxy/client/client_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/md5_auth.hpp"
#include "protocol/sqlstate.hpp"

namespace pgtether {

namespace {

template <std::size_t N>
std::array<std::uint8_t, N> random_bytes() {
    std::array<std::uint8_t, N> out{};
    if (RAND_bytes(out.data(), static_cast<int>(N)) != 1) {
        // OpenSSL's CSPRNG does not fail once seeded; abort rather than authenticate with a
        // predictable nonce.
        std::abort();
    }
    return out;
}

// Constant-time comparison, so response timing says nothing about how much of a guess was right.
bool equal_secrets(std::string_view a, std::string_view b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view bytes_view(const auto& array) {
    return {reinterpret_cast<const char*>(array.data()), array.size()};
}

}  // namespace

ClientAuth::ClientAuth(AuthType type, const AuthFile& auth_file, bool auth_file_configured,
                       std::string user, int scram_iterations)
    : type_(type),
      user_(std::move(user)),
      auth_file_configured_(auth_file_configured),
      scram_iterations_(scram_iterations) {
    if (auto it = auth_file.find(user_); it != auth_file.end()) {
        user_listed_ = true;
        // An empty secret never authenticates anyone (PostgreSQL refuses empty passwords too),
        // but still lists the user for trust.
        if (!it->second.secret.empty()) secret_ = it->second;
    }
}

ClientAuth::ClientAuth(AuthType type, std::optional<UserSecret> fetched_secret, bool user_found,
                       std::string user, int scram_iterations)
    : type_(type),
      user_(std::move(user)),
      auth_file_configured_(true),
      scram_iterations_(scram_iterations),
      user_listed_(user_found) {
    if (fetched_secret && !fetched_secret->secret.empty()) secret_ = std::move(fetched_secret);
}

ClientAuth::~ClientAuth() = default;

const char* ClientAuth::failure_reason() const {
    if (type_ == AuthType::Trust) return "\"trust\" authentication failed";
    if (type_ == AuthType::Pam) return "PAM authentication failed";
    if (type_ == AuthType::Ldap) return "LDAP authentication failed";
    if (method_ == Method::Scram) return "SASL authentication failed";
    return "password authentication failed";
}

ClientAuth::Step ClientAuth::fail_password() const {
    return {Outcome::Failure,
            {},
            protocol::sqlstate::kInvalidPassword,
            "password authentication failed for user \"" + user_ + "\"",
            {}, {}};
}

ClientAuth::Step ClientAuth::start() {
    Step step;
    switch (type_) {
        case AuthType::Any:
            return {Outcome::Success, {}, {}, {}, {}, {}};
        case AuthType::Trust:
            if (auth_file_configured_ && !user_listed_) return fail_password();
            return {Outcome::Success, {}, {}, {}, {}, {}};
        case AuthType::Plain:
        case AuthType::Pam:
        case AuthType::Ldap:
            // PAM and LDAP need the password itself, as PostgreSQL's methods ask for it.
            method_ = Method::Cleartext;
            protocol::append_authentication(step.reply, protocol::AuthRequest::CleartextPassword);
            return step;
        case AuthType::Md5:
            if (secret_ && secret_->kind == SecretKind::Scram) return begin_scram();
            method_ = Method::Md5;
            md5_salt_ = random_bytes<4>();
            protocol::append_auth_md5(step.reply, md5_salt_);
            return step;
        case AuthType::ScramSha256:
            return begin_scram();
        default:
            return {Outcome::Failure,
                    {},
                    protocol::sqlstate::kInvalidAuthorization,
                    std::string("authentication method \"") + to_string(type_) +
                        "\" is not supported by pgtether",
                    {}, {}};
    }
}

ClientAuth::Step ClientAuth::begin_scram() {
    method_ = Method::Scram;
    Step step;
    protocol::append_auth_sasl(step.reply, {"SCRAM-SHA-256"});
    // One derivation, whoever the user: the keys of a plain-text password, or the same work on a
    // random password whose result is dropped (a SCRAM secret needs none, an md5 secret or an
    // unknown user gets a mock secret). Sent with AuthenticationSASL, it runs while the client
    // answers; its client-first-message waits for it.
    auto salt = random_bytes<16>();
    KeyDerivation derivation;
    derivation.salt = std::string(bytes_view(salt));
    derivation.iterations = scram_iterations_;
    if (secret_ && secret_->kind == SecretKind::Plain) {
        derivation.password = secret_->secret;
    } else {
        derivation.password = std::string(bytes_view(random_bytes<16>()));
    }
    awaiting_ = Awaiting::ScramSecret;
    step.derive = std::move(derivation);
    return step;
}

void ClientAuth::build_scram_server(const protocol::ScramSecret& derived) {
    // Built for every user alike, so an unknown one goes through the same exchange as a known one
    // and fails only at the proof (no user-name probing through timing or message shape).
    std::optional<protocol::ScramSecret> secret;
    if (secret_) {
        if (secret_->kind == SecretKind::Scram) {
            secret = protocol::parse_scram_secret(secret_->secret);
        } else if (secret_->kind == SecretKind::Plain) {
            secret = derived;
        }
        // An md5 secret cannot verify a SCRAM proof: fall through to a mock secret.
    }
    if (!secret) {
        // A mock secret with random keys: the exchange proceeds and the proof never matches.
        protocol::ScramSecret mock;
        mock.iterations = scram_iterations_;
        auto salt = random_bytes<16>();
        mock.salt.assign(reinterpret_cast<const char*>(salt.data()), salt.size());
        mock.stored_key = random_bytes<32>();
        mock.server_key = random_bytes<32>();
        secret = mock;
    }
    auto nonce = random_bytes<18>();
    scram_ = std::make_unique<protocol::ScramServer>(*secret, bytes_view(nonce));
}

ClientAuth::Step ClientAuth::on_derived(const protocol::ScramSecret& derived) {
    const Awaiting awaiting = awaiting_;
    awaiting_ = Awaiting::Nothing;
    switch (awaiting) {
        case Awaiting::ScramSecret:
            build_scram_server(derived);
            return {};
        case Awaiting::CleartextCheck: {
            bool ok = false;
            if (secret_ && secret_->kind == SecretKind::Scram) {
                auto stored = protocol::parse_scram_secret(secret_->secret);
                ok = stored && derived.iterations > 0 &&
                     CRYPTO_memcmp(derived.stored_key.data(), stored->stored_key.data(),
                                   stored->stored_key.size()) == 0 &&
                     CRYPTO_memcmp(derived.server_key.data(), stored->server_key.data(),
                                   stored->server_key.size()) == 0;
            } else {
                ok = check_cleartext(pending_password_);
            }
            if (!ok) {
                pending_password_.clear();
                return fail_password();
            }
            // The password is not kept past the check (nothing logs in with it).
            pending_password_.clear();
            return {Outcome::Success, {}, {}, {}, {}, {}};
        }
        case Awaiting::ExternalCheck:
        case Awaiting::Nothing:
            break;
    }
    return {Outcome::Failure,
            {},
            protocol::sqlstate::kInternalError,
            "unexpected key derivation result",
            {}, {}};
}

ClientAuth::Step ClientAuth::on_external_check(bool ok) {
    if (awaiting_ != Awaiting::ExternalCheck) {
        return {Outcome::Failure, {}, protocol::sqlstate::kInternalError,
                "unexpected password check result", {}, {}};
    }
    awaiting_ = Awaiting::Nothing;
    std::string password = std::move(pending_password_);
    pending_password_.clear();
    if (!ok) {
        // PgBouncer's words (failure_reason); PostgreSQL's SQLSTATE for a failed login.
        return {Outcome::Failure, {}, protocol::sqlstate::kInvalidPassword,
                std::string(failure_reason()) + " for user \"" + user_ + "\"", {}, {}};
    }
    secret_ = UserSecret{user_, std::move(password), SecretKind::Plain};
    return {Outcome::Success, {}, {}, {}, {}, {}};
}

ClientAuth::Step ClientAuth::on_password_message(protocol::ByteSpan body) {
    switch (method_) {
        case Method::Cleartext: return on_cleartext(body);
        case Method::Md5: return on_md5(body);
        case Method::Scram: return on_scram(body);
        case Method::None: break;
    }
    return {Outcome::Failure,
            {},
            protocol::sqlstate::kProtocolViolation,
            "unexpected password message",
            {}, {}};
}

bool ClientAuth::check_cleartext(const std::string& password) const {
    if (!secret_) return false;
    switch (secret_->kind) {
        case SecretKind::Plain:
            return equal_secrets(password, secret_->secret);
        case SecretKind::Md5:
            return equal_secrets(protocol::md5_password_secret(user_, password), secret_->secret);
        case SecretKind::Scram:
            return false;  // derived off the loop: on_derived
    }
    return false;
}

ClientAuth::Step ClientAuth::on_cleartext(protocol::ByteSpan body) {
    auto password = protocol::parse_password_message(body);
    if (!password) {
        return {Outcome::Failure,
                {},
                protocol::sqlstate::kProtocolViolation,
                "invalid password packet",
                {}, {}};
    }
    std::string pw(*password);
    if (pw.empty()) return fail_password();  // for every user alike, without any work
    if (type_ == AuthType::Pam || type_ == AuthType::Ldap) {
        awaiting_ = Awaiting::ExternalCheck;
        pending_password_ = pw;
        Step step;
        step.external_check = std::move(pw);
        return step;
    }
    KeyDerivation derivation;
    if (secret_ && secret_->kind == SecretKind::Scram) {
        // Checking a cleartext password against a SCRAM secret runs PBKDF2 with the secret's
        // iteration count; any role can store a secret with 2^31 iterations (ALTER ROLE ...
        // PASSWORD 'SCRAM-SHA-256$2000000000:...'). Off the loop it would still hold a pool
        // thread for an hour: beyond the cap the login fails like a wrong password, without
        // computing anything.
        auto stored = protocol::parse_scram_secret(secret_->secret);
        if (stored && stored->iterations > protocol::kScramMaxIterations) {
            failure_log_ = "the stored SCRAM secret of user \"" + user_ + "\" has " +
                           std::to_string(stored->iterations) +
                           " iterations, more than pgtether computes for a cleartext "
                           "password (" +
                           std::to_string(protocol::kScramMaxIterations) + ")";
            return fail_password();
        }
        if (!stored) return fail_password();
        derivation = {pw, stored->salt, stored->iterations};
    } else {
        // A plain or md5 secret, or no such user: the same work as for a SCRAM secret of the
        // scram_iterations iterations, dropped, so that timing does not tell them apart.
        derivation = {std::string(bytes_view(random_bytes<16>())),
                      std::string(bytes_view(random_bytes<16>())), scram_iterations_};
    }
    pending_password_ = std::move(pw);
    awaiting_ = Awaiting::CleartextCheck;
    Step step;
    step.derive = std::move(derivation);
    return step;
}

ClientAuth::Step ClientAuth::on_md5(protocol::ByteSpan body) {
    auto response = protocol::parse_password_message(body);
    if (!response) {
        return {Outcome::Failure,
                {},
                protocol::sqlstate::kProtocolViolation,
                "invalid password packet",
                {}, {}};
    }
    if (!secret_ || secret_->kind == SecretKind::Scram ||
        !protocol::md5_verify(user_, secret_->secret, md5_salt_, *response)) {
        return fail_password();
    }
    return {Outcome::Success, {}, {}, {}, {}, {}};
}

ClientAuth::Step ClientAuth::on_scram(protocol::ByteSpan body) {
    Step step;
    if (!scram_started_) {
        auto initial = protocol::parse_sasl_initial_response(body);
        if (!initial || !initial->data) {
            return {Outcome::Failure,
                    {},
                    protocol::sqlstate::kProtocolViolation,
                    "malformed SASL initial response",
                    {}, {}};
        }
        if (initial->mechanism != "SCRAM-SHA-256") {
            return {Outcome::Failure,
                    {},
                    protocol::sqlstate::kProtocolViolation,
                    "client selected an invalid SASL authentication mechanism",
                    {}, {}};
        }
        scram_started_ = true;
        auto first = scram_->client_first(*initial->data);
        if (first.status != protocol::ScramServer::Status::Continue) {
            return {
                Outcome::Failure, {}, protocol::sqlstate::kProtocolViolation, first.message, {}, {}};
        }
        protocol::append_authentication(step.reply, protocol::AuthRequest::SaslContinue,
                                        first.message);
        return step;
    }
    auto final_step = scram_->client_final(protocol::as_chars(body));
    if (final_step.status != protocol::ScramServer::Status::Done) return fail_password();
    // A mock or md5-only secret can never get here: their proofs never match.
    if (!secret_ || secret_->kind == SecretKind::Md5) return fail_password();
    protocol::append_authentication(step.reply, protocol::AuthRequest::SaslFinal,
                                    final_step.message);
    step.outcome = Outcome::Success;
    return step;
}

std::optional<protocol::ScramKey> ClientAuth::scram_client_key() const {
    if (!scram_) return std::nullopt;
    return scram_->client_key();
}

}  // namespace pgtether
