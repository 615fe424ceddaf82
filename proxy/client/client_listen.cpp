// LISTEN multiplexed (docs/session-state.md, "LISTEN and NOTIFY"): a client's lone LISTEN and
// UNLISTEN are answered here and its channels kept by the pool's ListenHub
// (proxy/pool/listen_hub.hpp), which hands it every notification of them -- at once between
// transactions, held inside one (the server sends what is held before the ReadyForQuery that
// ends it). A request that LISTENs among other statements, or asks pg_listening_channels(),
// runs on a backend that gets the client's channels first, and the tether keeps the client there.
#include <spdlog/spdlog.h>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/listen_statement.hpp"
#include "protocol/message_reader.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sql_scanner.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/daemon/worker.hpp"
#include "proxy/pool/listen_hub.hpp"
#include "proxy/pool/pool.hpp"

namespace pgtether {

namespace fe = protocol::fe;
namespace be = protocol::be;
using protocol::ByteSpan;
using protocol::MessageReader;

Client::ListenState& Client::listen_state() {
    if (!listen_) listen_ = std::make_unique<ListenState>();
    return *listen_;
}

bool Client::multiplexes_listen() const {
    // Session pooling keeps the backend anyway: LISTEN runs there, as it always did.
    return worker_.config().multiplexes_listen() && pool_ && pool_->mode() != PoolMode::Session;
}

bool Client::between_transactions() const {
    if (awaiting_listen()) return false;
    switch (state_) {
        case State::Idle:
        case State::Waiting:  // its request has not started: as if it came a moment later
            return true;
        case State::Active:
            return server_ && server_->client_between_transactions();
        default:
            return false;
    }
}

std::size_t Client::answer_listen(ByteSpan data) {
    const MessageReader::Next first = MessageReader::examine(data, kMaxAuthMessage);
    if (first.step != MessageReader::Step::Message) return 0;
    if (first.type == fe::kParse) return answer_listen_batch(data);
    if (first.type != fe::kQuery) return 0;
    auto sql = protocol::parse_query(first.body());
    if (!sql) return 0;
    auto ops = protocol::parse_listen_only(*sql);
    if (!ops) return 0;
    std::string reply;
    for (const auto& op : *ops)
        protocol::append_command_complete(reply, protocol::listen_command_tag(op));
    protocol::append_ready_for_query(reply, protocol::kTxIdle);
    take_listen_ops(*ops, std::move(reply));
    return first.total;
}

std::size_t Client::answer_listen_batch(ByteSpan data) {
    // Parse of the unnamed statement, then its Bind, Describe and Execute, up to Sync: what
    // psycopg, pgjdbc and libpq's PQexecParams send for one statement. Anything else, or a
    // batch not all here yet, goes to a backend.
    std::optional<protocol::ListenOp> op;
    std::string reply;
    std::size_t consumed = 0;
    int executed = 0;
    while (consumed < data.size()) {
        const MessageReader::Next next =
            MessageReader::examine(data.subspan(consumed), kMaxAuthMessage);
        if (next.step != MessageReader::Step::Message) return 0;
        consumed += next.total;
        protocol::ByteReader body(next.body());
        switch (next.type) {
            case fe::kParse: {
                auto parse = protocol::parse_parse(next.body());
                if (!parse || !parse->statement.empty() || op) return 0;
                auto ops = protocol::parse_listen_only(parse->query);
                // PostgreSQL refuses several commands in one prepared statement.
                // Declared parameter types would need as many parameters: the backend's case.
                const ByteSpan types = parse->parameter_types;
                const bool no_types = types.size() < 2 || (types[0] == 0 && types[1] == 0);
                if (!ops || ops->size() != 1 || !no_types) return 0;
                op = ops->front();
                protocol::MessageWriter(reply).begin(be::kParseComplete).end();
                break;
            }
            case fe::kBind: {
                auto names = protocol::parse_bind_names(next.body());
                auto parameters = protocol::parse_bind_parameters(next.body());
                if (!op || !names || !names->portal.empty() || !names->statement.empty() ||
                    !parameters || !parameters->values.empty()) {
                    return 0;
                }
                protocol::MessageWriter(reply).begin(be::kBindComplete).end();
                break;
            }
            case fe::kDescribe: {
                const std::uint8_t what = body.u8();
                const std::string_view name = body.cstring();
                if (!op || !body.ok() || !name.empty() || (what != 'S' && what != 'P')) return 0;
                if (what == 'S')
                    protocol::MessageWriter(reply).begin(be::kParameterDescription).i16(0).end();
                protocol::MessageWriter(reply).begin(be::kNoData).end();
                break;
            }
            case fe::kExecute: {
                const std::string_view portal = body.cstring();
                if (!op || !body.ok() || !portal.empty()) return 0;
                protocol::append_command_complete(reply, protocol::listen_command_tag(*op));
                ++executed;
                break;
            }
            case fe::kFlush:
                break;
            case fe::kSync: {
                if (!op) return 0;
                protocol::append_ready_for_query(reply, protocol::kTxIdle);
                // Each Execute did the statement once; LISTEN and UNLISTEN do the same twice.
                std::vector<protocol::ListenOp> ops;
                if (executed > 0) ops.push_back(*op);
                take_listen_ops(ops, std::move(reply));
                return consumed;
            }
            default:
                return 0;
        }
    }
    return 0;
}

void Client::take_listen_ops(const std::vector<protocol::ListenOp>& ops, std::string reply) {
    ListenState& state = listen_state();
    const ChannelChange change = apply_listen_ops(state.channels, ops);
    if (!change.empty()) {
        pool_->listen_hub().change(*this, change);
        spdlog::debug("{}: listens on {} channels (+{} -{}), answered by pgtether", describe(),
                      state.channels.size(), change.added.size(), change.removed.size());
    }
    last_activity_ms_ = worker_.now_ms();
    if (change.added.empty() || pool_->listen_hub().listening(change.added)) {
        send(reply);
        return;
    }
    // A notification committed after the answer must reach the client: the answer waits until
    // the listening connection listens on the new channels; the client's input waits with it.
    state.reply = std::move(reply);
    state.awaited = change.added;
    state.awaiting = true;
}

bool Client::listen_channels_ready() const {
    return listen_ && listen_->awaiting && pool_->listen_hub().listening(listen_->awaited);
}

void Client::on_listen_ready() {
    if (!awaiting_listen() || state_ == State::Closing) return;
    listen_->awaiting = false;
    listen_->awaited.clear();
    send(std::exchange(listen_->reply, {}));
    if (between_transactions()) send_held_notifications();
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Client::on_listen_failed(const std::string& why) {
    if (!awaiting_listen() || state_ == State::Closing) return;
    ListenState& state = *listen_;
    state.awaiting = false;
    state.reply.clear();
    // The LISTEN did not happen: its channels are given up, and the client hears why, as from a
    // backend that could not LISTEN (the statement failed; the session goes on).
    ChannelChange undo;
    for (const auto& name : state.awaited) {
        if (state.channels.erase(name)) undo.removed.push_back(name);
    }
    state.awaited.clear();
    pool_->listen_hub().change(*this, undo);
    std::string reply;
    protocol::append_error_response(reply, {"ERROR",
                                            protocol::sqlstate::kConnectionFailure,
                                            "pgtether: the listening connection failed: " + why,
                                            {},
                                            {}});
    protocol::append_ready_for_query(reply, protocol::kTxIdle);
    send(reply);
    send_held_notifications();
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

bool Client::deliver_to_listener(std::string_view message) {
    if (state_ == State::Closing) return false;
    ListenState& state = listen_state();
    NotificationTarget target;
    target.between_transactions = between_transactions();
    target.held_bytes = state.held.size();
    target.unsent_bytes = stream_.pending_output_size() + state.queued.size();
    target.size = message.size();
    target.budget = static_cast<std::size_t>(worker_.config().listen_client_buffer);
    switch (decide_notification(target)) {
        case NotificationAction::Send:
            // Behind anything held; written with the rest of the hub's read.
            if (state.queued.empty()) pool_->listen_hub().queue_delivery(*this);
            state.queued += std::exchange(state.held, {});
            state.queued.append(message);
            return true;
        case NotificationAction::Hold:
            state.held.append(message);
            return true;
        case NotificationAction::Overflow:
            fail(protocol::sqlstate::kConfigurationLimitExceeded,
                 "pgtether: notifications not read: more than listen_client_buffer (" +
                     std::to_string(target.budget) + " bytes) wait for this client");
            return false;
    }
    return false;
}

void Client::send_queued_notifications() {
    if (!listen_ || listen_->queued.empty() || state_ == State::Closing) return;
    send(std::exchange(listen_->queued, {}));
    note_listener_output();
}

void Client::send_held_notifications() {
    if (!listen_ || listen_->held.empty()) return;
    send(std::exchange(listen_->held, {}));
    note_listener_output();
}

void Client::note_listener_output() {
    ListenState& state = *listen_;
    const std::size_t unsent = stream_.pending_output_size();
    if (state.backed_up ||
        unsent <= static_cast<std::size_t>(worker_.config().listen_client_buffer) / 2) {
        return;
    }
    state.backed_up = true;
    state.backed_up_since_ms = worker_.now_ms();
    state.unsent_seen = unsent;
    if (!state.channels.empty()) pool_->listen_hub().listener_backed_up(*this);
}

void Client::on_listener_drained() {
    if (!listen_ || !listen_->backed_up) return;
    listen_->backed_up = false;
    pool_->listen_hub().listener_drained(*this);
}

void Client::check_listener_stall(std::uint64_t now_ms) {
    if (!listen_ || !listen_->backed_up) return;
    ListenState& state = *listen_;
    const std::size_t unsent = stream_.pending_output_size();
    if (unsent < state.unsent_seen) {  // it took something: not stalled
        state.unsent_seen = unsent;
        state.backed_up_since_ms = now_ms;
        return;
    }
    const auto limit = worker_.config().listen_stall_timeout;
    if (limit.count() <= 0 ||
        now_ms - state.backed_up_since_ms <
            static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::milliseconds>(limit).count())) {
        return;
    }
    fail(protocol::sqlstate::kConfigurationLimitExceeded,
         "pgtether: notifications not read for listen_stall_timeout (" +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
             " s)");
}

std::string Client::take_held_notifications() {
    return listen_ ? std::exchange(listen_->held, {}) : std::string();
}

void Client::note_unanswered_listen(ByteSpan data) {
    if (!listen_ || listen_->channels.empty() || listen_->replay_on_link) return;
    const MessageReader::Next first = MessageReader::examine(data, kMaxAuthMessage);
    if (first.step != MessageReader::Step::Message) return;
    std::optional<std::string_view> sql;
    if (first.type == fe::kQuery) {
        sql = protocol::parse_query(first.body());
    } else if (first.type == fe::kParse) {
        if (auto parse = protocol::parse_parse(first.body())) sql = parse->query;
    }
    if (!sql || !(pool_->lock_trigger().scan(*sql) & protocol::kEffectListen)) return;
    listen_->replay_on_link = true;
}

std::string Client::take_listen_replay() {
    if (!listen_ || !listen_->replay_on_link) return {};
    ListenState& state = *listen_;
    state.replay_on_link = false;
    std::string sql;
    for (const auto& name : state.channels)
        sql += "LISTEN " + protocol::quote_identifier(name) + ";";
    pool_->listen_hub().leave(*this, state.channels);
    spdlog::debug(
        "{}: runs LISTEN/UNLISTEN pgtether does not answer; its {} channels move to its "
        "backend (tethered)",
        describe(), state.channels.size());
    state.channels.clear();
    return sql;
}

void Client::leave_listens() {
    if (!listen_ || !pool_) return;
    listen_->backed_up = false;
    if (!listen_->channels.empty() || listen_->awaiting) {
        pool_->listen_hub().leave(*this, listen_->channels);
    }
    listen_->channels.clear();
    listen_->awaiting = false;
}

}  // namespace pgtether
