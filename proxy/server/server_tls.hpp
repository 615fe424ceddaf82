// The connecting half of PostgreSQL's TLS negotiation (protocol §55.2.10 "SSL Session
// Encryption"), shared by pooled server connections and auth_query's side connections: send
// SSLRequest, read the one-byte answer, then either run the TLS handshake ('S') or continue in
// plaintext ('N', when server_tls_sslmode allows it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "protocol/bytes.hpp"
#include "proxy/net/security.hpp"
#include "proxy/net/stream.hpp"

namespace pgtether::server_tls {

// The context to use for a new connection, or nullptr for plaintext: server_tls_sslmode is
// disable, or the server is reached over a Unix socket (PostgreSQL never offers TLS there, and
// PgBouncer does not ask either).
[[nodiscard]] std::shared_ptr<const TlsContext> context_for(const SecuritySetup& security,
                                                            bool unix_socket);

struct Answer {
    enum class Kind {
        NeedMore,   // the answer byte has not arrived yet
        Plaintext,  // 'N' and the mode allows plaintext: send the StartupMessage unencrypted
        Tls,        // 'S': the handshake has started; the stream reports its outcome
        Failed,     // see error
    };
    Kind kind = Kind::NeedMore;
    std::size_t consumed = 0;
    std::string error;
};

// Handles the server's answer at the start of `data` (everything received so far).
[[nodiscard]] Answer handle_answer(protocol::ByteSpan data, Stream& stream,
                                   const TlsContext& context, const std::string& host);

}  // namespace pgtether::server_tls
