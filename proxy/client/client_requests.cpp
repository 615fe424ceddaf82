// A logged-in client's requests: borrowing a server, scanning statements for the tether, and
// forwarding — with named prepared statements translated to the serving backend
// (docs/prepared-statements.md).
#include <algorithm>
#include <list>

#include "proxy/net/log.hpp"

#include "core/message_budget.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/deallocate_statement.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sql_scanner.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/client_context.hpp"
#include "proxy/client/console_session.hpp"
#include "proxy/net/forward_batch.hpp"
#include "proxy/pool/pool.hpp"

namespace pgtether {

namespace fe = protocol::fe;
using protocol::ByteSpan;
using protocol::MessageReader;

namespace {

// How much of a statement is kept for SHOW LOCKS and leak reports.
constexpr std::size_t kLastQueryLength = 200;
// Custom setting names remembered per client for the probe (pg_settings does not list them).
constexpr std::size_t kMaxCustomSettings = 64;
// Effects that may change the session's advisory locks: a lock function (or configured wrapper)
// named, or DISCARD.
constexpr std::uint32_t kLockRelevant = protocol::kEffectAdvisoryLock | protocol::kEffectDiscard;

// Messages a client sends that are only forwarded: streamed when larger than what has arrived.
bool streamable_from_client(char type) { return type == fe::kCopyData; }

bool is_known_frontend_type(char type) {
    switch (type) {
        case fe::kBind: case fe::kClose: case fe::kCopyData: case fe::kCopyDone:
        case fe::kCopyFail: case fe::kDescribe: case fe::kExecute: case fe::kFlush:
        case fe::kFunctionCall: case fe::kParse: case fe::kQuery: case fe::kSync:
        case fe::kTerminate:
            return true;
        default:
            return false;
    }
}

// Whether a frontend message gets a reply that ends a request (see RequestQueue).
bool is_request(char type) {
    switch (type) {
        case fe::kParse: case fe::kBind: case fe::kDescribe: case fe::kExecute:
        case fe::kClose: case fe::kSync: case fe::kQuery: case fe::kFunctionCall:
            return true;
        default:
            return false;
    }
}

std::string error_message(const char* sqlstate, std::string message) {
    std::string out;
    protocol::append_error_response(out, {"ERROR", sqlstate, std::move(message), {}, {}});
    return out;
}

// A named statement whose text pgtether does not keep (too large, or beyond the client's
// max_prepared_statement_bytes without translation): only the name and assumed effects.
StatementPtr withheld_statement(std::uint32_t effects) {
    auto statement = std::make_shared<PreparedStatement>();
    statement->effects = effects;
    statement->text_withheld = true;
    return statement;
}

}  // namespace

// Bytes on their way to the server: ranges of the receive buffer plus messages pgtether wrote
// (rewritten or injected), which live in `owned` until the batch is flushed.
struct Client::Outbound final : StatementTranslator::Output {
    explicit Outbound(Client& owner) : client(owner) {}

    Client& client;
    ForwardBatch batch;
    // A list, not a deque: libstdc++'s deque allocates in its constructor, and this object
    // exists for every read from a client while almost never holding anything.
    std::list<std::string> owned;

    bool flush() {
        if (batch.empty()) return true;
        client.pool_->stats().bytes_received += batch.bytes();
        bool done = client.server_->send_from_client(batch.bufs(), batch.count());
        batch.clear();
        owned.clear();
        if (!done) client.pause_input();
        return done;
    }
    void add(const std::uint8_t* p, std::size_t n) {
        if (!batch.add(p, n)) {
            flush();
            batch.add(p, n);
        }
    }
    void add_owned(std::string bytes) override {
        if (batch.count() == ForwardBatch::kMaxRanges) flush();
        owned.push_back(std::move(bytes));
        batch.add(protocol::as_bytes(owned.back()));
    }
};

std::size_t Client::handle_requests(ByteSpan data) {
    if (admin_) {
        last_activity_ms_ = context_.now_ms();
        return admin_->on_data(data);
    }
    if (reader_.in_message() && !reader_.forwarding()) {
        // The rest of a message pgtether refused or skipped (take_oversized): dropped as it
        // arrives, never held, whether or not a server is linked meanwhile.
        return reader_.next(data, 0).bytes.size();
    }
    // Like PostgreSQL (SocketBackend), judge the type byte before waiting for the rest of a
    // message: garbage whose "length" is large is refused at once, not waited for (and never
    // costs a server).
    if (!reader_.in_message() && !is_known_frontend_type(static_cast<char>(data[0]))) {
        fail(protocol::sqlstate::kProtocolViolation,
             "invalid frontend message type " + std::to_string(data[0]));
        return data.size();
    }
    if (awaiting_listen()) {
        hold_input(data.size());  // the answer to a LISTEN waits for the listening connection
        return 0;
    }
    if (state_ == State::Active && !reader_.in_message() &&
        server_->client_between_transactions() && answers_listen(protocol::kTxIdle)) {
        // A tethered client between its transactions: its LISTEN needs no backend either --
        // unless the backend listens itself (the client's channels moved there), where its
        // LISTEN and UNLISTEN must go, or the backend would keep channels the client gave up.
        if (const auto answered = answer_listen(data)) return *answered;
    }
    if (state_ == State::Active && !reader_.in_message() &&
        server_->client_in_open_transaction() && answers_listen(protocol::kTxInBlock)) {
        // Inside an open transaction block: answered now, in effect at the COMMIT, as
        // PostgreSQL's LISTEN would be -- unless a SAVEPOINT came first, whose ROLLBACK TO
        // could undo it unseen by pgtether: then the backend runs it (and the client tethers).
        if (const auto answered = answer_listen_in_transaction(data)) return *answered;
    }
    if (state_ == State::Idle) {
        const MessageReader::Next first = MessageReader::examine(data, kMaxAuthMessage);
        if (first.step == MessageReader::Step::Message) {
            // A lone Terminate needs no server.
            if (first.type == fe::kTerminate) {
                close("client close request");
                return data.size();
            }
            if (first.type == fe::kQuery && refuse_simple_query()) return data.size();
            if (first.type == fe::kQuery && answer_deallocate(data.first(first.total))) {
                return first.total;
            }
        }
        if (!reader_.in_message() && multiplexes_listen()) {
            if (const auto answered = answer_listen(data)) return *answered;
            note_unanswered_listen(data);
        }
        // SHUTDOWN WAIT_FOR_SERVERS: no transaction starts (PgBouncer's words and moment).
        if (context_.waiting_for_servers()) {
            fail(protocol::sqlstate::kAdminShutdown, "server shutting down");
            return data.size();
        }
        set_state(State::Waiting);
        switch (pool_->request_server(*this)) {
            case Pool::Assignment::Queued:
                hold_input(data.size());  // hold the request until a hand-off
                return 0;
            case Pool::Assignment::Failed:
                stream_.stop_reading();  // closed by a fast failure
                return 0;
            case Pool::Assignment::Assigned:
                if (state_ != State::Active) {
                    stream_.stop_reading();  // the link failed at once
                    return 0;
                }
                break;
        }
    }
    if (input_paused_) {
        stream_.stop_reading();  // back-pressure: the server's socket is backed up
        return 0;
    }
    if (server_->holds_client_input()) {
        hold_input(data.size());  // parameter sync, check or probe first
        return 0;
    }
    Outbound out{*this};
    std::size_t consumed = 0;
    auto& tracker = server_->link().tracker();
    // The last part of a message passed on in pieces went out in this call.
    bool finished_partial = false;
    const auto max_length = static_cast<std::uint32_t>(context_.config().max_packet_size);
    // Where a Query ended that exact lock accounting could not decide and that a probe may
    // follow at once (0: none).
    std::size_t probe_may_follow_at = 0;
    while (consumed < data.size() && state_ == State::Active) {
        const MessageReader::Next next = reader_.next(data.subspan(consumed), max_length);
        if (next.step == MessageReader::Step::Forward) {
            // The rest of a streamed CopyData, or of a message over client_buffer_limit.
            out.add(next.bytes.data(), next.bytes.size());
            consumed += next.bytes.size();
            if (!reader_.in_message()) {
                tracker.set_frontend_partial(false);
                finished_partial = true;
            }
            continue;
        }
        if (next.step == MessageReader::Step::Invalid) {
            out.flush();
            fail(protocol::sqlstate::kProtocolViolation,
                 next.length > max_length ? "message too large (max_packet_size)"
                                          : "invalid message length");
            return data.size();
        }
        if (next.step != MessageReader::Step::Message) {
            if (!is_known_frontend_type(static_cast<char>(next.bytes[0]))) {
                out.flush();
                fail(protocol::sqlstate::kProtocolViolation,
                     "invalid frontend message type " + std::to_string(next.bytes[0]));
                return data.size();
            }
            if (next.step == MessageReader::Step::Partial && streamable_from_client(next.type) &&
                !skip_until_sync_) {
                tracker.on_frontend(next.type);
                // Until its last byte is out, the backend is this client's whatever else it
                // answers: nothing else may be written to it (probe, hand-off).
                tracker.set_frontend_partial(true);
                out.add(next.bytes.data(), next.bytes.size());
                reader_.forward_rest(next);
                consumed = data.size();
            } else if (next.step == MessageReader::Step::Partial &&
                       next.total >
                           static_cast<std::size_t>(context_.config().client_buffer_limit)) {
                // Too large to hold whole (client_buffer_limit): streamed, discarded or refused.
                if (take_oversized(next, out)) consumed = data.size();
                if (state_ == State::Closing) return data.size();
            }
            break;
        }
        const ByteSpan message = next.bytes;
        const ByteSpan body = next.body();
        const char type = next.type;
        consumed += next.total;
        if (!is_known_frontend_type(type)) {
            out.flush();
            fail(protocol::sqlstate::kProtocolViolation,
                 "invalid frontend message type " +
                     std::to_string(static_cast<unsigned char>(type)));
            return data.size();
        }
        if (type == fe::kTerminate) {
            out.flush();
            close("client close request");
            return data.size();
        }
        if (skip_until_sync_) {
            // pgtether answered an earlier message of this batch with an error; PostgreSQL
            // would now discard everything up to the Sync (protocol §55.2.3), so do we.
            if (type != fe::kSync) continue;
            skip_until_sync_ = false;
        }
        note_request_start();
        bool routed = false;
        switch (type) {
            case fe::kQuery: {
                if (context_.config().disable_pqexec) {
                    out.flush();  // what came before it goes through, as in PgBouncer
                    refuse_simple_query();
                    return data.size();
                }
                auto sql = protocol::parse_query(body);
                if (!sql) {
                    out.flush();
                    fail(protocol::sqlstate::kProtocolViolation, "invalid Query message");
                    return data.size();
                }
                if (server_->link().translates_statements() &&
                    protocol::names_statement_with_prefix(*sql, kReservedStatementPrefix)) {
                    refuse_reserved_query(out);
                    routed = true;
                    break;
                }
                std::uint32_t effects = pool_->lock_trigger().scan(*sql);
                // LISTEN/UNLISTEN beside other statements: the backend runs the text with
                // stand-ins for them (core/listen_splice.hpp), and that text is what counts.
                // Only a text the trigger saw LISTEN in is looked at (the scan runs anyway).
                std::string spliced;
                std::string_view text = *sql;
                auto splice = (effects & protocol::kEffectListen)
                                  ? take_listen_splice(*sql, effects)
                                  : std::nullopt;
                if (splice) {
                    protocol::MessageWriter(spliced).begin(fe::kQuery).cstring(splice->sql).end();
                    text = std::string_view(spliced).substr(protocol::kTypedHeaderSize,
                                                            splice->sql.size());
                    server_->link().begin_listen_splice(std::move(*splice));
                }
                note_effects(text, effects);
                // A simple Query destroys the backend's unnamed statement (protocol §55.2.3).
                server_->note_unnamed_statement(nullptr);
                // A new transaction starts with this Query when nothing is owed and no block is
                // open: then its probe can go out right behind it.
                const bool starts_transaction =
                    tracker.quiet() && tracker.tx_status() == protocol::kTxIdle;
                if ((effects & kLockRelevant) && account_query_locks(text) && starts_transaction) {
                    probe_may_follow_at = consumed;
                }
                server_->link().lock_accounting().note_group_end();
                remember_query(*sql);
                if (!spliced.empty()) {
                    tracker.on_frontend(type);
                    out.add_owned(std::move(spliced));
                    if (server_->link().translates_statements()) {
                        server_->link().requests().push_forwarded(type);
                    }
                    routed = true;
                }
                break;
            }
            case fe::kParse: {
                auto parse = protocol::parse_parse(body);
                if (!parse) {
                    out.flush();
                    fail(protocol::sqlstate::kProtocolViolation, "invalid Parse message");
                    return data.size();
                }
                routed = route_parse(*parse, out);
                break;
            }
            case fe::kBind: routed = route_bind(body, out); break;
            case fe::kDescribe:
            case fe::kClose: routed = route_describe_or_close(body, type, out); break;
            case fe::kFunctionCall: note_function_call(); break;
            case fe::kExecute: account_execute(body); break;
            case fe::kSync: server_->link().lock_accounting().note_group_end(); break;
            default:
                break;
        }
        if (!routed) forward_as_sent(type, message, out);
        if (state_ == State::Active && server_->link().capturing_batch()) [[unlikely]] {
            // A batch that may go again; not one in which pgtether refused a message (its error
            // would be answered twice).
            if (skip_until_sync_) {
                server_->link().give_up_capture();
            } else {
                server_->link().capture(type, message);
            }
        }
    }
    last_activity_ms_ = context_.now_ms();
    if (state_ == State::Active) {
        // The Query that needs a probe was the last message: the probe follows it in the same
        // write instead of a round trip after its answer; the client's next messages wait for
        // the probe's answer, as they would anyway.
        if (probe_may_follow_at == consumed && consumed == data.size() &&
            pool_->mode() != PoolMode::Session) {
            pipeline_probe(out);
        }
        out.flush();
        server_->settle_requests();
        if (finished_partial && server_) server_->on_partial_message_sent();
    }
    return consumed;
}

bool Client::take_oversized(const MessageReader::Next& partial, Outbound& out) {
    const ByteSpan rest = partial.bytes;
    const ByteSpan body = rest.subspan(protocol::kTypedHeaderSize);
    const std::size_t missing = partial.total - rest.size();
    // The names at the start of a Parse (statement) or Bind (portal, statement).
    protocol::ByteReader names(body);
    const std::string_view first_name = names.cstring();
    const bool first_complete = names.ok();
    names.cstring();
    OversizedMessage message;
    message.type = partial.type;
    message.skipping_to_sync = skip_until_sync_;
    message.head_complete = partial.type == fe::kBind ? names.ok() : first_complete;
    message.budget_reached =
        rest.size() >= static_cast<std::size_t>(context_.config().client_buffer_limit);
    message.names_statement = partial.type == fe::kParse && !first_name.empty();
    message.translates_statements = server_->link().translates_statements();
    switch (decide_oversized_message(message)) {
        case OversizedAction::WaitForHead: return false;
        case OversizedAction::Discard: reader_.skip_rest(partial); return true;
        case OversizedAction::RefuseConnection:
            // PostgreSQL's answer to a message longer than it accepts (postgres.c, SocketBackend).
            out.flush();
            fail(protocol::sqlstate::kProtocolViolation, "invalid message length");
            return true;
        case OversizedAction::RefuseStatement:
            translator(out).answer(
                QueuedRequest::Kind::Answered, fe::kParse,
                error_message("54000",
                              "prepared statement too large: " + std::to_string(partial.total) +
                                  " bytes, pgtether holds at most " +
                                  std::to_string(context_.config().client_buffer_limit) +
                                  " (client_buffer_limit)"));
            skip_until_sync_ = true;
            reader_.skip_rest(partial);
            return true;
        case OversizedAction::Stream: break;
    }
    note_request_start();
    bool routed = false;
    switch (partial.type) {
        case fe::kQuery: {
            // Only the start of the text is here: the trigger scans it (a LOAD or a custom
            // setting's name at the start is seen) and assumes everything else.
            const std::string_view text_start = protocol::as_chars(body);
            note_effects(text_start, unscanned_effects() | pool_->lock_trigger().scan(text_start));
            // A simple Query destroys the backend's unnamed statement (protocol §55.2.3).
            server_->note_unnamed_statement(nullptr);
            account_uncertain();
            server_->link().lock_accounting().note_group_end();
            remember_query(text_start);
            break;
        }
        case fe::kParse:
            take_unscanned_parse(first_name,
                                 protocol::as_chars(body.subspan(first_name.size() + 1)), out);
            break;
        case fe::kBind:
            routed = route_bind(body, out, missing);
            if (skip_until_sync_) {  // refused (a reserved name): the rest is dropped
                reader_.skip_rest(partial);
                return true;
            }
            break;
        case fe::kFunctionCall: note_function_call(); break;
        default: break;  // CopyData, CopyFail: only forwarded
    }
    // What has arrived goes now (with the announced length), the rest as it comes; until its
    // last byte is out the backend is this client's (PipelineTracker::set_frontend_partial).
    if (!routed) forward_as_sent(partial.type, rest, out);
    server_->link().tracker().set_frontend_partial(true);
    reader_.forward_rest(partial);
    return true;
}

bool Client::refuse_simple_query() {
    if (!context_.config().disable_pqexec) return false;
    // PgBouncer's words: its error line, then the close with "PQexec disallowed" (FATAL, its
    // default SQLSTATE for a pooler's disconnect, 08P01).
    spdlog::error("{}: client used \"Query\" packet type", describe());
    fail(protocol::sqlstate::kProtocolViolation, "PQexec disallowed");
    return true;
}

void Client::refuse_reserved_query(Outbound& out) {
    // The backend fails it itself (core/statement_translation.hpp): a transaction block is
    // aborted and the replies keep their order, as for any failing statement. Nothing of the
    // client's text runs, so it has no effects to note.
    server_->note_unnamed_statement(nullptr);  // a simple Query destroys it (§55.2.3)
    std::string query;
    protocol::MessageWriter(query).begin(fe::kQuery).cstring(reserved_name_refusal_query()).end();
    server_->link().tracker().on_frontend(fe::kQuery);
    out.add_owned(std::move(query));
    if (server_->link().translates_statements()) server_->link().requests().push_forwarded(fe::kQuery);
}

void Client::note_request_start() {
    if (!server_->link().tracker().quiet()) return;
    query_started_ms_ = context_.now_ms();
    // Outside a transaction block, this request begins the next transaction (PgBouncer's
    // xact_start: a lone statement is a transaction too).
    if (server_->link().tracker().tx_status() == protocol::kTxIdle) {
        transaction_started_ms_ = query_started_ms_;
    }
    server_->link().note_request_start(context_.now_us());
}

void Client::note_function_call() {
    // A fast-path call names its function by OID: it could be a lock function.
    server_->link().mark_effects(protocol::kEffectAdvisoryLock);
    account_uncertain();
    server_->link().lock_accounting().note_group_end();
}

void Client::forward_as_sent(char type, ByteSpan bytes, Outbound& out) {
    server_->link().tracker().on_frontend(type);
    out.add(bytes.data(), bytes.size());
    if (server_->link().translates_statements() && is_request(type)) {
        server_->link().requests().push_forwarded(type);
    }
}

void Client::take_unscanned_parse(std::string_view name, std::string_view text_start,
                                  Outbound& out) {
    const std::uint32_t effects = unscanned_effects() | pool_->lock_trigger().scan(text_start);
    note_effects(text_start, effects);
    remember_query(text_start);
    // Later Binds of it count with the same assumed effects (route_bind).
    if (name.empty()) {
        server_->note_unnamed_statement(withheld_statement(effects));
    } else {
        translator(out).remember(name, withheld_statement(effects));
    }
}

// ---------------------------------------------------------------------------------------------
// Named prepared statements

bool Client::route_parse(const protocol::ParseMessage& parse, Outbound& out) {
    std::uint32_t relevant = pool_->lock_trigger().scan_statement(parse.query);
    note_effects(parse.query, relevant);
    remember_query(parse.query);
    auto intern = [&] {
        return context_.statements().intern(parse.query, parse.parameter_types, relevant,
                                           pool_->lock_trigger().scanner);
    };
    if (parse.statement.empty()) {
        // The unnamed statement is the backend's own: a later Bind of it (perhaps in another
        // transaction, perhaps by another client) has these effects again.
        server_->note_unnamed_statement(relevant != 0 ? intern() : nullptr);
        return false;
    }
    StatementTranslator statements = translator(out);
    const ParseAction action = statements.decide_parse(parse);
    switch (action) {
        // No translation: the name goes to the backend as is; it is remembered only so that a
        // later Bind of it still fires the tether's trigger. Beyond the client's bound the text
        // is not kept: its effects are, with every effect the probe checks added (the trigger
        // could not scan it again after a discovery); beyond the count not even the name.
        case ParseAction::ForwardUntracked:
            untracked_statement_names_ = true;
            return false;
        case ParseAction::ForwardRememberEffects:
            server_->link().note_parsed_name(parse.statement);
            statements.remember(parse.statement,
                                withheld_statement(relevant | unscanned_effects()));
            return false;
        case ParseAction::ForwardRemember:
            server_->link().note_parsed_name(parse.statement);
            statements.remember(parse.statement, intern());
            return false;
        case ParseAction::RefuseDuplicate:
        case ParseAction::RefuseTooMany:
        case ParseAction::RefuseTooLarge:
        case ParseAction::RefuseReservedName:
        case ParseAction::RefuseProcessFull:
            statements.refuse_parse(action, parse.statement);
            skip_until_sync_ = true;
            return true;
        case ParseAction::Translate:
            statements.translate_parse(parse.statement, intern());
            return true;
    }
    return false;
}

void Client::note_bound_effects(const protocol::BindNames& names, const StatementPtr& statement,
                                ByteSpan body) {
    // Executing a statement again has the effects its text has for this database's trigger: the
    // ones found at Parse, unless another trigger scanned it (another database shares the text,
    // or discovery has changed the names since).
    const LockTrigger& trigger = pool_->lock_trigger();
    const std::uint32_t effects =
        statement->text_withheld ||
                (statement->scanned_with == trigger.scanner && !trigger.probe_all)
            ? statement->effects
            : trigger.scan(statement->query);
    // Another client's unnamed statement may name custom settings this client never did.
    note_effects(statement->query, effects);
    if (effects & kLockRelevant) {
        account_bind_locks(names, statement, body);
    } else if (server_->link().lock_accounting().has_portals()) {
        server_->link().lock_accounting().forget_portal(names.portal);
    }
}

bool Client::route_bind(ByteSpan body, Outbound& out, std::size_t body_missing) {
    auto names = protocol::parse_bind_names(body);
    if (!names) return false;
    if (names->statement.empty() && server_->unnamed_statement_unknown()) {
        // An error may have kept the backend from parsing the last unnamed statement: what runs
        // could be anything, so anything is probed for.
        server_->link().mark_effects(protocol::kEffectDiscard);
        account_uncertain();
        if (server_->link().lock_accounting().has_portals()) {
            server_->link().lock_accounting().forget_portal(names->portal);
        }
        return false;
    }
    // Whatever the backend has under the name runs again, with its effects.
    StatementTranslator statements = translator(out);
    StatementPtr statement =
        names->statement.empty() ? server_->unnamed_statement() : statements.find(names->statement);
    if (statement && !names->statement.empty() && !server_->link().translates_statements() &&
        !server_->link().parsed_here(names->statement)) {
        // The name goes as sent, and this backend did not get it from this client during the
        // link: what runs is whatever the backend holds under it, maybe another client's
        // statement, whose effects are not those of the client's text. Probe.
        server_->link().mark_effects(unscanned_effects());
        account_uncertain();
        server_->link().lock_accounting().forget_portal(names->portal);
    } else if (statement) {
        // The parameters of a streamed Bind are not here to read: the accounting is uncertain.
        note_bound_effects(*names, statement, body_missing ? ByteSpan{} : body);
    } else if (!names->statement.empty() && untracked_statement_names_) {
        // One of the names pgtether stopped tracking without translation: it could do anything.
        server_->link().mark_effects(unscanned_effects());
        account_uncertain();
        server_->link().lock_accounting().forget_portal(names->portal);
    } else if (server_->link().lock_accounting().has_portals()) {
        server_->link().lock_accounting().forget_portal(names->portal);
    }
    if (statement && !names->statement.empty() && server_->link().translates_statements()) {
        arm_lost_statement_retry(*statement, body_missing);
    }
    // Unknown names go as they are: the backend reports them with the client's name.
    return routed(statements.bind(*names, statement, body, body_missing));
}

void Client::arm_lost_statement_retry(const PreparedStatement& statement,
                                      std::size_t body_missing) {
    const auto& tracker = server_->link().tracker();
    LostStatementArming facts;
    facts.backend_idle = tracker.quiet();
    facts.outside_block = tracker.idle();
    facts.whole_message = body_missing == 0;
    facts.no_effects = statement.effects == 0 && !statement.text_withheld;
    // Looked up last, and only when the rest holds: a Bind inside a block skips it.
    facts.rewrite = facts.backend_idle && facts.outside_block && facts.no_effects &&
                    server_->statements().contains(statement);
    if (may_retry_lost_statement(facts)) server_->link().arm_lost_statement_retry();
}

bool Client::route_describe_or_close(ByteSpan body, char type, Outbound& out) {
    return routed(translator(out).describe_or_close(body, type));
}

bool Client::routed(StatementTranslator::Routed how) {
    // PostgreSQL discards the rest of a batch after an error, up to Sync (protocol §55.2.3).
    if (how == StatementTranslator::Routed::Refused) skip_until_sync_ = true;
    return how != StatementTranslator::Routed::AsSent;
}

StatementTranslator Client::translator(Outbound& out) {
    return {statements_, *server_, context_.config(), out};
}

bool Client::answer_deallocate(ByteSpan message) {
    // `DEALLOCATE name` of a protocol-level statement: the backend knows it under another name
    // (or not at all), so pgtether answers it, as PostgreSQL would outside a transaction block.
    if (context_.config().max_prepared_statements <= 0) return false;
    // Only a name the client prepared is answered here: without any, skip parsing the text (this
    // runs for every simple query that starts a transaction).
    if (statements_.size() == 0) return false;
    auto sql = protocol::parse_query(message.subspan(protocol::kTypedHeaderSize));
    if (!sql) return false;
    auto name = protocol::parse_lone_deallocate(*sql);
    if (!name || !StatementTranslator::deallocate(statements_, *name)) return false;
    std::string reply;
    protocol::append_command_complete(reply, "DEALLOCATE");
    protocol::append_ready_for_query(reply, protocol::kTxIdle);
    send(reply);
    return true;
}

// ---------------------------------------------------------------------------------------------
// Exact lock accounting (docs/advisory-locks.md, "Exact accounting")

bool Client::accounts_locks_exactly() const {
    // every_transaction probes anyway; off tracks nothing.
    return context_.config().advisory_lock_tracking == LockTracking::On;
}

void Client::account_uncertain() {
    if (!accounts_locks_exactly()) return;
    auto& accounting = server_->link().lock_accounting();
    accounting.arm(lock_ledger());
    accounting.mark_uncertain();
}

bool Client::account_query_locks(std::string_view sql) {
    if (!accounts_locks_exactly()) return false;
    auto& accounting = server_->link().lock_accounting();
    accounting.arm(lock_ledger());
    // This database's trigger (discovered wrappers included); while it catches up with a
    // catalog change, no statement's effect on locks is known exactly.
    const LockTrigger& trigger = pool_->lock_trigger();
    auto plan = trigger.probe_all ? protocol::QueryLockPlan{}
                                  : protocol::plan_query_locks(sql, *trigger.scanner);
    if (!plan.exact) {
        accounting.mark_uncertain();
        return plan.safe_to_follow;
    }
    // The Query's results come after the ReadyForQuery of everything sent before it.
    const int ready_ahead = server_->link().tracker().outstanding();
    for (const auto& [index, calls] : plan.lock_statements) {
        auto resolved = resolve_lock_calls(calls, {}, nullptr);
        if (!resolved) {
            accounting.mark_uncertain();
            return plan.safe_to_follow;
        }
        accounting.expect(ready_ahead, accounting.units_in_group() + index, std::move(*resolved));
    }
    return false;
}

void Client::pipeline_probe(Outbound& out) {
    // The decision the transaction's end would take, taken now: the accounting is armed and not
    // exact (account_query_locks found a statement it cannot count), which is why a probe is due.
    const TransactionEndDecision decision =
        server_->link().at_boundary(context_.config(), tether_kinds_, lock_ledger());
    if (decision.action != TransactionEndDecision::Action::Probe) return;
    std::string messages = server_->pipeline_probe(decision.probe_kinds);
    if (!messages.empty()) out.add_owned(std::move(messages));
}

void Client::account_bind_locks(const protocol::BindNames& names, const StatementPtr& statement,
                                ByteSpan body) {
    if (!accounts_locks_exactly()) return;
    auto& accounting = server_->link().lock_accounting();
    accounting.arm(lock_ledger());
    std::optional<std::vector<ResolvedLockCall>> resolved;
    if (statement->lock_calls) {
        if (auto parameters = protocol::parse_bind_parameters(body)) {
            resolved = resolve_lock_calls(*statement->lock_calls,
                                          protocol::as_bytes(statement->parameter_types),
                                          &*parameters);
        }
    }
    if (!resolved) {
        accounting.mark_uncertain();
        accounting.forget_portal(names.portal);
        return;
    }
    accounting.bind_portal(names.portal, std::move(*resolved));
}

void Client::account_execute(ByteSpan body) {
    auto& accounting = server_->link().lock_accounting();
    if (accounting.has_portals()) {
        protocol::ByteReader reader(body);
        const std::string_view portal = reader.cstring();
        if (const auto* calls = accounting.portal_calls(portal); calls && reader.ok()) {
            accounting.expect(server_->link().tracker().outstanding(), accounting.units_in_group(),
                              *calls);
        }
    }
    accounting.note_execute();
}

void Client::remember_query(std::string_view sql) {
    sql = sql.substr(0, kLastQueryLength);
    // Leak reports name the last statement a backend ran; SHOW LOCKS a tethered client's.
    if (server_) server_->note_statement(sql);
    if (tether_) tether_->last_query.assign(sql);
}

void Client::note_effects(std::string_view sql, std::uint32_t effects) {
    // With pg_temp in the search_path an unqualified CREATE may make a temporary object that
    // the text does not call one (docs/session-state.md): probe for them too.
    if ((effects & protocol::kEffectCreate) && settings_ && settings_->temp_schema_in_path) {
        effects |= protocol::kEffectTempObject;
    }
    if (effects == 0) return;
    // A call of a name the catalog did not know: maybe a wrapper created a moment ago. This
    // transaction is probed (the effect comes with kEffectAdvisoryLock); the catalog is checked.
    if (effects & protocol::kEffectUnknownCall) {
        context_.on_unknown_lock_call(pool_->database_name());
    }
    server_->link().mark_effects(effects);
    if (effects & protocol::kEffectSet) {
        collect_custom_setting_names(sql, settings_state().custom_names, kMaxCustomSettings);
    }
}

}  // namespace pgtether
