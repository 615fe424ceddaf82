// Answering a PostgreSQL server's authentication requests (protocol §55.2.2) with whatever
// credentials the configuration gives for the server user: a plain password (any method), an md5
// secret (md5 only), or SCRAM keys learnt from a client's SCRAM exchange (SCRAM pass-through).
//
// What a server may ask for is limited by server_require_auth (core/require_auth.hpp), and a
// SCRAM exchange, once begun, must end with a valid server signature (SASLFinal) before
// AuthenticationOk counts: otherwise a server (or whoever answers in its place) that does not
// know the secret could skip the proof and still be trusted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/startup.hpp"
#include "protocol/scram.hpp"
#include "core/require_auth.hpp"

namespace pgtether {

struct ServerCredentials {
    std::string user;
    std::optional<std::string> password;    // plain text
    std::optional<std::string> md5_secret;  // "md5..." (answers md5 challenges only)
    std::optional<protocol::ScramKey> scram_client_key;
    std::optional<protocol::ScramKey> scram_server_key;
    RequireAuth require_auth;  // server_require_auth
};

class ServerLogin {
public:
    explicit ServerLogin(ServerCredentials credentials);
    ~ServerLogin();

    struct Reply {
        bool ok = true;
        bool authenticated = false;  // AuthenticationOk seen
        std::string send;            // bytes for the server
        std::string error;           // when !ok
    };
    Reply on_authentication(const protocol::AuthenticationMessage& message);

    // One backend message of the login (protocol §55.2.1 "Start-up"): the authentication
    // exchange, then the session's ParameterStatus and BackendKeyData until ReadyForQuery. The
    // same for pooled servers and side connections; what a failure means is theirs to say.
    struct Step {
        enum class Kind {
            Continue,     // read on (after sending `send`, if any)
            Ready,        // ReadyForQuery: logged in
            Refused,      // our side of the authentication exchange failed: `text` says why
            ServerError,  // the server's ErrorResponse: `error`
            Invalid,      // a malformed or unexpected message: `text` says which
        };
        Kind kind = Kind::Continue;
        std::string send;  // bytes for the server (an answer to an authentication request)
        std::string text;
        protocol::ErrorFields error;
        std::optional<protocol::ParameterStatus> parameter;  // a ParameterStatus to record
        std::optional<protocol::CancelKey> backend_key;      // BackendKeyData
    };
    [[nodiscard]] Step on_message(char type, protocol::ByteSpan body);
    // Any message of a login is small; a larger one is an attack or a bug.
    static constexpr std::uint32_t kMaxMessage = 1 << 20;

private:
    // Whether server_require_auth lets the server use `method`; the refusal's text otherwise.
    [[nodiscard]] std::optional<std::string> refused(AuthMethodBit method, const char* what) const;

    ServerCredentials credentials_;
    std::unique_ptr<protocol::ScramClient> scram_;
    bool scram_verified_ = false;  // SASLFinal carried the right server signature
    bool answered_ = false;        // an authentication exchange was completed from our side
};

}  // namespace pgtether
