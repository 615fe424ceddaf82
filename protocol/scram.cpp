#include "protocol/scram.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>
#include <climits>
#include <utility>

#include "protocol/base64.hpp"
#include "protocol/constant_time.hpp"

namespace pgtether::protocol {

namespace {

constexpr std::string_view kSecretPrefix = "SCRAM-SHA-256$";

// ---- crypto primitives (RFC 5802 §2.2: H = SHA-256, HMAC = HMAC-SHA-256, Hi = PBKDF2) ----

std::string_view view(const ScramKey& key) {
    return {reinterpret_cast<const char*>(key.data()), key.size()};
}

const unsigned char* bytes_of(std::string_view s) {
    return reinterpret_cast<const unsigned char*>(s.data());
}

[[nodiscard]] bool sha256(std::string_view data, ScramKey& out) {
    unsigned int length = 0;
    return EVP_Digest(data.data(), data.size(), out.data(), &length, EVP_sha256(), nullptr) == 1 &&
           length == out.size();
}

[[nodiscard]] bool hmac_sha256(std::string_view key, std::string_view data, ScramKey& out) {
    if (key.size() > static_cast<std::size_t>(INT_MAX)) return false;
    unsigned int length = 0;
    return HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), bytes_of(data), data.size(),
                out.data(), &length) != nullptr &&
           length == out.size();
}

// Hi(password, salt, i) of RFC 5802 §2.2, which is PBKDF2 with HMAC-SHA-256 and one output block.
// PKCS5_PBKDF2_HMAC runs in PKCS#5 mode, i.e. without the SP 800-132 minimums on salt length and
// iteration count that do not apply to SCRAM.
[[nodiscard]] bool salted_password(std::string_view password, std::string_view salt, int iterations,
                                   ScramKey& out) {
    if (iterations < 1 || salt.empty() || password.size() > static_cast<std::size_t>(INT_MAX) ||
        salt.size() > static_cast<std::size_t>(INT_MAX)) {
        return false;
    }
    return PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), bytes_of(salt),
                             static_cast<int>(salt.size()), iterations, EVP_sha256(),
                             static_cast<int>(out.size()), out.data()) == 1;
}

// ClientKey and ServerKey from SaltedPassword (RFC 5802 §3).
[[nodiscard]] bool derive_keys(const ScramKey& salted, ScramKey& client_key, ScramKey& server_key) {
    return hmac_sha256(view(salted), "Client Key", client_key) &&
           hmac_sha256(view(salted), "Server Key", server_key);
}

ScramKey xor_keys(const ScramKey& a, const ScramKey& b) {
    ScramKey out{};
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::uint8_t>(a[i] ^ b[i]);
    return out;
}

std::optional<ScramKey> decode_key(std::string_view text) {
    auto raw = base64_decode(text);
    if (!raw || raw->size() != ScramKey{}.size()) return std::nullopt;
    ScramKey key{};
    for (std::size_t i = 0; i < key.size(); ++i)
        key[i] = static_cast<std::uint8_t>((*raw)[i]);
    return key;
}

// ---- message syntax (RFC 5802 §7) ----

// posit-number = %x31-39 *DIGIT, and it must fit an int.
std::optional<int> parse_positive_int(std::string_view text) {
    if (text.empty() || text[0] < '1' || text[0] > '9') return std::nullopt;
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// printable = %x21-2B / %x2D-7E ;; printable ASCII except ","
bool is_printable_nonce(std::string_view nonce) {
    if (nonce.empty()) return false;
    for (char c : nonce) {
        if (c < 0x21 || c > 0x7e || c == ',') return false;
    }
    return true;
}

bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// An extension attribute: any letter RFC 5802 does not assign. A known letter in extension
// position (a repeated "r=", a "p=" before "r=" ...) is a malformed message, not an extension.
bool is_extension_attribute(char c) {
    return is_alpha(c) && std::string_view("anmrcsipve").find(c) == std::string_view::npos;
}

// A cursor over the comma-separated fields of a SCRAM message. Every read is bounded by the
// message; past the end (or on a field of the wrong shape) reads return nullopt.
class AttributeReader {
  public:
    explicit AttributeReader(std::string_view message) : message_(message) {}

    [[nodiscard]] bool at_end() const { return done_; }
    // Offset of the next field in the message (message size once at the end).
    [[nodiscard]] std::size_t position() const { return pos_; }

    // The next raw field (up to the next ',' or the end), which may be empty.
    std::optional<std::string_view> field() {
        if (done_) return std::nullopt;
        std::size_t comma = message_.find(',', pos_);
        if (comma == std::string_view::npos) {
            std::string_view f = message_.substr(pos_);
            pos_ = message_.size();
            done_ = true;
            return f;
        }
        std::string_view f = message_.substr(pos_, comma - pos_);
        pos_ = comma + 1;
        return f;
    }

    // The letter of the next field if it has the shape "<ALPHA>=...", without consuming it.
    [[nodiscard]] std::optional<char> peek_attribute() const {
        if (done_) return std::nullopt;
        std::string_view rest = message_.substr(pos_);
        if (rest.size() < 2 || !is_alpha(rest[0]) || rest[1] != '=') return std::nullopt;
        return rest[0];
    }

    // Reads "<attr>=<value>" and returns the value (possibly empty; callers validate it).
    std::optional<std::string_view> attribute(char attr) {
        if (peek_attribute() != attr) return std::nullopt;
        auto f = field();
        return f->substr(2);
    }

    // Consumes extension attributes ("," extensions in the RFC grammar) up to, not including, the
    // attribute `stop` (or to the end when stop is 0). PostgreSQL ignores extensions; so do we,
    // but each must be well-formed: unassigned letter, non-empty value.
    [[nodiscard]] bool skip_extensions(char stop) {
        while (!done_) {
            auto attr = peek_attribute();
            if (!attr) return false;
            if (*attr == stop) return true;
            if (!is_extension_attribute(*attr)) return false;
            if (attribute(*attr)->empty()) return false;
        }
        return stop == 0;
    }

  private:
    std::string_view message_;
    std::size_t pos_ = 0;
    bool done_ = false;
};

// Values never contain NUL (RFC 5802 value-char excludes it); PostgreSQL reads these messages as C
// strings, so a NUL would silently truncate there. Refuse it outright.
bool has_nul(std::string_view message) {
    return message.find('\0') != std::string_view::npos;
}

// saslname (RFC 5802 §5.1): "," and "=" are escaped as "=2C" and "=3D".
std::string escape_saslname(std::string_view user) {
    std::string out;
    out.reserve(user.size());
    for (char c : user) {
        if (c == ',') {
            out += "=2C";
        } else if (c == '=') {
            out += "=3D";
        } else {
            out.push_back(c);
        }
    }
    return out;
}

}  // namespace

// ---- stored secrets ----

std::optional<ScramSecret> parse_scram_secret(std::string_view text) {
    if (!text.starts_with(kSecretPrefix)) return std::nullopt;
    text.remove_prefix(kSecretPrefix.size());
    // <iterations>:<salt>$<StoredKey>:<ServerKey>; base64 contains neither '$' nor ':', so any
    // extra separator makes one of the decodes below fail.
    std::size_t dollar = text.find('$');
    if (dollar == std::string_view::npos) return std::nullopt;
    std::string_view params = text.substr(0, dollar);
    std::string_view keys = text.substr(dollar + 1);
    std::size_t colon1 = params.find(':');
    std::size_t colon2 = keys.find(':');
    if (colon1 == std::string_view::npos || colon2 == std::string_view::npos) return std::nullopt;

    auto iterations = parse_positive_int(params.substr(0, colon1));
    auto salt = base64_decode(params.substr(colon1 + 1));
    auto stored_key = decode_key(keys.substr(0, colon2));
    auto server_key = decode_key(keys.substr(colon2 + 1));
    if (!iterations || !salt || salt->empty() || !stored_key || !server_key) return std::nullopt;
    return ScramSecret{*iterations, std::move(*salt), *stored_key, *server_key};
}

std::string format_scram_secret(const ScramSecret& secret) {
    std::string out(kSecretPrefix);
    out += std::to_string(secret.iterations);
    out += ':';
    out += base64_encode(secret.salt);
    out += '$';
    out += base64_encode(view(secret.stored_key));
    out += ':';
    out += base64_encode(view(secret.server_key));
    return out;
}

std::optional<ScramClientKeys> derive_scram_client_keys(std::string_view password,
                                                      std::string_view salt, int iterations) {
    ScramClientKeys keys;
    ScramKey salted{};
    if (!salted_password(password, salt, iterations, salted) ||
        !derive_keys(salted, keys.client_key, keys.server_key)) {
        return std::nullopt;
    }
    return keys;
}

ScramSecret make_scram_secret(std::string_view password, std::string_view salt, int iterations) {
    ScramSecret secret;
    ScramKey salted{};
    ScramKey client_key{};
    if (!salted_password(password, salt, iterations, salted) ||
        !derive_keys(salted, client_key, secret.server_key) ||
        !sha256(view(client_key), secret.stored_key)) {
        return ScramSecret{};
    }
    secret.iterations = iterations;
    secret.salt = std::string(salt);
    return secret;
}

// ---- server ----

ScramServer::ScramServer(ScramSecret secret, std::string_view server_nonce)
    : ScramServer(std::move(secret), base64_encode(server_nonce), VerbatimNonce{}) {}

ScramServer::ScramServer(ScramSecret secret, std::string nonce, VerbatimNonce)
    : secret_(std::move(secret)), server_nonce_(std::move(nonce)) {}

ScramServer ScramServer::with_printable_nonce(ScramSecret secret, std::string_view nonce) {
    return ScramServer(std::move(secret), std::string(nonce), VerbatimNonce{});
}

ScramServer::Step ScramServer::fail(std::string message, bool protocol_violation) {
    state_ = State::Failed;
    client_key_.reset();
    return Step{Status::Failed, std::move(message), protocol_violation};
}

ScramServer::Step ScramServer::client_first(std::string_view message) {
    if (state_ != State::AwaitingClientFirst) {
        return fail("unexpected SCRAM client-first-message", true);
    }
    if (secret_.iterations < 1 || secret_.salt.empty()) {
        return fail("stored SCRAM secret is not usable", false);
    }
    if (!is_printable_nonce(server_nonce_)) return fail("server nonce is not printable", false);
    if (has_nul(message)) return fail("malformed SCRAM message (NUL byte)", true);

    // gs2-header = gs2-cbind-flag "," [ authzid ] ","  (RFC 5802 §7)
    AttributeReader reader(message);
    auto cbind_flag = reader.field();
    if (!cbind_flag) return fail("malformed SCRAM message (empty client-first-message)", true);
    if (cbind_flag->starts_with("p=")) {
        return fail("client requested SCRAM channel binding, but SCRAM-SHA-256-PLUS is not offered",
                    true);
    }
    if (*cbind_flag != "n" && *cbind_flag != "y") {
        return fail("malformed SCRAM message (unexpected channel-binding flag)", true);
    }
    auto authzid = reader.field();
    if (!authzid) return fail("malformed SCRAM message (incomplete gs2 header)", true);
    if (!authzid->empty()) {
        // PostgreSQL authenticates the StartupMessage user only and refuses "a=" the same way.
        if (authzid->starts_with("a=")) {
            return fail("client uses authorization identity, but it is not supported", true);
        }
        return fail("malformed SCRAM message (unexpected attribute in gs2 header)", true);
    }
    const std::size_t bare_start = reader.position();
    if (reader.at_end()) return fail("malformed SCRAM message (missing client-first-bare)", true);

    // client-first-message-bare = [reserved-mext ","] username "," nonce ["," extensions]
    if (reader.peek_attribute() == 'm') {
        return fail("client requires an unsupported SCRAM extension", true);
    }
    if (!reader.attribute('n')) return fail("malformed SCRAM message (expected n=)", true);
    auto client_nonce = reader.attribute('r');
    if (!client_nonce || !is_printable_nonce(*client_nonce)) {
        return fail("malformed SCRAM message (invalid client nonce)", true);
    }
    if (!reader.skip_extensions(0)) {
        return fail("malformed SCRAM message (garbage at end of client-first-message)", true);
    }

    gs2_header_ = std::string(message.substr(0, bare_start));
    client_first_bare_ = std::string(message.substr(bare_start));
    nonce_ = std::string(*client_nonce) + server_nonce_;
    // server-first-message = [reserved-mext ","] nonce "," salt "," iteration-count
    server_first_ = "r=" + nonce_ + ",s=" + base64_encode(secret_.salt) +
                    ",i=" + std::to_string(secret_.iterations);
    state_ = State::AwaitingClientFinal;
    return Step{Status::Continue, server_first_};
}

ScramServer::Step ScramServer::client_final(std::string_view message) {
    if (state_ != State::AwaitingClientFinal) {
        return fail("unexpected SCRAM client-final-message", true);
    }
    if (has_nul(message)) return fail("malformed SCRAM message (NUL byte)", true);

    // client-final-message = channel-binding "," nonce ["," extensions] "," proof
    AttributeReader reader(message);
    auto binding = reader.attribute('c');
    if (!binding) return fail("malformed SCRAM message (expected c=)", true);
    // Without channel binding, c= is just the base64 of the gs2 header the client sent first
    // ("biws" for "n,,", "eSws" for "y,,"); a different flag here would be a downgrade.
    if (*binding != base64_encode(gs2_header_)) {
        return fail("SCRAM channel binding check failed", true);
    }
    auto nonce = reader.attribute('r');
    if (!nonce) return fail("malformed SCRAM message (expected r=)", true);
    if (*nonce != nonce_) return fail("SCRAM nonce mismatch", true);
    if (!reader.skip_extensions('p')) {
        return fail("malformed SCRAM message (expected p= in client-final-message)", true);
    }
    // The proof is not part of AuthMessage: cut before the "," that precedes "p=".
    const std::string_view without_proof = message.substr(0, reader.position() - 1);
    auto proof_text = reader.attribute('p');
    auto proof = proof_text ? decode_key(*proof_text) : std::nullopt;
    if (!proof) return fail("malformed SCRAM message (malformed proof)", true);
    if (!reader.at_end()) {
        return fail("malformed SCRAM message (garbage at end of client-final-message)", true);
    }

    std::string auth_message = client_first_bare_;
    auth_message += ',';
    auth_message += server_first_;
    auth_message += ',';
    auth_message += without_proof;

    ScramKey client_signature{};
    ScramKey recomputed_stored_key{};
    ScramKey server_signature{};
    if (!hmac_sha256(view(secret_.stored_key), auth_message, client_signature)) {
        return fail("SCRAM computation failed", false);
    }
    // ClientKey = ClientProof XOR ClientSignature; the proof is right iff H(ClientKey) is the
    // StoredKey we hold (RFC 5802 §3).
    const ScramKey client_key = xor_keys(*proof, client_signature);
    if (!sha256(view(client_key), recomputed_stored_key) ||
        !hmac_sha256(view(secret_.server_key), auth_message, server_signature)) {
        return fail("SCRAM computation failed", false);
    }
    if (!constant_time_equal(view(recomputed_stored_key), view(secret_.stored_key))) {
        return fail("SCRAM proof does not match the stored secret", false);
    }
    state_ = State::Done;
    client_key_ = client_key;
    return Step{Status::Done, "v=" + base64_encode(view(server_signature))};
}

// ---- client ----

ScramClient::ScramClient(std::string_view password, std::string_view client_nonce,
                         std::string_view user)
    : password_(password),
      nonce_(base64_encode(client_nonce)),
      client_first_bare_("n=" + escape_saslname(user) + ",r=" + nonce_) {}

ScramClient::ScramClient(const ScramKey& client_key, const ScramKey& server_key,
                         std::string_view client_nonce, std::string_view user)
    : have_keys_(true),
      client_key_(client_key),
      server_key_(server_key),
      nonce_(base64_encode(client_nonce)),
      client_first_bare_("n=" + escape_saslname(user) + ",r=" + nonce_) {}

std::string ScramClient::client_first() const {
    // gs2 header "n,,": we do not support channel binding and send no authzid (like libpq without
    // channel binding, fe-auth-scram.c).
    return "n,," + client_first_bare_;
}

std::optional<std::string> ScramClient::handle_server_first(std::string_view message) {
    // One exchange per object: a second server-first-message is a protocol error.
    if (server_first_seen_) return std::nullopt;
    server_first_seen_ = true;
    if (nonce_.empty() || has_nul(message)) return std::nullopt;

    // server-first-message = [reserved-mext ","] nonce "," salt "," iteration-count
    //                        ["," extensions]
    AttributeReader reader(message);
    if (reader.peek_attribute() == 'm') return std::nullopt;  // mandatory extension: unsupported
    auto nonce = reader.attribute('r');
    // The server must append its own non-empty part to our nonce (RFC 5802 §5.1 "r").
    if (!nonce || !is_printable_nonce(*nonce) || nonce->size() <= nonce_.size() ||
        !nonce->starts_with(nonce_)) {
        return std::nullopt;
    }
    auto salt_text = reader.attribute('s');
    auto salt = salt_text ? base64_decode(*salt_text) : std::nullopt;
    if (!salt || salt->empty()) return std::nullopt;
    auto iterations_text = reader.attribute('i');
    auto iterations = iterations_text ? parse_positive_int(*iterations_text) : std::nullopt;
    if (!iterations || *iterations > kScramMaxIterations) return std::nullopt;
    if (!reader.skip_extensions(0)) return std::nullopt;

    ScramKey client_key = client_key_;
    ScramKey server_key = server_key_;
    if (!have_keys_) {
        const auto keys = deriver_ ? deriver_(password_, *salt, *iterations)
                                   : derive_scram_client_keys(password_, *salt, *iterations);
        if (!keys) return std::nullopt;
        client_key = keys->client_key;
        server_key = keys->server_key;
    }
    ScramKey stored_key{};
    if (!sha256(view(client_key), stored_key)) return std::nullopt;

    std::string without_proof = "c=" + base64_encode("n,,") + ",r=" + std::string(*nonce);
    std::string auth_message = client_first_bare_;
    auth_message += ',';
    auth_message += message;
    auth_message += ',';
    auth_message += without_proof;

    ScramKey client_signature{};
    ScramKey server_signature{};
    if (!hmac_sha256(view(stored_key), auth_message, client_signature) ||
        !hmac_sha256(view(server_key), auth_message, server_signature)) {
        return std::nullopt;
    }
    expected_server_signature_ = server_signature;
    const ScramKey proof = xor_keys(client_key, client_signature);
    return without_proof + ",p=" + base64_encode(view(proof));
}

bool ScramClient::verify_server_final(std::string_view message) const {
    if (!expected_server_signature_ || has_nul(message)) return false;
    // server-final-message = (server-error / verifier) ["," extensions]
    AttributeReader reader(message);
    auto verifier = reader.attribute('v');  // an "e=" error fails here
    auto signature = verifier ? decode_key(*verifier) : std::nullopt;
    if (!signature || !reader.skip_extensions(0)) return false;
    return constant_time_equal(view(*signature), view(*expected_server_signature_));
}

std::optional<std::string> ScramClient::server_error(std::string_view server_final) {
    if (has_nul(server_final)) return std::nullopt;
    AttributeReader reader(server_final);
    auto error = reader.attribute('e');
    if (!error || error->empty() || !reader.skip_extensions(0)) return std::nullopt;
    return std::string(*error);
}

}  // namespace pgtether::protocol
