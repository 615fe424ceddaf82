#include "proxy/side_query.hpp"

#include <netdb.h>

#include "protocol/backend_messages.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/startup.hpp"
#include "proxy/server_address.hpp"
#include "proxy/server_tls.hpp"
#include "proxy/tls.hpp"
#include "proxy/worker.hpp"

namespace pgtether {

namespace be = protocol::be;
using protocol::ByteSpan;
using protocol::Frame;
using protocol::FrameStatus;

SideQuery* SideQuery::create(Worker& worker, Request request, Callback done) {
    return new SideQuery(worker, std::move(request), std::move(done));
}

void SideQuery::begin() {
    connect();
}

SideQuery::SideQuery(Worker& worker, Request request, Callback done)
    : worker_(worker),
      request_(std::move(request)),
      done_(std::move(done)),
      stream_(worker, *this) {}

void SideQuery::cancel() {
    done_ = nullptr;
    phase_ = Phase::Done;
    close_connection();
}

// ---------------------------------------------------------------------------------------------
// Connecting (as Server::connect does: Unix socket, IP literal, or a name resolved now;
// proxy/server_address.hpp)

void SideQuery::connect() {
    const auto& db = request_.database;
    host_ = host_for_turn(db, 0);  // a host list: its first host
    bool resolving = false;
    std::string error = start_side_connect(stream_, worker_.loop(), host_, db.port, worker_.config(),
                                           this, on_resolved, unix_socket_, resolving);
    if (resolving) ++pending_resolves_;
    if (!error.empty()) fail(error);
}

void SideQuery::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    auto* self = static_cast<SideQuery*>(req->data);
    delete req;
    --self->pending_resolves_;
    if (self->phase_ == Phase::Done) {
        uv_freeaddrinfo(res);
        self->maybe_delete();
        return;
    }
    if (status != 0 || res == nullptr) {
        uv_freeaddrinfo(res);
        self->fail("cannot resolve " + self->host_ + ": " +
                   uv_strerror(status != 0 ? status : UV_EAI_NONAME));
        return;
    }
    if (auto error = connect_side_tcp(self->stream_, res->ai_addr); !error.empty()) {
        self->fail(error);
    }
    uv_freeaddrinfo(res);
}

void SideQuery::on_stream_connected(int status) {
    if (phase_ == Phase::Done) return;
    if (status != 0) {
        fail(std::string("cannot connect: ") + uv_strerror(status));
        return;
    }
    stream_.start_reading();
    tls_context_ = server_tls::context_for(worker_.security(), unix_socket_);
    if (tls_context_) {
        phase_ = Phase::TlsAnswer;
        stream_.write(protocol::build_ssl_request());
        return;
    }
    send_startup();
}

void SideQuery::on_stream_tls_ready(const std::string& error) {
    if (phase_ == Phase::Done) return;
    if (!error.empty()) {
        fail("TLS handshake failed: " + error);
        return;
    }
    send_startup();
}

void SideQuery::send_startup() {
    phase_ = Phase::Login;
    const auto& db = request_.database;
    // Only what pgtether decides; nothing of a client's (CVE-2025-12819).
    std::vector<std::pair<std::string, std::string>> params = {
        {"user", request_.credentials.user},
        {"database", db.dbname.empty() ? db.name : db.dbname},
        {"application_name", request_.application_name},
    };
    login_ = std::make_unique<ServerLogin>(request_.credentials);
    stream_.write(protocol::build_startup_message(params));
}

void SideQuery::send_query() {
    std::string out;
    std::vector<std::optional<std::string_view>> params;
    params.reserve(request_.params.size());
    for (const auto& param : request_.params) {
        params.push_back(param ? std::optional<std::string_view>(*param) : std::nullopt);
    }
    protocol::append_parse(out, "", request_.query);
    protocol::append_bind(out, "", "", params);
    protocol::append_execute(out, "", 0);
    protocol::append_sync(out);
    stream_.write(out);
}

// ---------------------------------------------------------------------------------------------
// Reading

std::size_t SideQuery::on_stream_data(ByteSpan data) {
    switch (phase_) {
        case Phase::TlsAnswer: {
            auto answer =
                server_tls::handle_answer(data, stream_, *tls_context_, host_);
            switch (answer.kind) {
                case server_tls::Answer::Kind::NeedMore:
                    return 0;
                case server_tls::Answer::Kind::Failed:
                    fail("TLS negotiation failed: " + answer.error);
                    return data.size();
                case server_tls::Answer::Kind::Plaintext:
                    send_startup();
                    return answer.consumed;
                case server_tls::Answer::Kind::Tls:
                    phase_ = Phase::Handshake;
                    return answer.consumed;
            }
            return data.size();
        }
        case Phase::Login: {
            std::size_t n = handle_login(data);
            if (phase_ == Phase::Query && n < data.size()) n += handle_query(data.subspan(n));
            return n;
        }
        case Phase::Query:
            return handle_query(data);
        case Phase::Connecting:
        case Phase::Handshake:
        case Phase::Done:
            return data.size();
    }
    return data.size();
}

std::size_t SideQuery::handle_login(ByteSpan data) {
    std::size_t consumed = 0;
    while (consumed < data.size() && phase_ == Phase::Login) {
        Frame frame = protocol::frame_message(data.subspan(consumed), request_.max_message);
        if (frame.status == FrameStatus::Invalid) {
            fail("invalid message from server during login");
            return data.size();
        }
        if (frame.status == FrameStatus::NeedMore) break;
        ByteSpan body = data.subspan(consumed + protocol::kTypedHeaderSize,
                                     frame.total - protocol::kTypedHeaderSize);
        consumed += frame.total;
        switch (frame.type) {
            case be::kAuthentication: {
                auto message = protocol::parse_authentication(body);
                if (!message) {
                    fail("invalid authentication request from server");
                    return data.size();
                }
                auto reply = login_->on_authentication(*message);
                if (!reply.ok) {
                    fail("login as \"" + request_.credentials.user + "\" failed: " + reply.error);
                    return data.size();
                }
                if (!reply.send.empty()) stream_.write(reply.send);
                break;
            }
            case be::kErrorResponse: {
                auto error = protocol::parse_error_fields(body);
                fail("login as \"" + request_.credentials.user +
                     "\" failed: " + (error ? error->message : std::string("invalid error")));
                return data.size();
            }
            case be::kReadyForQuery: {
                login_.reset();
                logged_in_ = true;
                phase_ = Phase::Query;
                send_query();
                break;
            }
            case be::kParameterStatus:
            case be::kBackendKeyData:
            case be::kNoticeResponse:
            case be::kNegotiateProtocolVersion:
                break;
            default:
                fail(std::string("unexpected message from server during login: '") + frame.type +
                     "'");
                return data.size();
        }
    }
    return consumed;
}

std::size_t SideQuery::handle_query(ByteSpan data) {
    std::size_t consumed = 0;
    while (consumed < data.size() && phase_ == Phase::Query) {
        Frame frame = protocol::frame_message(data.subspan(consumed), request_.max_message);
        if (frame.status == FrameStatus::Invalid) {
            fail("invalid message from server");
            return data.size();
        }
        if (frame.status == FrameStatus::NeedMore) break;
        ByteSpan body = data.subspan(consumed + protocol::kTypedHeaderSize,
                                     frame.total - protocol::kTypedHeaderSize);
        consumed += frame.total;
        switch (frame.type) {
            case be::kDataRow: {
                if (++result_.row_count > request_.max_rows) break;
                auto values = protocol::parse_data_row(body);
                if (!values) {
                    fail("invalid DataRow from server");
                    return data.size();
                }
                Row row;
                row.reserve(values->size());
                for (const auto& value : *values) {
                    if (value) row_bytes_ += value->size();
                    row.push_back(value ? std::optional<std::string>(*value) : std::nullopt);
                }
                if (row_bytes_ > request_.max_row_bytes) {
                    fail("the answer is larger than " + std::to_string(request_.max_row_bytes) +
                         " bytes");
                    return data.size();
                }
                result_.rows.push_back(std::move(row));
                break;
            }
            case be::kErrorResponse:
                if (result_.query_error.empty()) {
                    auto error = protocol::parse_error_fields(body);
                    result_.query_error = error ? error->sqlstate + ": " + error->message
                                                : std::string("invalid error message");
                }
                break;
            case be::kReadyForQuery:
                finish();
                return data.size();
            case be::kParseComplete:
            case be::kBindComplete:
            case be::kRowDescription:
            case be::kNoData:
            case be::kCommandComplete:
            case be::kEmptyQueryResponse:
            case be::kNoticeResponse:
            case be::kParameterStatus:
                break;
            default:
                fail(std::string("unexpected message from server: '") + frame.type + "'");
                return data.size();
        }
    }
    return consumed;
}

// ---------------------------------------------------------------------------------------------
// Finishing

void SideQuery::finish() {
    if (phase_ == Phase::Done) return;
    phase_ = Phase::Done;
    Callback done = std::move(done_);
    done_ = nullptr;
    close_connection();
    if (done) done(std::move(result_));
}

void SideQuery::fail(const std::string& why) {
    result_.error = why;
    finish();
}

void SideQuery::close_connection() {
    if (stream_closed_ || stream_.closing()) {
        maybe_delete();
        return;
    }
    if (logged_in_) {
        std::string terminate;
        protocol::append_terminate(terminate);
        stream_.write(terminate);
    }
    stream_.close();
}

void SideQuery::on_stream_end(int status) {
    std::string why = status == UV_EOF ? "server closed the connection"
                                       : std::string("connection failed: ") + uv_strerror(status);
    if (!stream_.tls_error().empty()) why += " (TLS: " + stream_.tls_error() + ")";
    fail(why);
}

void SideQuery::on_stream_closed() {
    stream_closed_ = true;
    maybe_delete();
}

void SideQuery::maybe_delete() {
    if (stream_closed_ && pending_resolves_ == 0) delete this;
}

}  // namespace pgtether
