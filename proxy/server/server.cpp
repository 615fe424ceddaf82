#include "proxy/net/log_sqlstate.hpp"
#include "proxy/server/server.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>
#include <list>

#include "proxy/net/log.hpp"

#include "core/departure.hpp"
#include "core/listen_channels.hpp"
#include "core/listen_splice.hpp"
#include "core/lock_discovery.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sqlstate.hpp"
#include "protocol/statement_redaction.hpp"
#include "proxy/client/client.hpp"
#include "proxy/net/forward_batch.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/server/own_queries.hpp"
#include "proxy/server/server_context.hpp"
#include "proxy/server/server_login.hpp"
#include "proxy/server/server_tls.hpp"
#include "proxy/server/statement_translator.hpp"

namespace pgtether {

namespace be = protocol::be;
using protocol::ByteSpan;
using protocol::MessageReader;
using protocol::MessagesRead;
using protocol::read_messages;

namespace {

// Messages a server may send that are only forwarded, never inspected: when one is larger than
// what has arrived so far, its first part can go to the client right away (streaming) instead of
// being assembled in memory first.
bool streamable_from_server(char type) {
    return type == be::kDataRow || type == be::kCopyData;
}

// Command tags after which the backend has no prepared statements left.
bool deallocates_all(ByteSpan command_complete_body) {
    auto tag = protocol::parse_command_complete(command_complete_body);
    return tag && (*tag == "DISCARD ALL" || *tag == "DEALLOCATE ALL");
}

}  // namespace

Server::Server(ServerContext& context, Pool& pool)
    : context_(context), pool_(pool), stream_(context, *this), id_(context.next_id()) {
    context_.register_server(*this);
    state_since_ms_ = context_.now_ms();
}

Server::~Server() {
    context_.forget_cancel_target(*this);
    context_.unregister_server(*this);
}

// ---------------------------------------------------------------------------------------------
// Connecting and logging in

void Server::connect() {
    const auto& db = pool_.database();
    connected_at_ms_ = context_.now_ms();
    host_index_ = pool_.choose_host();
    host_ = host_for_turn(db, host_index_);
    port_ = port_for_host(db, host_index_);
    unix_path_ = server_unix_socket_path(host_, port_, context_.config());
    if (!unix_path_.empty()) {
        address_is_unix_ = true;
        if (stream_.init_pipe() != 0 || stream_.connect_pipe(unix_path_) != 0) {
            on_stream_connected(UV_EINVAL);
        }
        return;
    }
    if (stream_.init_tcp() != 0) {
        on_stream_connected(UV_EINVAL);
        return;
    }
    sockaddr_storage literal;
    if (parse_ip_literal(host_, port_, literal)) {
        start_connect_to(reinterpret_cast<const sockaddr*>(&literal));
        return;
    }
    if (int rc = start_resolve(context_.loop(), *this, host_, port_); rc != 0) {
        on_stream_connected(rc);
        return;
    }
    ++pending_resolves_;
}

void Server::on_resolved(int status, const sockaddr* address) {
    --pending_resolves_;
    if (state_ == State::Closing) {
        maybe_finish_close();
        return;
    }
    if (address == nullptr) {
        login_failed(protocol::fatal_error(
                         protocol::sqlstate::kConnectionFailure,
                         "could not resolve host \"" + host_ + "\": " + uv_strerror(status)),
                     LoginFailureKind::Unreachable, "server DNS lookup failed");
        return;
    }
    start_connect_to(address);
}

std::string Server::host_and_port() const {
    return (host_.empty() ? std::string("unix") : host_) + ":" + std::to_string(port_);
}

std::string Server::describe() const {
    std::string where = address_is_unix_ ? "unix:" + unix_path_ : address_text(address_);
    return "S-" + std::to_string(id_) + " " + pool_.database_name() + "/" + pool_.user_name() +
           "@" + where;
}

void Server::start_connect_to(const sockaddr* address) {
    std::memcpy(&address_, address,
                address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    int rc = stream_.connect_tcp(address);
    if (rc != 0) on_stream_connected(rc);
}

void Server::on_stream_connected(int status) {
    if (state_ == State::Closing) return;
    if (status != 0) {
        login_failed(protocol::fatal_error(
                         protocol::sqlstate::kConnectionFailure,
                         "could not connect to server: " + std::string(uv_strerror(status))),
                     LoginFailureKind::Unreachable);
        return;
    }
    const auto& config = context_.config();
    if (config.log_connections) {
        // PgBouncer's words, which operators grep for.
        spdlog::info("{} new connection to server (from {})", describe(), stream_.local_name());
    }
    stream_.apply_tcp_settings();
    stream_.start_reading();
    login_since_ms_ = context_.now_ms();
    tls_context_ = server_tls::context_for(context_.security(), address_is_unix_);
    if (tls_context_) {
        transition(State::TlsAnswer);
        stream_.write(protocol::build_ssl_request());
        return;
    }
    send_startup();
}

void Server::send_startup() {
    transition(State::Login);
    const auto& db = pool_.database();
    std::vector<std::pair<std::string, std::string>> params = {
        {"user", pool_.user_name()},
        {"database", db.dbname.empty() ? db.name : db.dbname},
    };
    if (db.client_encoding) params.emplace_back("client_encoding", *db.client_encoding);
    if (db.datestyle) params.emplace_back("DateStyle", *db.datestyle);
    if (db.timezone) params.emplace_back("TimeZone", *db.timezone);
    if (db.application_name) params.emplace_back("application_name", *db.application_name);
    if (replication_client_) {
        params = replication_startup_parameters(std::move(params), replication_,
                                                replication_client_->replication_parameters());
    }
    login_ = std::make_unique<ServerLogin>(pool_.server_credentials());
    stream_.write(protocol::build_startup_message(params));
}

void Server::note_login_failure(const char* words, const protocol::ErrorFields& error) {
    {
        LogSqlstate sqlstate(error.sqlstate);
        spdlog::warn("S-{} {}/{}: {}: {} {}", id_, pool_.database_name(), pool_.user_name(), words,
                     error.severity.empty() ? "FATAL" : error.severity, error.message);
    }
    context_.stats().login_failures++;
    login_failed_reported_ = true;
}

void Server::login_failed(const protocol::ErrorFields& error, LoginFailureKind kind,
                          const char* close_reason) {
    if (state_ == State::Closing) return;
    if (replication_ != ReplicationMode::None) {
        fail_replication_login(error);
        return;
    }
    // PgBouncer's line: "server login failed: FATAL <message>".
    note_login_failure("server login failed", error);
    // PgBouncer's words: "connect failed" when no connection was made (runbooks grep for it),
    // else the login's error message, as PgBouncer closes the server with it.
    const bool connected = state_ != State::Connecting;
    const std::string reason = close_reason ? std::string(close_reason)
                               : connected  ? error.message
                                            : std::string("connect failed");
    pool_.on_server_login_failed(*this, error, kind);
    close(reason);
}

std::size_t Server::handle_login_data(ByteSpan data) {
    const MessagesRead read =
        read_messages(data, ServerLogin::kMaxMessage, [&](const MessageReader::Next& message) {
            ServerLogin::Step step = login_->on_message(message.type, message.body());
            if (!step.send.empty()) stream_.write(step.send);
            switch (step.kind) {
                case ServerLogin::Step::Kind::Continue:
                    if (step.parameter) {
                        welcome_.emplace_back(step.parameter->name, step.parameter->value);
                        record_parameter(step.parameter->name, step.parameter->value, false);
                    }
                    if (step.backend_key) backend_key_ = *step.backend_key;
                    return true;
                case ServerLogin::Step::Kind::Ready:
                    finish_login();
                    return false;
                case ServerLogin::Step::Kind::Refused:
                    login_failed(protocol::fatal_error(protocol::sqlstate::kInvalidAuthorization,
                                                       "server login failed: " + step.text));
                    return false;
                case ServerLogin::Step::Kind::ServerError:
                    login_failed(step.error, classify_login_failure(step.error.sqlstate));
                    return false;
                case ServerLogin::Step::Kind::Invalid:
                    login_failed(
                        protocol::fatal_error(protocol::sqlstate::kProtocolViolation, step.text));
                    return false;
            }
            return false;
        });
    if (read.invalid) {
        login_failed(protocol::fatal_error(protocol::sqlstate::kProtocolViolation,
                                           "invalid message from server during login"));
    }
    return read.consumed;
}

void Server::finish_login() {
    login_.reset();
    spdlog::debug("S-{} {}/{}: logged in, backend pid {}", id_, pool_.database_name(),
                  pool_.user_name(), backend_key_.pid);
    if (replication_ != ReplicationMode::None) {
        finish_replication_login();
        return;
    }
    if (!role_reported_ && pool_.session_attrs() != SessionAttrs::Any) {
        // PostgreSQL 13 and older do not report in_hot_standby: ask, as libpq does.
        run_internal(std::make_unique<LoginRoleCheckJob>(), {std::string(kRoleCheckQuery)});
        return;
    }
    finish_login_with_role();
}

void Server::finish_login_with_role() {
    if (!pool_.on_server_role(*this, role_)) {
        // A standby where the database wants a primary (or the other way round): as libpq
        // does, this host does not serve it; another is tried (core/host_choice.hpp).
        login_failed(
            protocol::fatal_error(
                protocol::sqlstate::kConnectionFailure,
                "server at " + host_and_port() + " is " +
                    (role_.in_hot_standby ? "in hot standby" : "not in hot standby") +
                    (role_.read_only ? " and read-only" : "") + ", which target_session_attrs = " +
                    session_attrs_name(pool_.session_attrs()) + " does not accept"),
            LoginFailureKind::WrongRole);
        return;
    }
    const auto& connect_query = pool_.database().connect_query;
    if (!connect_query.empty()) {
        run_internal(std::make_unique<ConnectQueryJob>(), {connect_query});
        return;
    }
    // The pool hears of this login now, so a close from here on is not a failed login: a paused
    // pool closes the server it is handed at once ("pause mode"), which must neither count as a
    // login failure (backing off, failing waiting clients) nor decrement `connecting` twice.
    login_failed_reported_ = true;
    pool_.on_server_login(*this);
}

// ---------------------------------------------------------------------------------------------
// Life in the pool

void Server::transition(State next) {
    assert(may_transition(state_, next));
    const State previous = state_;
    state_ = next;
    state_since_ms_ = context_.now_ms();
    pool_.on_server_transition(*this, previous, next);
}

void Server::mark_idle(std::uint64_t now_ms) {
    transition(State::Idle);
    idle_since_ms_ = now_ms;
    welcome_.clear();
    welcome_.shrink_to_fit();
}

void Server::mark_check_due(bool due) {
    if (due && state_ == State::Idle) {
        transition(State::Used);
    } else if (!due && state_ == State::Used) {
        transition(State::Idle);
    }
}

bool Server::spoke_while_idle(std::uint64_t now_ms) const {
    constexpr std::uint64_t kCheckAfterIdleMs = 1;
    return now_ms - idle_since_ms_ >= kCheckAfterIdleMs && stream_.peer_spoke();
}

void Server::link_client(Client& client) {
    client_ = &client;
    transition(State::Linked);
    link_.begin(context_.config().max_prepared_statements > 0);
    if (client.id() != last_client_id_) {
        // The same client again (one client, or a busy one meeting the backend it just
        // released) keeps its description: nothing it contains changes after login. A copy:
        // the client may be gone when a leak is reported.
        last_client_id_ = client.id();
        last_client_description_ = client.logged_in_description();
    }
    const auto& config = context_.config();
    bool long_idle = context_.now_ms() - idle_since_ms_ >=
                     duration_ms(config.server_check_delay);
    if (long_idle && !config.server_check_query.empty() && idle_since_ms_ != 0) {
        run_internal(std::make_unique<ServerCheckJob>(), {config.server_check_query});
        return;
    }
    sync_parameters();
}

void Server::sync_parameters() {
    // Usually nothing differs: find that out without building the queries.
    ParameterSync sync =
        parameters_in_sync(client_->params(), pool_.default_params(), params_)
            ? ParameterSync{}
            : build_parameter_sync(client_->params(), pool_.default_params(), params_);
    // Nothing to compare in the usual case: skip merging the client's settings (every transaction
    // links a server).
    std::optional<SettingsMap> settings_after;
    if (context_.config().session_settings == StateHandling::Keep &&
        (client_->has_settings() || !applied_settings_.empty())) {
        settings_after = client_->wanted_settings();
        // After any change of client_encoding too: the values are in the client's encoding.
        sync.rest += build_settings_sync(*settings_after, applied_settings_);
    }
    // The client is about to run LISTEN/UNLISTEN pgtether does not answer: its channels go to
    // this backend first (docs/session-state.md, "LISTEN and NOTIFY").
    sync.rest += client_->take_listen_replay();
    if (sync.empty()) return;
    std::vector<std::string> queries;
    if (!sync.encoding.empty()) queries.push_back(std::move(sync.encoding));
    if (!sync.rest.empty()) queries.push_back(std::move(sync.rest));
    run_internal(std::make_unique<ParameterSyncJob>(std::move(settings_after)), queries);
}

void Server::unlink_client() {
    client_ = nullptr;
    link_.clear_effects();
}

void Server::release_to_pool() {
    Client* client = client_;
    unlink_client();
    pool_.release(*this, ReleaseReason::ClientDone);
    if (client) client->on_server_released();
}

void Server::note_unnamed_statement(StatementPtr statement) {
    unnamed_statement_ = std::move(statement);
    // Sent when nothing is owed, the message is not skipped by an earlier error: then the
    // backend's unnamed statement is known again. Otherwise it stays unknown if it was.
    if (link_.tracker().quiet()) unnamed_unknown_ = false;
}

void Server::record_timing(char tx_status) {
    quiet_since_ms_ = context_.now_ms();
    link_.note_quiet(tx_status, context_.now_us(), pool_.stats());
}

bool Server::send_from_client(const uv_buf_t* bufs, unsigned count) {
    link_.note_client_forwarded();
    return stream_.writev(bufs, count);
}

void Server::settle_requests(const std::function<void(std::string&&)>& emit) {
    auto& finished = link_.requests().finished();
    for (auto& done : finished) {
        switch (done.outcome) {
            case RequestQueue::Outcome::Answer:
                if (client_ && state_info(state_).linked) emit(std::move(done.request.reply));
                break;
            case RequestQueue::Outcome::Failed:
                // "cached plan must not change result type": the statement was planned against
                // objects that changed since (a dropped temporary table, an altered column). A
                // fresh Parse plans it again, as a client of PostgreSQL would have to; until
                // then no other client may be handed this copy.
                if (done.request.type == protocol::fe::kBind && done.request.statement &&
                    link_.failed_sqlstate() == protocol::sqlstate::kFeatureNotSupported) {
                    statements_.mark_stale(done.request.statement);
                }
                // "prepared statement does not exist" for a name pgtether gave: the backend lost
                // it (dynamic SQL deallocated it, say). Forgotten here, it is prepared again the
                // next time a client uses it on this backend instead of failing for good.
                if ((done.request.type == protocol::fe::kBind ||
                     done.request.type == protocol::fe::kDescribe) &&
                    done.request.statement &&
                    link_.failed_sqlstate() == protocol::sqlstate::kInvalidSqlStatementName) {
                    statements_.remove(*done.request.statement);
                }
                undo_request(done.request, client_ ? &client_->statements() : nullptr,
                             statements_);
                break;
            case RequestQueue::Outcome::Skipped:
                undo_request(done.request, client_ ? &client_->statements() : nullptr,
                             statements_);
                break;
        }
    }
    finished.clear();
}

void Server::settle_requests() {
    if (link_.requests().finished().empty()) return;  // the usual case: skip building the callback
    settle_requests([this](std::string&& reply) { client_->send(reply); });
}

bool Server::send_lost_statement_batch_again(char status) {
    std::optional<std::string> batch = link_.take_lost_statement_batch(
        link_.tracker().idle(), status, client_->can_take_input_back());
    if (!batch) return false;
    spdlog::info("{}: a prepared statement of {} was lost on the backend (26000): prepared "
                  "again, its batch sent once more",
                  describe(), client_->describe());
    client_->take_input_back(*batch);
    return true;
}

void Server::resume_input_from_client() {
    if (state_ == State::Closing) return;
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Server::cancel_finished() {
    if (cancels_in_flight_ > 0) --cancels_in_flight_;
    if (cancels_in_flight_ == 0 && state_ == State::BeingCancelled) {
        pool_.release(*this, ReleaseReason::CancelsArrived);
    }
}

// ---------------------------------------------------------------------------------------------
// Reading from the server

void Server::dedicate_to(Client& client) {
    replication_client_ = &client;
    replication_ = client.replication();
}

void Server::finish_replication_login() {
    // No role check, connect_query or parameter sync: a physical walsender runs no SQL, and the
    // session is the client's from its first byte (core/replication.hpp).
    login_failed_reported_ = true;
    pool_.on_replication_login_ended();
    Client* client = replication_client_;
    replication_client_ = nullptr;
    if (client == nullptr) {
        close("replication client disconnected");
        return;
    }
    client_ = client;
    transition(State::Relaying);
    client->on_replication_server_ready(*this);
}

void Server::fail_replication_login(const protocol::ErrorFields& error) {
    // PgBouncer's line for a replication login ("S: login failed: FATAL <message>").
    note_login_failure("login failed", error);
    pool_.on_replication_login_ended();
    Client* client = replication_client_;
    replication_client_ = nullptr;
    // Closed first, so that the slot is free when the client's departure looks for one.
    close("login failed");
    if (client) client->on_replication_server_failed(error);
}

std::size_t Server::relay_to_client(ByteSpan data) {
    pool_.stats().bytes_sent += data.size();
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(const_cast<std::uint8_t*>(data.data())),
                               static_cast<unsigned>(data.size()));
    // The client's socket backed up: read on when it drains (Client::on_stream_drained).
    if (!client_->send_from_server(&buf, 1)) stream_.stop_reading();
    return data.size();
}

std::size_t Server::on_stream_data(ByteSpan data) {
    std::size_t consumed = 0;
    // Once TLS starts, the rest of this plaintext must not be read (Stream refuses it).
    while (consumed < data.size() && !stream_.tls_handshaking()) {
        ByteSpan rest = data.subspan(consumed);
        std::size_t n = 0;
        switch (state_info(state_).input) {  // core/server_state.hpp
            case ServerInput::None: return consumed;
            case ServerInput::TlsAnswer: n = handle_tls_answer(rest); break;
            case ServerInput::Login: n = handle_login_data(rest); break;
            case ServerInput::OwnQuery: n = handle_internal_data(rest); break;
            case ServerInput::Client: n = handle_linked_data(rest); break;
            case ServerInput::Relay: n = relay_to_client(rest); break;
            case ServerInput::Unsolicited: n = handle_unexpected_data(rest); break;
        }
        if (n == 0) break;
        consumed += n;
        if (!stream_.reading()) break;  // back-pressure: the client is backed up
    }
    return consumed;
}

std::size_t Server::handle_linked_data(ByteSpan data) {
    ForwardBatch batch;
    // pgtether's own replies, alive until flushed. A list: it is almost always empty, and an empty
    // list allocates nothing (libstdc++'s deque allocates in its constructor, on every read).
    std::list<std::string> answers;
    std::size_t consumed = 0;
    auto flush = [&]() {
        if (batch.empty()) return;
        pool_.stats().bytes_sent += batch.bytes();
        if (!client_->send_from_server(batch.bufs(), batch.count())) stream_.stop_reading();
        batch.clear();
    };
    auto forward = [&](const std::uint8_t* p, std::size_t n) {
        if (!batch.add(p, n)) {
            flush();
            batch.add(p, n);
        }
    };
    // pgtether's answers to requests whose turn came, in place in the reply stream.
    auto settle = [&]() {
        if (link_.requests().finished().empty()) return;
        settle_requests([&](std::string&& reply) {
            answers.push_back(std::move(reply));
            forward(reinterpret_cast<const std::uint8_t*>(answers.back().data()),
                    answers.back().size());
        });
    };
    auto& tracker = link_.tracker();
    auto& requests = link_.requests();
    auto& locks = link_.lock_accounting();
    // A Query that mixed LISTEN with other statements is being answered (core/listen_splice.hpp).
    bool splicing = link_.splicing();
    const auto max_length = static_cast<std::uint32_t>(context_.config().max_packet_size);
    while (consumed < data.size()) {
        const MessageReader::Next next = reader_.next(data.subspan(consumed), max_length);
        if (next.step == MessageReader::Step::Forward) {
            // The rest of a streamed message.
            forward(next.bytes.data(), next.bytes.size());
            consumed += next.bytes.size();
            continue;
        }
        if (next.step == MessageReader::Step::Skip) {
            consumed += next.bytes.size();
            continue;
        }
        if (next.step == MessageReader::Step::Invalid) {
            flush();
            close("invalid message from server");
            return consumed;
        }
        if (next.step != MessageReader::Step::Message) {
            if (next.step == MessageReader::Step::Partial && streamable_from_server(next.type)) {
                tracker.on_backend(next.type);
                forward(next.bytes.data(), next.bytes.size());
                reader_.forward_rest(next);
                consumed = data.size();
            }
            break;
        }
        const ByteSpan body = next.body();
        const ByteSpan rest = next.bytes;
        const char type = next.type;
        consumed += next.total;
        // With statement translation, replies to messages pgtether injected are not for the
        // client (RequestQueue says which).
        bool swallow = link_.translates_statements() && !requests.empty() &&
                       requests.on_backend_message(type) == RequestQueue::Verdict::Swallow;
        if (locks.armed()) locks.on_backend_message(type, body);
        // What the client gets in this message's place: a spliced Query's LISTEN answer, or its
        // error with the position in the client's own text.
        const std::string* replacement = nullptr;
        if (splicing && type != be::kReadyForQuery) [[unlikely]] {
            replacement = spliced_reply(type, body, answers, swallow);
        }
        switch (type) {
            case be::kReadyForQuery: {
                auto status = protocol::parse_ready_for_query(body);
                if (!status) {
                    flush();
                    close("invalid ReadyForQuery from server");
                    return consumed;
                }
                tracker.on_ready_for_query(*status);
                if (link_.lost_statement_retry_on()) [[unlikely]] {
                    flush();  // what the client got before stays before what a retry brings
                    if (send_lost_statement_batch_again(*status)) {
                        // Neither the held 26000 nor this ReadyForQuery is the client's: its
                        // batch goes again, and the rest of this read is offered after it.
                        stream_.redeliver_pending_input();
                        return consumed;
                    }
                    if (link_.lost_statement_error_held()) {
                        answers.push_back(link_.take_held_lost_statement_error());
                        forward(reinterpret_cast<const std::uint8_t*>(answers.back().data()),
                                answers.back().size());
                    }
                }
                pool_.stats().query_count++;
                if (tracker.quiet()) record_timing(*status);
                if (*status == protocol::kTxIdle && tracker.quiet() &&
                    client_->has_held_notifications()) {
                    // What a multiplexed LISTEN held during the transaction goes right before
                    // the ReadyForQuery that ends it, where PostgreSQL sends notifications.
                    answers.push_back(client_->take_held_notifications());
                    forward(reinterpret_cast<const std::uint8_t*>(answers.back().data()),
                            answers.back().size());
                }
                // (Without LISTENs pgtether answered in the transaction, nothing to decide: the
                // COMMIT flag is only ever set while some wait.)
                const PendingListenAction pending =
                    splicing || client_->has_pending_listens() ? pending_listens_at_ready(*status)
                                                               : PendingListenAction::Keep;
                splicing = false;  // the spliced Query's answer ended here
                if (pending == PendingListenAction::Commit && tracker.quiet()) {
                    // The LISTENs pgtether answered in the block take effect now; the block's
                    // ReadyForQuery waits until the listening connection listens on their
                    // channels (Client::commit_pending_listens).
                    flush();
                    client_->commit_pending_listens(std::string(
                        reinterpret_cast<const char*>(rest.data()), rest.size()));
                } else {
                    forward(rest.data(), rest.size());
                    if (pending == PendingListenAction::Commit) {
                        flush();
                        client_->commit_pending_listens({});
                    } else if (pending == PendingListenAction::Discard) {
                        client_->discard_pending_listens();
                    }
                }
                settle();
                if (pool_.mode() != PoolMode::Session && tracker.quiet()) {
                    if (pool_.mode() == PoolMode::Statement && *status != protocol::kTxIdle &&
                        !client_->tethered()) {
                        // Drop the replies not yet sent (CommandComplete BEGIN, ReadyForQuery
                        // 'T'): the client must see only the error, never a transaction that
                        // seems to have started (PgBouncer likewise sends only the error).
                        batch.clear();
                        client_->fail(protocol::sqlstate::kFeatureNotSupported,
                                      "transaction blocks not allowed in statement pooling mode");
                        return consumed;
                    }
                    if (tracker.idle()) {
                        flush();
                        on_transaction_end();
                        return consumed;
                    }
                    if (link_.take_pipelined_probe_kinds() != 0) {
                        // The client's statements left a transaction block open (plan says
                        // they cannot; defensive): the probe ran inside it and means nothing.
                        flush();
                        start_internal(std::make_unique<DiscardedProbeJob>(), {}, 1, 0, 0);
                        return consumed;
                    }
                }
                continue;
            }
            case be::kParameterStatus: {
                auto status = protocol::parse_parameter_status(body);
                if (status) record_parameter(status->name, status->value, false);
                break;
            }
            case be::kCommandComplete:
                tracker.on_backend(type);
                if (client_->has_pending_listens()) {
                    const auto tag = protocol::parse_command_complete(body);
                    link_.note_pending_listen_tag(tag.value_or(std::string_view{}));
                }
                if (!prepared_probes_.empty() && deallocates_all(body)) prepared_probes_.clear();
                if (link_.translates_statements() && deallocates_all(body)) {
                    // DISCARD ALL / DEALLOCATE ALL: the backend and the client forgot every
                    // prepared statement.
                    StatementTranslator::forget_all(&client_->statements(), statements_);
                }
                break;
            case be::kAuthentication:
            case be::kBackendKeyData:
                flush();
                close(std::string("unexpected message from server: '") + type + "'");
                return consumed;
            case be::kBindComplete:
                tracker.on_backend(type);
                // The batch's Bind found its statement: nothing to send again.
                if (link_.lost_statement_retry_on()) link_.note_bind_complete();
                break;
            case be::kErrorResponse:
                tracker.on_backend(type);
                // The backend now skips to the next Sync: a Parse of "" sent meanwhile is lost.
                unnamed_unknown_ = true;
                if (auto error = protocol::parse_error_fields(body)) {
                    if (!swallow && link_.lost_statement_retry_on() &&
                        !protocol::is_fatal(*error)) [[unlikely]] {
                        // The first error of a batch that may go again: its Bind met a statement
                        // the backend lost (held until the ReadyForQuery), or the retry is off.
                        swallow = link_.hold_lost_statement_error(error->sqlstate, rest);
                    }
                    if (!swallow && protocol::is_fatal(*error)) {
                        if (client_->tethered()) {
                            // The backend's last word, but not the whole story for a client
                            // whose session state dies with it: Client::on_server_lost tells
                            // it that (core/server_loss.hpp), naming this message.
                            link_.hold_fatal_message(error->message);
                            swallow = true;
                        } else {
                            // The client needs no other word: one error, then the close.
                            link_.note_fatal_forwarded();
                        }
                    }
                    link_.note_failed_sqlstate(error->sqlstate);  // for settle_requests
                }
                break;
            default:
                tracker.on_backend(type);
                break;
        }
        if (!swallow) {
            if (replacement == nullptr) [[likely]] {
                forward(rest.data(), rest.size());
            } else {
                forward(reinterpret_cast<const std::uint8_t*>(replacement->data()),
                        replacement->size());
            }
        }
        settle();
    }
    flush();
    return consumed;
}

const std::string* Server::spliced_reply(char type, ByteSpan body,
                                         std::list<std::string>& answers, bool& swallow) {
    switch (link_.spliced_replies().on_backend_message(type)) {
        case SplicedReplies::Verdict::Forward: return nullptr;
        case SplicedReplies::Verdict::Swallow: swallow = true; return nullptr;
        case SplicedReplies::Verdict::ListenComplete:
            answers.emplace_back();
            protocol::append_command_complete(answers.back(), link_.spliced_replies().listen_tag());
            return &answers.back();
        case SplicedReplies::Verdict::ErrorPosition: {
            const auto position = protocol::parse_error_position(body);
            if (!position) return nullptr;
            auto error = protocol::error_with_position(
                body, link_.listen_splice().client_position(*position));
            return error ? &answers.emplace_back(std::move(*error)) : nullptr;
        }
    }
    return nullptr;
}

PendingListenAction Server::pending_listens_at_ready(char status) {
    bool commit_seen = link_.take_commit_seen();
    if (link_.splicing()) {
        // The LISTENs of a Query that mixed them with other statements: pending in the client's
        // block, or in effect now that their own transaction committed.
        const SplicedReplies& spliced = link_.spliced_replies();
        const SplicedListenOutcome outcome = decide_spliced_listens(status, spliced.failed());
        if (outcome.take) client_->add_pending_listens(spliced.completed());
        commit_seen = commit_seen || outcome.commit;
        link_.end_listen_splice();
    }
    return client_->has_pending_listens() ? decide_pending_listens(status, commit_seen)
                                          : PendingListenAction::Keep;
}

void Server::record_parameter(std::string_view name, std::string_view value,
                              bool forward_to_client) {
    // The role (target_session_attrs): in_hot_standby turns off when a standby is promoted. The
    // read-only setting counts at login only: a client's SET changes it for its session alone.
    if (name == "in_hot_standby") {
        role_.in_hot_standby = value == "on";
        role_reported_ = true;
    }
    if (name == "default_transaction_read_only" && login_) role_.read_only = value == "on";
    auto tracked = find_tracked_param(name);
    if (!tracked) return;
    params_.set(*tracked, value);
    if (client_ && state_info(state_).linked) {
        // The client either caused this change (SET) or must learn the canonical spelling of a
        // value it asked for during parameter sync. What it last saw is its own value, or, for
        // a parameter it never chose, the pool's that greeted it: a sync back to that value
        // (a backend that last served a client with an application_name) is news to nobody,
        // and PostgreSQL reports only changes.
        auto current = client_->params().get(*tracked);
        if (!current) current = pool_.default_params().get(*tracked);
        if (!current || *current != value) {
            client_->params().set(*tracked, value);
            if (forward_to_client) {
                std::string message;
                protocol::append_parameter_status(message, name, value);
                client_->send(message);
            }
        }
    }
}

std::size_t Server::handle_unexpected_data(ByteSpan data) {
    // An unlinked server has nothing to say; but PostgreSQL may report a parameter change, send a
    // notice, deliver a notification for a channel nobody listens to any more, or terminate.
    const MessagesRead read =
        read_messages(data, ServerLogin::kMaxMessage, [&](const MessageReader::Next& message) {
            switch (message.type) {
                case be::kParameterStatus:
                    if (auto status = protocol::parse_parameter_status(message.body())) {
                        record_parameter(status->name, status->value, false);
                    }
                    return true;
                case be::kNoticeResponse:
                case be::kNotificationResponse:
                    return true;
                case be::kErrorResponse: {
                    auto error = protocol::parse_error_fields(message.body());
                    close("server error while idle: " +
                          (error ? error->message : std::string("?")));
                    return false;
                }
                default:
                    close(std::string("unexpected message from idle server: '") + message.type +
                          "'");
                    return false;
            }
        });
    if (read.invalid) close("invalid message from idle server");
    return read.consumed;
}

void Server::on_stream_end(int status) {
    stream_ended_ = true;
    std::string why = status == UV_EOF
                          ? "server closed the connection"
                          : "server connection failed: " + std::string(uv_strerror(status));
    if (!stream_.tls_error().empty()) why += " (TLS: " + stream_.tls_error() + ")";
    close(why);
}

void Server::on_stream_drained() {
    if (client_) client_->resume_input();
}

// ---------------------------------------------------------------------------------------------
// Transaction boundaries and the tether

void Server::on_transaction_end() {
    const TransactionEndDecision decision =
        link_.at_boundary(context_.config(), client_->tether_kinds(), client_->lock_ledger());
    const std::uint32_t effects = link_.effects();
    link_.clear_effects();
    auto& locks = link_.lock_accounting();
    if (effects & protocol::kEffectCatalogChange) {
        context_.on_catalog_change(pool_.database_name());
    }
    if (decision.ledger_unknown) {
        LockLedger unknown = locks.ledger();
        unknown.mark_unknown();
        client_->adopt_lock_ledger(unknown);
    } else if (decision.adopt_ledger) {
        pool_.stats().ledger_decisions++;
        client_->adopt_lock_ledger(locks.ledger());
    }
    locks.reset();
    note_tether_change(decision.tether_kinds);
    if (const std::uint32_t pipelined = link_.take_pipelined_probe_kinds()) {
        // The probe already went out behind the client's statement (Client::handle_requests):
        // its answer is next, and it is the truth whatever this decision would have asked.
        start_internal(std::make_unique<TetherProbeJob>(), {}, 1, 0, pipelined);
        return;
    }
    switch (decision.action) {
        case TransactionEndDecision::Action::Probe:
            pool_.stats().probes++;
            probe_tether(decision.probe_kinds);
            return;
        case TransactionEndDecision::Action::Keep:
            return;
        case TransactionEndDecision::Action::Release:
            release_to_pool();
            return;
    }
}

void Server::on_partial_message_sent() {
    if (client_ && state_ == State::Linked && link_.tracker().idle() &&
        pool_.mode() != PoolMode::Session) {
        on_transaction_end();
    }
}

void Server::probe_idle_tether() {
    pool_.stats().probes++;
    probe_tether(kStateAdvisoryLock);
}

void Server::note_tether_change(std::uint32_t kinds) {
    Client* client = client_;
    bool was = client->tethered();
    if ((client->tether_kinds() & kStateTempTable) && !(kinds & kStateTempTable)) {
        // The session's temporary objects are gone: statements planned meanwhile may name them
        // and must not be handed to the next client (docs/prepared-statements.md).
        statements_.mark_all_stale();
    }
    client->set_tether_kinds(kinds);
    if (!was && client->tethered()) {
        pool_.stats().tether_events++;
        spdlog::debug("{}: tethered to backend {} by {}", client->describe(), backend_key_.pid,
                      client->describe_tether());
    } else if (was && !client->tethered()) {
        pool_.stats().untether_events++;
        spdlog::debug("{}: untethered from backend {}", client->describe(), backend_key_.pid);
    }
    if (was != client->tethered()) pool_.on_tether_change();
}

const std::vector<std::string>& Server::custom_settings_to_probe(std::uint32_t kinds) const {
    static const std::vector<std::string> kNoCustomSettings;
    return client_ && (kinds & kStateSettings) ? client_->custom_setting_names()
                                               : kNoCustomSettings;
}

std::string Server::probe_messages(std::uint32_t kinds) {
    const auto& custom = custom_settings_to_probe(kinds);
    std::string sql = build_state_probe(kinds, custom, pool_.user_name());
    std::string out;
    if (sql.empty()) return out;
    if (!custom.empty() || prepared_probe_refused_) {
        protocol::append_query(out, sql);
        return out;
    }
    // Prepared once per backend and kind mask, then only bound and executed: no parse and plan
    // each time.
    const std::string name = "pgtether_probe_" + std::to_string(kinds);
    if (std::find(prepared_probes_.begin(), prepared_probes_.end(), kinds) ==
        prepared_probes_.end()) {
        protocol::append_parse(out, name, sql);
        prepared_probes_.push_back(kinds);
    }
    protocol::append_bind(out, "", name, {});
    protocol::append_execute(out, "", 0);
    protocol::append_sync(out);
    return out;
}

std::string Server::pipeline_probe(std::uint32_t kinds) {
    std::string messages = probe_messages(kinds);
    if (!messages.empty()) {
        link_.set_pipelined_probe_kinds(kinds);
        pool_.stats().probes++;
    }
    return messages;
}

void Server::probe_tether(std::uint32_t kinds) {
    // The transaction-end probe, the one that runs often: prepared when it can be
    // (probe_messages). Reset, scrub and sweep run after DISCARD ALL or server_reset_query, which
    // may drop prepared statements: theirs stay simple queries (run_cleanup).
    std::string messages = probe_messages(kinds);
    const int own = messages.empty() ? 0 : 1;
    start_internal(std::make_unique<TetherProbeJob>(), std::move(messages), own, 0,
                   own ? kinds : 0);
}

// ---------------------------------------------------------------------------------------------
// pgtether's own queries

void Server::run_internal(std::unique_ptr<OwnQueryJob> job, const std::vector<std::string>& queries,
                          std::string prefix, int extra_ready, std::uint32_t probed) {
    std::string out = std::move(prefix);
    for (const auto& q : queries) protocol::append_query(out, q);
    // A simple Query destroys the backend's unnamed statement (ours run at quiet points).
    if (!queries.empty()) {
        unnamed_statement_.reset();
        unnamed_unknown_ = false;
    }
    spdlog::trace("S-{}: running {}: {}", id_, purpose_traits(job->purpose).name,
                  queries.empty() ? std::string() : queries.back());
    const int own = static_cast<int>(queries.size());
    start_internal(std::move(job), std::move(out), own, extra_ready, probed);
}

void Server::start_internal(std::unique_ptr<OwnQueryJob> job, std::string messages, int own_ready,
                            int extra_ready, std::uint32_t probed) {
    transition(purpose_traits(job->purpose).state);
    internal_ = std::move(job);
    internal_->probed = probed;
    internal_->pending_ready = own_ready + extra_ready;
    internal_->own_ready = own_ready;
    // A message that was being streamed to a client which has since left (a scrub after the
    // client vanished mid-COPY TO / mid-result): its rest must be skipped, not framed.
    reader_.skip_remainder();
    if (!messages.empty()) stream_.write(messages);
    if (internal_->pending_ready == 0) {
        finish_internal();
        return;
    }
    // The replies are ours to consume, so a client's back-pressure must not hold them up. Reading
    // may still be stopped because the (possibly departed) client was backed up: a scrub after a
    // client vanished mid-COPY TO STDOUT otherwise never reads the rest and times out.
    if (!stream_.reading()) {
        stream_.start_reading();
        stream_.redeliver_pending_input();
    }
}

std::size_t Server::handle_internal_data(ByteSpan data) {
    std::size_t consumed = 0;
    OwnQueryJob& op = *internal_;
    auto ours = [&]() { return op.pending_ready <= op.own_ready; };
    const auto max_length = static_cast<std::uint32_t>(context_.config().max_packet_size);
    while (consumed < data.size()) {
        const MessageReader::Next next = reader_.next(data.subspan(consumed), max_length);
        if (next.step == MessageReader::Step::Skip || next.step == MessageReader::Step::Forward) {
            // The rest of a message nobody receives any more (start_internal turned a forwarded
            // remainder into a skipped one).
            consumed += next.bytes.size();
            continue;
        }
        if (next.step == MessageReader::Step::Invalid) {
            close("invalid message from server");
            return consumed;
        }
        if (next.step != MessageReader::Step::Message) {
            // Results of a request the departed client left behind are thrown away as they come.
            if (next.step == MessageReader::Step::Partial && !ours() &&
                streamable_from_server(next.type)) {
                reader_.skip_rest(next);
                consumed = data.size();
            }
            break;
        }
        const ByteSpan body = next.body();
        const char type = next.type;
        consumed += next.total;
        if (!ours() && link_.translates_statements() && !link_.requests().empty()) {
            // Replies the departed client's requests still get: keep the backend's statement
            // bookkeeping true (nobody receives answers any more).
            link_.requests().on_backend_message(type);
            settle_requests([](std::string&&) {});
        }
        if (type == be::kCommandComplete && deallocates_all(body)) {
            StatementTranslator::forget_all(nullptr, statements_);
            prepared_probes_.clear();
            applied_settings_.clear();
        }
        switch (type) {
            case be::kRowDescription:
            case be::kBindComplete:
            case be::kDataRow:
            case be::kCommandComplete:
            case be::kErrorResponse:
                // Our answer (a new result set, a row, its end, our error); the departed
                // client's are thrown away.
                if (ours() && collect_result(op, type, body) != Collected::Ok) {
                    close("invalid DataRow from server");
                    return consumed;
                }
                if (type == be::kErrorResponse &&
                    (op.error.severity == "FATAL" || op.error.severity == "PANIC")) {
                    close("server error: " + op.error.message);
                    return consumed;
                }
                break;
            case be::kParameterStatus:
                if (auto status = protocol::parse_parameter_status(body)) {
                    record_parameter(status->name, status->value,
                                     op.purpose == InternalPurpose::ParamSync);
                }
                break;
            case be::kNotificationResponse:
                // A notification belongs to the session, not to our query: pass it on.
                if (client_ && state_info(state_).linked) client_->send(protocol::as_chars(next.bytes));
                break;
            case be::kReadyForQuery: {
                auto status = protocol::parse_ready_for_query(body);
                if (!status) {
                    close("invalid ReadyForQuery from server");
                    return consumed;
                }
                link_.tracker().on_ready_for_query(*status);
                if (--op.pending_ready == 0) {
                    finish_internal();
                    return consumed;
                }
                break;
            }
            case be::kAuthentication:
            case be::kBackendKeyData:
                close(std::string("unexpected message from server: '") + type + "'");
                return consumed;
            default:
                // CommandComplete, EmptyQueryResponse, notices, COPY traffic of a drained request.
                break;
        }
    }
    return consumed;
}

void Server::finish_internal() {
    std::unique_ptr<OwnQueryJob> job = std::move(internal_);
    // Our queries ran as simple queries outside any transaction block; anything else is dirty.
    const bool clean = link_.tracker().idle() && !job->failed;
    const bool for_client = purpose_traits(job->purpose).for_client;
    if (for_client && client_ == nullptr) {
        // The client left while we worked on its behalf (see Client::detach_from_server).
        job->on_end_without_client(*this, clean);
        return;
    }
    // Back to forwarding (what follows may start another query, release or scrub).
    if (for_client) transition(State::Linked);
    job->on_end(*this, clean);
}

std::optional<InternalPurpose> Server::internal_purpose() const {
    return internal_ ? std::optional(internal_->purpose) : std::nullopt;
}

void Server::scrub() {
    // One write that brings the backend back to a known state, whatever the client left
    // (core/departure.hpp, plan_scrub): DISCARD ALL ends every kind of session state (advisory
    // locks, temporary tables, LISTEN, cursors, prepared statements, settings); the probe
    // verifies it.
    const auto& tracker = link_.tracker();
    ScrubState state;
    state.left_running = tracker.outstanding();  // the client's, before our own Sync
    state.probe_pipelined = link_.take_pipelined_probe_kinds() != 0;
    state.in_copy_in = tracker.in_copy_in();
    state.unsynced = tracker.unsynced();
    state.transaction_open = tracker.tx_status() != protocol::kTxIdle;
    state.tracked = tracked_kinds(context_.config());
    run_cleanup(InternalPurpose::Scrub, plan_scrub(state));
}

void Server::reset() {
    const auto& config = context_.config();
    run_cleanup(InternalPurpose::Reset,
                plan_reset(config.server_reset_query, tracked_kinds(config)));
}

void Server::sweep_for_leaks() {
    run_cleanup(InternalPurpose::LeakSweep, plan_sweep(tracked_kinds(context_.config())));
}

void Server::check_catalog(CatalogCheckDone done) {
    // `done` is told when the job ends or the server closes first (CatalogCheckJob).
    run_internal(std::make_unique<CatalogCheckJob>(std::move(done)), {catalog_fingerprint_query()});
}

void Server::check_role() {
    run_internal(std::make_unique<RoleCheckJob>(), {std::string(kRoleCheckQuery)});
}

void Server::run_cleanup(InternalPurpose purpose, const CleanupPlan& plan) {
    std::string prefix;
    if (plan.copy_fail) protocol::append_copy_fail(prefix, "client disconnected");
    if (plan.sync) {
        protocol::append_sync(prefix);
        // The tracker must see this Sync too, or it keeps the batch "unsynced" and the scrub,
        // which only passes an idle tracker, closes a backend it had cleaned.
        link_.tracker().on_frontend(protocol::fe::kSync);
    }
    std::vector<std::string> queries = plan.queries;
    std::string sql = build_state_probe(
        plan.probe_kinds, custom_settings_to_probe(plan.probe_kinds), pool_.user_name());
    const std::uint32_t probed = sql.empty() ? 0 : plan.probe_kinds;
    if (!sql.empty()) queries.push_back(std::move(sql));
    run_internal(std::make_unique<CleanupJob>(purpose), queries, std::move(prefix),
                 plan.extra_ready, probed);
    if (internal_ && plan.cancel) context_.forward_cancel(*this);
}

// ---------------------------------------------------------------------------------------------
// Closing

void Server::close(const std::string& reason) {
    if (state_ == State::Closing) return;
    State previous = state_;
    transition(State::Closing);
    // PgBouncer's words ("closing because: REASON (age=Ns)"), then the backend.
    spdlog::log(context_.config().log_disconnections ? spdlog::level::info : spdlog::level::debug,
                "{} closing because: {} (age={}s) backend pid {}", describe(), reason,
                (context_.now_ms() - connected_at_ms_) / 1000, backend_key_.pid);
    const bool logging_in = previous == State::Connecting || previous == State::TlsAnswer ||
                            previous == State::Login;
    if (logging_in && !login_failed_reported_ && replication_ != ReplicationMode::None) {
        // A replication client's backend closed during its login (a timeout, its client left).
        login_failed_reported_ = true;
        pool_.on_replication_login_ended();
        if (Client* client = replication_client_) {
            replication_client_ = nullptr;
            client->on_replication_server_failed(protocol::fatal_error(
                protocol::sqlstate::kConnectionFailure, "server connection failed: " + reason));
        }
    } else if (logging_in && !login_failed_reported_) {
        login_failed_reported_ = true;
        // The connection broke or timed out before the login completed: worth a quick retry.
        pool_.on_server_login_failed(*this,
                                     protocol::fatal_error(protocol::sqlstate::kConnectionFailure,
                                                           "server connection failed: " + reason),
                                     LoginFailureKind::Unreachable);
    }
    if (!logging_in) {
        std::string terminate;
        protocol::append_terminate(terminate);
        stream_.write(terminate);
    }
    if (std::unique_ptr<OwnQueryJob> job = std::move(internal_)) job->on_server_closed();
    if (Client* linked = client_) {
        client_ = nullptr;
        if (previous == State::Relaying) {
            linked->on_relay_ended(reason, stream_ended_);
        } else {
            const std::string& held = link_.held_fatal_message();
            linked->on_server_lost(held.empty() ? reason : held, link_.client_forwarded(),
                                   link_.fatal_forwarded());
        }
    }
    pool_.forget_server(*this);
    stream_.close();
}

void Server::maybe_finish_close() {
    if (stream_closed_ && pending_resolves_ == 0) delete this;
}

void Server::on_stream_closed() {
    stream_closed_ = true;
    maybe_finish_close();
}

}  // namespace pgtether
