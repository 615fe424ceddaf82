// Replication connections (core/replication.hpp; docs/session-state.md, "Replication
// connections"): the client authenticates with pgtether as any client, then waits for a backend
// opened for it alone with its own start-up parameters (Pool::request_replication_server). Once
// that backend has logged in, the client gets its greeting and the bytes pass both ways unread
// -- the replication protocol (CopyBoth, BASE_BACKUP's archives) is the backend's and the
// client's business -- until either side leaves; the backend is then closed, never reused.
#include "proxy/net/log.hpp"

#include <limits>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/client_context.hpp"
#include "proxy/pool/pool.hpp"

namespace pgtether {

using protocol::ByteSpan;
using protocol::MessageReader;

const std::vector<std::pair<std::string, std::string>>& Client::replication_parameters() const {
    static const std::vector<std::pair<std::string, std::string>> kNone;
    return replication_ ? replication_->parameters : kNone;
}

bool Client::take_replication_startup(const protocol::StartupPacket& packet) {
    const std::string* value = packet.find("replication");
    if (value == nullptr) return true;
    const std::optional<ReplicationMode> mode = parse_replication_mode(*value);
    if (!mode) {
        // PostgreSQL's FATAL, word for word (ProcessStartupPacket).
        const protocol::ErrorFields error{"FATAL", protocol::sqlstate::kInvalidParameterValue,
                                          invalid_replication_value_message(*value), {},
                                          kInvalidReplicationValueHint};
        close(error.message, &error);
        return false;
    }
    if (*mode == ReplicationMode::None) return true;  // replication=false: an ordinary client
    replication_ = std::make_unique<Replication>();
    replication_->mode = *mode;
    for (const auto& [name, value_of] : packet.parameters) {
        // What the backend is sent besides the entry's own (core/replication.hpp): every
        // parameter as the client sent it, `options` whole -- PgBouncer 1.23's choice too, since
        // the backend is this client's alone and a physical walsender takes no SET.
        if (name == "user" || name == "database" || name == "replication" ||
            name.starts_with("_pq_.")) {
            continue;
        }
        replication_->parameters.emplace_back(name, value_of);
    }
    return true;
}

void Client::request_replication_server() {
    set_state(State::Waiting);
    pool_->request_replication_server(*this);
}

void Client::on_replication_server_ready(Server& server) {
    replication_->server = nullptr;
    server_ = &server;
    pool_->stats().record_wait_time((context_.now_ms() - state_since_ms_) * 1000);
    pool_->stats().server_assignment_count++;
    // The backend's own greeting (a walsender's parameters are this session's, not the pool's),
    // with pgtether's cancel key: a cancel reaches the backend through pgtether.
    std::string out;
    protocol::append_authentication(out, protocol::AuthRequest::Ok);
    for (const auto& [name, value] : server.welcome()) {
        protocol::append_parameter_status(out, name, value);
    }
    protocol::append_backend_key_data(out, cancel_key_);
    protocol::append_ready_for_query(out, protocol::kTxIdle);
    stream_.write(out);
    set_state(State::Active);
    last_activity_ms_ = context_.now_ms();
    if (context_.config().log_connections) {
        spdlog::info("{}: login attempt: db={} user={} tls={} replication={}", describe(),
                     database_, user_, tls_description(),
                     replication_mode_name(replication_->mode));
    }
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Client::on_replication_server_failed(const protocol::ErrorFields& error) {
    replication_->server = nullptr;
    protocol::ErrorFields fields = error;
    fields.severity = "FATAL";
    fields.message = "server login failed: " + error.message;
    // PgBouncer's reason in the log ("closing because: login failed"); the client hears the
    // backend's own error, with its SQLSTATE.
    close("login failed", &fields);
}

void Client::on_relay_ended(const std::string& reason, bool stream_ended) {
    server_ = nullptr;
    if (state_ == State::Closing) return;
    if (stream_ended) {
        // The backend closed on its own, after whatever it had to say (its FATAL, the end of a
        // stream): the client sees that, as on a direct connection.
        close(reason, nullptr, true);
        return;
    }
    // pgtether closed it (RECONNECT, a reload that changed the entry, shutdown): say why.
    fail(protocol::sqlstate::kConnectionFailure, reason);
}

std::size_t Client::relay_to_server(ByteSpan data) {
    // Only the message boundaries are read, by the client's own reader as for any client: a
    // Terminate ends the connection here (the backend is closed with its own Terminate),
    // everything else passes as it came, however large -- a message's first part with its
    // header, its rest as the reader's Forward steps. No length limit: the stream is the
    // backend's and the client's, and nothing of it is held.
    constexpr std::uint32_t kAnyLength = std::numeric_limits<std::uint32_t>::max();
    std::size_t end = 0;
    bool terminate = false;
    while (end < data.size()) {
        const MessageReader::Next next = reader_.next(data.subspan(end), kAnyLength);
        if (next.step == MessageReader::Step::Invalid) {
            fail(protocol::sqlstate::kProtocolViolation, "invalid message length");
            return data.size();
        }
        if (next.step == MessageReader::Step::NeedMore) break;  // the header's rest comes later
        if (next.step != MessageReader::Step::Forward && next.type == protocol::fe::kTerminate) {
            terminate = true;
            break;
        }
        if (next.step == MessageReader::Step::Partial) reader_.forward_rest(next);
        end += next.bytes.size();
    }
    if (end > 0 && server_ != nullptr) {
        pool_->stats().bytes_received += end;
        last_activity_ms_ = context_.now_ms();
        uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(const_cast<std::uint8_t*>(data.data())),
                                   static_cast<unsigned>(end));
        if (!server_->send_from_client(&buf, 1)) pause_input();
    }
    if (terminate) {
        close("client close request");
        return data.size();
    }
    return end;
}

}  // namespace pgtether
