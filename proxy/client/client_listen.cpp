// LISTEN multiplexed (docs/session-state.md, "LISTEN and NOTIFY"): a client's lone LISTEN and
// UNLISTEN are answered here and its channels kept by the pool's ListenHub
// (proxy/pool/listen_hub.hpp), which hands it every notification of them -- at once between
// transactions, held inside one (the server sends what is held before the ReadyForQuery that
// ends it). A request that LISTENs among other statements, or asks pg_listening_channels(),
// runs on a backend that gets the client's channels first, and the tether keeps the client there.
#include "proxy/net/log.hpp"

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/listen_request.hpp"
#include "protocol/listen_statement.hpp"
#include "protocol/message_reader.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sql_scanner.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/client_context.hpp"
#include "proxy/pool/listen_hub.hpp"
#include "proxy/pool/pool.hpp"

namespace pgtether {

namespace fe = protocol::fe;
using protocol::ByteSpan;
using protocol::MessageReader;

Client::ListenState& Client::listen_state() {
    if (!listen_) listen_ = std::make_unique<ListenState>();
    return *listen_;
}

bool Client::multiplexes_listen() const {
    // Session pooling keeps the backend anyway: LISTEN runs there, as it always did.
    return context_.config().multiplexes_listen() && pool_ && pool_->mode() != PoolMode::Session;
}

bool Client::backend_may_listen() const {
    // The last probe found channels on the backend, or could not tell.
    return (tether_kinds_ & (kStateListen | kStateUnknown)) != 0;
}

bool Client::answers_listen(char tx_status) const {
    if (!multiplexes_listen() || backend_may_listen() || (listen_ && listen_->replay_on_link)) {
        return false;
    }
    switch (tx_status) {
        case protocol::kTxIdle: return true;
        case protocol::kTxInBlock:
            return (server_->link().effects() & protocol::kEffectSavepoint) == 0;
        default: return false;  // a failed block: the backend refuses anything but its end
    }
}

bool Client::room_for_pending_listens(std::size_t more) const {
    return (listen_ ? listen_->pending.size() : 0) + more <= kMaxPendingListenOps;
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

std::optional<protocol::ListenRequest> Client::recognise_listen(ByteSpan data, char tx_status) {
    // Below the size at which hold_input stops reading: the rest of the request must be able to
    // arrive.
    const std::size_t wait_limit = context_.scratch().size();
    protocol::ListenRequest request =
        protocol::recognise_listen_request(data, kMaxAuthMessage, wait_limit, tx_status);
    if (request.kind == protocol::ListenRequest::Kind::Other) return std::nullopt;
    if (request.kind == protocol::ListenRequest::Kind::Incomplete) hold_input(data.size());
    return request;
}

std::optional<std::size_t> Client::answer_listen(ByteSpan data) {
    auto request = recognise_listen(data, protocol::kTxIdle);
    if (!request) return std::nullopt;
    if (request->kind == protocol::ListenRequest::Kind::Incomplete) return 0;
    take_listen_ops(request->ops, std::move(request->reply));
    return request->consumed;
}

std::optional<std::size_t> Client::answer_listen_in_transaction(ByteSpan data) {
    auto request = recognise_listen(data, protocol::kTxInBlock);
    if (!request) return std::nullopt;
    if (request->kind == protocol::ListenRequest::Kind::Incomplete) return 0;
    if (!room_for_pending_listens(request->ops.size())) return std::nullopt;
    ListenState& state = listen_state();
    // Nothing reaches the backend: its transaction goes on as if the statement had not been
    // sent, and PostgreSQL's LISTEN would change nothing before the COMMIT either.
    state.pending.insert(state.pending.end(), request->ops.begin(), request->ops.end());
    last_activity_ms_ = context_.now_ms();
    send(request->reply);
    return request->consumed;
}

std::optional<protocol::ListenSplice> Client::listen_splice_of(std::string_view sql,
                                                               std::uint32_t* effects) const {
    auto splice = protocol::splice_listen_statements(sql);
    if (!splice) return std::nullopt;
    const std::uint32_t spliced = pool_->lock_trigger().scan(splice->sql);
    if (spliced & (protocol::kEffectListen | protocol::kEffectOpaque)) return std::nullopt;
    if (effects) *effects = spliced;
    return splice;
}

std::optional<protocol::ListenSplice> Client::take_listen_splice(std::string_view sql,
                                                                 std::uint32_t& effects) {
    // The conditions of a lone LISTEN's answer, and its answer must be the backend's next:
    // nothing else owed before it.
    const auto& tracker = server_->link().tracker();
    if (!tracker.quiet() || !answers_listen(tracker.tx_status())) return std::nullopt;
    std::uint32_t spliced_effects = 0;
    auto splice = listen_splice_of(sql, &spliced_effects);
    if (!splice) return std::nullopt;
    if (tracker.tx_status() == protocol::kTxInBlock &&
        !room_for_pending_listens(splice->replacements.size())) {
        return std::nullopt;
    }
    effects = spliced_effects;
    return splice;
}

void Client::add_pending_listens(const std::vector<protocol::ListenOp>& ops) {
    if (ops.empty()) return;
    ListenState& state = listen_state();
    state.pending.insert(state.pending.end(), ops.begin(), ops.end());
}

void Client::commit_pending_listens(std::string ready_for_query) {
    if (!listen_) return;
    std::vector<protocol::ListenOp> ops = std::exchange(listen_->pending, {});
    spdlog::debug("{}: its transaction committed {} LISTEN/UNLISTEN answered by pgtether",
                  describe(), ops.size());
    take_listen_ops(ops, std::move(ready_for_query));
    listen_->after_commit = awaiting_listen();
}

void Client::discard_pending_listens() {
    if (listen_) listen_->pending.clear();
}

void Client::take_listen_ops(const std::vector<protocol::ListenOp>& ops, std::string reply) {
    ListenState& state = listen_state();
    const ChannelChange change = apply_listen_ops(state.channels, ops);
    if (!change.empty()) {
        pool_->listen_hub().change(*this, change);
        spdlog::debug("{}: listens on {} channels (+{} -{}), answered by pgtether", describe(),
                      state.channels.size(), change.added.size(), change.removed.size());
    }
    last_activity_ms_ = context_.now_ms();
    if (change.added.empty() || pool_->listen_hub().listening_for(*this, change.added)) {
        if (!reply.empty()) send(reply);
        return;
    }
    // A notification committed after the answer must reach the client: the answer waits until
    // the listening connection listens on the new channels; the client's input waits with it.
    state.reply = std::move(reply);
    state.awaited = change.added;
    state.awaiting = true;
}

bool Client::listen_channels_ready() const {
    return listen_ && listen_->awaiting && pool_->listen_hub().listening_for(*this, listen_->awaited);
}

void Client::on_listen_ready() {
    if (!awaiting_listen() || state_ == State::Closing) return;
    listen_->awaiting = false;
    listen_->after_commit = false;
    listen_->awaited.clear();
    if (!listen_->reply.empty()) send(std::exchange(listen_->reply, {}));
    if (between_transactions()) send_held_notifications();
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Client::on_listen_failed(const std::string& why) {
    if (!awaiting_listen() || state_ == State::Closing) return;
    ListenState& state = *listen_;
    state.awaiting = false;
    // The reply waiting ends with its ReadyForQuery (its status: 'T' after a COMMIT AND CHAIN);
    // none waits when a committed transaction's replies went on (commit_pending_listens).
    const char status = state.reply.empty() ? '\0' : state.reply.back();
    state.reply.clear();
    // The LISTEN did not happen: its channels are given up, and the client hears why, as from a
    // backend that could not LISTEN (the statement failed; the session goes on).
    ChannelChange undo;
    for (const auto& name : state.awaited) {
        if (state.channels.erase(name)) undo.removed.push_back(name);
    }
    state.awaited.clear();
    pool_->listen_hub().change(*this, undo);
    const bool after_commit = std::exchange(state.after_commit, false);
    std::string reply;
    if (after_commit) {
        // The transaction did commit: an error now would say it had not (a client might run it
        // again). A warning says what did not happen.
        protocol::append_notice_response(
            reply, {"WARNING",
                    "01000",
                    "pgtether: the listening connection failed: " + why +
                        "; the LISTEN of the committed transaction did not take effect",
                    {},
                    {}});
    } else {
        protocol::append_error_response(reply, {"ERROR",
                                                protocol::sqlstate::kConnectionFailure,
                                                "pgtether: the listening connection failed: " + why,
                                                {},
                                                {}});
    }
    if (status != '\0') protocol::append_ready_for_query(reply, status);
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
    target.budget = static_cast<std::size_t>(context_.config().listen_client_buffer);
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
        unsent <= static_cast<std::size_t>(context_.config().listen_client_buffer) / 2) {
        return;
    }
    state.backed_up = true;
    state.backed_up_since_ms = context_.now_ms();
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
    const auto limit = context_.config().listen_stall_timeout;
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
    // A Query whose LISTENs pgtether answers beside the rest (take_listen_splice) moves nothing.
    if (first.type == fe::kQuery && listen_splice_of(*sql)) return;
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
    listen_->pending.clear();
    listen_->awaiting = false;
}

}  // namespace pgtether
