#include "proxy/server/side_connection.hpp"

#include <netdb.h>

#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/startup.hpp"
#include "protocol/message_reader.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/server/server_tls.hpp"
#include "proxy/net/tls.hpp"
#include "proxy/server/server_context.hpp"

namespace pgtether {

namespace be = protocol::be;
using protocol::ByteSpan;
using protocol::MessageReader;
using protocol::MessagesRead;
using protocol::read_messages;

SideConnection::SideConnection(ServerContext& context, Setup setup)
    : context_(context),
      setup_(std::move(setup)),
      stream_(context, *this),
      phase_since_ms_(context.now_ms()) {}

void SideConnection::enter(Phase phase) {
    phase_ = phase;
    phase_since_ms_ = context_.now_ms();
}

void SideConnection::begin() {
    connect();
}

void SideConnection::run(std::string_view query,
                         const std::vector<std::optional<std::string>>& params) {
    answer_ = QueryResult{};
    enter(Phase::Query);
    stream_.write(build_extended_query(query, params));
}

// ---------------------------------------------------------------------------------------------
// Connecting (as Server::connect does: Unix socket, IP literal, or a name resolved now;
// proxy/net/server_address.hpp)

void SideConnection::connect() {
    const auto& db = setup_.database;
    // A host list: the host its creator chose (the pool's current choice, or the next one after
    // a failure), with that host's port.
    host_ = host_for_turn(db, setup_.host_index);
    bool resolving = false;
    std::string error = start_side_connect(stream_, context_.loop(), host_,
                                           port_for_host(db, setup_.host_index), context_.config(),
                                           *this, unix_socket_, resolving);
    if (resolving) ++pending_resolves_;
    if (!error.empty()) fail(error);
}

void SideConnection::on_resolved(int status, const sockaddr* address) {
    --pending_resolves_;
    if (phase_ == Phase::Done) {
        maybe_delete();
        return;
    }
    if (address == nullptr) {
        fail("cannot resolve " + host_ + ": " + uv_strerror(status));
        return;
    }
    if (auto error = connect_side_tcp(stream_, address); !error.empty()) fail(error);
}

void SideConnection::on_stream_connected(int status) {
    if (phase_ == Phase::Done) return;
    if (status != 0) {
        fail(std::string("cannot connect: ") + uv_strerror(status));
        return;
    }
    stream_.start_reading();
    tls_context_ = server_tls::context_for(context_.security(), unix_socket_);
    if (tls_context_) {
        enter(Phase::TlsAnswer);
        stream_.write(protocol::build_ssl_request());
        return;
    }
    send_startup();
}

void SideConnection::on_stream_tls_ready(const std::string& error) {
    if (phase_ == Phase::Done) return;
    if (!error.empty()) {
        fail("TLS handshake failed: " + error);
        return;
    }
    send_startup();
}

void SideConnection::send_startup() {
    enter(Phase::Login);
    const auto& db = setup_.database;
    // Only what pgtether decides; nothing of a client's (CVE-2025-12819).
    std::vector<std::pair<std::string, std::string>> params = {
        {"user", setup_.credentials.user},
        {"database", db.dbname.empty() ? db.name : db.dbname},
        {"application_name", setup_.application_name},
    };
    login_ = std::make_unique<ServerLogin>(setup_.credentials);
    stream_.write(protocol::build_startup_message(params));
}

// ---------------------------------------------------------------------------------------------
// Reading

std::size_t SideConnection::on_stream_data(ByteSpan data) {
    switch (phase_) {
        case Phase::TlsAnswer: {
            auto answer = server_tls::handle_answer(data, stream_, *tls_context_, host_);
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
                    enter(Phase::Handshake);
                    return answer.consumed;
            }
            return data.size();
        }
        case Phase::Login:
        case Phase::Ready:
        case Phase::Query: {
            const MessagesRead read =
                read_messages(data, setup_.max_message, [&](const MessageReader::Next& message) {
                    return phase_ == Phase::Login ? handle_login(message.type, message.body())
                                                  : handle_answer(message.type, message.body());
                });
            if (read.invalid) {
                fail(phase_ == Phase::Login ? "invalid message from server during login"
                                            : "invalid message from server");
            }
            if (phase_ != Phase::Done) on_messages_read();
            return phase_ == Phase::Done ? data.size() : read.consumed;
        }
        case Phase::Connecting:
        case Phase::Handshake:
        case Phase::Done:
            return data.size();
    }
    return data.size();
}

bool SideConnection::handle_login(char type, ByteSpan body) {
    ServerLogin::Step step = login_->on_message(type, body);
    if (!step.send.empty()) stream_.write(step.send);
    const std::string who =
        "login as " + setup_.login_role + "\"" + setup_.credentials.user + "\" failed: ";
    switch (step.kind) {
        case ServerLogin::Step::Kind::Continue:
            return true;
        case ServerLogin::Step::Kind::Ready:
            login_.reset();
            logged_in_ = true;
            enter(Phase::Ready);
            on_logged_in();
            return phase_ == Phase::Ready || phase_ == Phase::Query;
        case ServerLogin::Step::Kind::Refused:
            fail(who + step.text);
            return false;
        case ServerLogin::Step::Kind::ServerError:
            fail(who + step.error.message);
            return false;
        case ServerLogin::Step::Kind::Invalid:
            fail(step.text);
            return false;
    }
    return false;
}

bool SideConnection::handle_answer(char type, ByteSpan body) {
    if (type == be::kNotificationResponse) {
        // Asynchronous (protocol §55.2.7): between queries or in the middle of one.
        if (on_notification(body)) return true;
        fail("unexpected notification from server");
        return false;
    }
    if (phase_ == Phase::Ready && type != be::kParameterStatus && type != be::kNoticeResponse) {
        // Between queries a server only reports; anything else (a FATAL from an administrator's
        // pg_terminate_backend, a stray reply) means the connection is not what it should be.
        fail(std::string("unexpected message from server between queries: '") + type + "'");
        return false;
    }
    switch (type) {
        case be::kDataRow:
        case be::kErrorResponse:
        case be::kRowDescription:
        case be::kBindComplete:
            switch (collect_result(answer_, type, body, setup_.limits)) {
                case Collected::Ok:
                    return true;
                case Collected::InvalidRow:
                    fail("invalid DataRow from server");
                    return false;
                case Collected::TooLarge:
                    fail("the answer is larger than " +
                         std::to_string(setup_.limits.max_row_bytes) + " bytes");
                    return false;
            }
            return false;
        case be::kReadyForQuery: {
            // Reusable only when the query left nothing behind: a query that opened a
            // transaction (or failed inside one) leaves the connection unfit for the next.
            auto status = protocol::parse_ready_for_query(body);
            const bool idle = status && *status == protocol::kTxIdle;
            QueryResult answer = std::move(answer_);
            answer_ = QueryResult{};
            enter(Phase::Ready);
            on_answer(std::move(answer), idle);
            return phase_ == Phase::Ready || phase_ == Phase::Query;
        }
        case be::kParseComplete:
        case be::kNoData:
        case be::kCommandComplete:
        case be::kEmptyQueryResponse:
        case be::kNoticeResponse:
        case be::kParameterStatus:
            return true;
        default:
            fail(std::string("unexpected message from server: '") + type + "'");
            return false;
    }
}

// ---------------------------------------------------------------------------------------------
// Finishing

void SideConnection::fail(const std::string& why) {
    if (phase_ == Phase::Done) return;
    const bool during_query = phase_ == Phase::Query;
    enter(Phase::Done);
    on_failed(why, during_query);
    close_connection();
}

void SideConnection::pause_reading() {
    if (phase_ != Phase::Done) stream_.stop_reading();
}

void SideConnection::resume_reading() {
    if (phase_ == Phase::Done || stream_.reading()) return;
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void SideConnection::abandon() {
    enter(Phase::Done);
    close_connection();
}

void SideConnection::close_connection() {
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

void SideConnection::on_stream_end(int status) {
    std::string why = status == UV_EOF ? "server closed the connection"
                                       : std::string("connection failed: ") + uv_strerror(status);
    if (!stream_.tls_error().empty()) why += " (TLS: " + stream_.tls_error() + ")";
    fail(why);
}

void SideConnection::on_stream_closed() {
    stream_closed_ = true;
    maybe_delete();
}

void SideConnection::maybe_delete() {
    if (stream_closed_ && pending_resolves_ == 0) delete this;
}

}  // namespace pgtether
