// Answering a PostgreSQL server's authentication requests (protocol §55.2.2) with whatever
// credentials the configuration gives for the server user: a plain password (any method), an md5
// secret (md5 only), or SCRAM keys learnt from a client's SCRAM exchange (SCRAM pass-through).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "protocol/backend_messages.hpp"
#include "protocol/scram.hpp"

namespace pgtether {

struct ServerCredentials {
    std::string user;
    std::optional<std::string> password;    // plain text
    std::optional<std::string> md5_secret;  // "md5..." (answers md5 challenges only)
    std::optional<protocol::ScramKey> scram_client_key;
    std::optional<protocol::ScramKey> scram_server_key;
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

private:
    ServerCredentials credentials_;
    std::unique_ptr<protocol::ScramClient> scram_;
};

}  // namespace pgtether
