#include "proxy/server/server_tls.hpp"

#include "proxy/net/log.hpp"

#include "protocol/sqlstate.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/server/server.hpp"
#include "proxy/net/tls.hpp"

namespace pgtether::server_tls {

std::shared_ptr<const TlsContext> context_for(const SecuritySetup& security, bool unix_socket) {
    if (unix_socket) return nullptr;
    return security.server_tls;
}

Answer handle_answer(protocol::ByteSpan data, Stream& stream, const TlsContext& context,
                     const std::string& host) {
    Answer answer;
    if (data.empty()) return answer;
    answer.consumed = 1;
    switch (data[0]) {
        case 'S':
            if (data.size() > 1) {
                // Bytes after the 'S' came before any encryption: whoever sits on the path could
                // have written them (CVE-2021-23222). Never read them as the server's words.
                answer.kind = Answer::Kind::Failed;
                answer.error = "server sent unencrypted data after accepting TLS";
                return answer;
            }
            if (!stream.start_tls(context, host)) {
                answer.kind = Answer::Kind::Failed;
                answer.error = "cannot start TLS: " + stream.tls_error();
                return answer;
            }
            answer.kind = Answer::Kind::Tls;
            return answer;
        case 'N':
            if (context.mode() >= SslMode::Require) {
                answer.kind = Answer::Kind::Failed;
                answer.error =
                    std::string("server does not support TLS, but server_tls_sslmode = ") +
                    to_string(context.mode());
                return answer;
            }
            answer.kind = Answer::Kind::Plaintext;
            return answer;
        case 'E':
            // An ErrorResponse instead of an answer: a server too old to know SSLRequest.
            answer.kind = Answer::Kind::Failed;
            answer.error = "server answered the SSLRequest with an error";
            return answer;
        default:
            answer.kind = Answer::Kind::Failed;
            answer.error = "invalid answer to SSLRequest from server";
            return answer;
    }
}

}  // namespace pgtether::server_tls

namespace pgtether {

// Server's side of the negotiation (the rest of Server is in server.cpp).

std::size_t Server::handle_tls_answer(protocol::ByteSpan data) {
    auto answer = server_tls::handle_answer(data, stream_, *tls_context_, host_);
    switch (answer.kind) {
        case server_tls::Answer::Kind::NeedMore:
            return 0;
        case server_tls::Answer::Kind::Failed:
            login_failed(
                protocol::fatal_error(protocol::sqlstate::kConnectionFailure,
                                      "TLS negotiation with server failed: " + answer.error));
            return data.size();
        case server_tls::Answer::Kind::Plaintext:
            send_startup();
            return answer.consumed;
        case server_tls::Answer::Kind::Tls:
            // TlsAnswer until the handshake is done: on_stream_tls_ready() continues.
            return answer.consumed;
    }
    return data.size();
}

void Server::on_stream_tls_ready(const std::string& error) {
    if (state_ == State::Closing) return;
    if (!error.empty()) {
        login_failed(protocol::fatal_error(protocol::sqlstate::kConnectionFailure,
                                           "TLS handshake with server failed: " + error));
        return;
    }
    if (const auto* tls = stream_.tls()) {
        spdlog::debug("S-{} {}/{}: TLS established: {} {}", id_, pool_.database_name(),
                      pool_.user_name(), tls->protocol_version(), tls->cipher());
    }
    send_startup();
}

}  // namespace pgtether
