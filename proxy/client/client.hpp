// A client connection: start-up, authentication, then requests that borrow servers from its pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/ldap_options.hpp"
#include "core/listen_channels.hpp"
#include "core/prepared_statements.hpp"
#include "core/replication.hpp"
#include "core/request_queue.hpp"
#include "core/session_params.hpp"
#include "core/session_settings.hpp"
#include "core/state_probe.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/listen_request.hpp"
#include "protocol/message_reader.hpp"
#include "protocol/startup.hpp"
#include "proxy/client/client_auth.hpp"
#include "proxy/net/intrusive_list.hpp"
#include "proxy/net/stream.hpp"
#include "proxy/server/auth_query.hpp"
#include "proxy/server/server.hpp"
#include "proxy/server/statement_translator.hpp"

namespace pgtether {

class ConsoleSession;
class AuthQuery;
class ClientAuth;
class Pool;
class ClientContext;
struct DatabaseConfig;

class Client final : public Stream::Handler {
public:
    enum class State {
        Startup,      // waiting for the start-up packet (an SSLRequest/GSSENCRequest may come first)
        AuthLookup,   // auth_query is fetching the user's secret; input held (up to pkt_buf)
        Auth,         // we asked for a password / SASL exchange; waiting for the client's answer
        WelcomeWait,  // authenticated; waiting for the pool to learn its servers' parameters
        Idle,         // logged in; no server linked; nothing in flight
        Waiting,      // has a request but no server: queued in its pool, input held
        Active,       // linked to a server; messages flow both ways
        Closing,      // closing; no further input is processed
    };

    Client(ClientContext& context, bool tcp);
    ~Client();

    // Takes `fd`, a connection the listener accepted, and starts reading. Returns false (and
    // closes) on failure.
    bool accept(int fd);
    // Accepted while the worker drains (SHUTDOWN WAIT_FOR_CLIENTS): only the admin console may
    // log in.
    void restrict_to_console() { console_only_ = true; }
    // Accepted beyond max_client_conn: refused with 53300 once its first packet after any
    // SSLRequest/GSSENCRequest arrives, as PgBouncer does. A TLS client (libpq's default
    // sslmode=prefer too) completes its handshake first and so reads the refusal, where an
    // ErrorResponse in place of the 'S' would only be "an error response during SSL exchange".
    // A start-up packet for the admin console is let in (PgBouncer: "don't limit admin db").
    void refuse_over_client_limit() { over_client_limit_ = true; }
    // Closes the connection after sending `error` (when given) and logs the reason. With an
    // error, or with `flush`, what is queued for the client is sent before the socket closes.
    void close(const std::string& reason, const protocol::ErrorFields* error = nullptr,
               bool flush = false);
    // Sends a FATAL error with this SQLSTATE and message, then closes.
    void fail(const char* sqlstate, const std::string& message);
    // With disable_pqexec, a simple Query ends the connection as in PgBouncer (08P01 "PQexec
    // disallowed", logged as `client used "Query" packet type`); true if it did. The admin
    // console asks too: PgBouncer refuses the Query before it tells the console apart.
    bool refuse_simple_query();

    [[nodiscard]] State state() const { return state_; }
    [[nodiscard]] std::uint64_t id() const { return id_; }
    [[nodiscard]] const std::string& user() const { return user_; }
    [[nodiscard]] const std::string& database() const { return database_; }
    [[nodiscard]] Pool* pool() { return pool_; }
    [[nodiscard]] Server* server() { return server_; }
    [[nodiscard]] ParamValues& params() { return params_; }
    [[nodiscard]] const protocol::CancelKey& cancel_key() const { return cancel_key_; }
    [[nodiscard]] std::uint64_t state_since_ms() const { return state_since_ms_; }
    [[nodiscard]] std::string describe() const;  // "C-12 db/user@1.2.3.4:5678" for logs
    // For the admin console and metrics.
    [[nodiscard]] bool is_admin() const { return admin_ != nullptr; }
    // Logged in to the console as user "pgbouncer" over the Unix socket from pgtether's own OS
    // user, without a password (PgBouncer's admin_pre_login): an admin whatever admin_users says.
    [[nodiscard]] bool own_user() const { return own_user_; }
    [[nodiscard]] std::uint64_t connected_at_ms() const { return connected_at_ms_; }
    [[nodiscard]] std::uint64_t last_activity_ms() const { return last_activity_ms_; }
    [[nodiscard]] Stream& stream() { return stream_; }
    // describe() of a logged-in client, built on first use and kept (nothing in it changes
    // after login): Server::link records it for leak reports whenever a backend meets another
    // client, which at 20 clients on 20 backends is most transactions.
    [[nodiscard]] const std::string& logged_in_description();

    // ---- replication connections (core/replication.hpp; proxy/client/client_replication.cpp) ----
    [[nodiscard]] ReplicationMode replication() const {
        return replication_ ? replication_->mode : ReplicationMode::None;
    }
    // The client's start-up parameters its backend is opened with (all but user, database,
    // replication and protocol options).
    [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& replication_parameters()
        const;
    // Its backend is logging in (Pool::request_replication_server): a client that leaves
    // meanwhile closes it.
    void set_replication_server(Server* server) { replication_->server = server; }
    [[nodiscard]] Server* replication_server() const {
        return replication_ ? replication_->server : nullptr;
    }
    // The backend logged in: the client gets its greeting and the bytes flow unread.
    void on_replication_server_ready(Server& server);
    // The backend's login failed (`error`, the backend's), or it closed before (`error` ours).
    void on_replication_server_failed(const protocol::ErrorFields& error);
    // The relayed backend closed (`stream_ended`: on its own, after whatever it sent).
    void on_relay_ended(const std::string& reason, bool stream_ended);

    // ---- called by the pool ----
    void on_welcome_ready();
    void on_server_assigned(Server& server);
    void on_login_failed(const protocol::ErrorFields& error);

    // ---- called by the linked server ----
    // Server replies to forward; false when the client's socket is backed up.
    bool send_from_server(const uv_buf_t* bufs, unsigned count);
    bool send(std::string_view bytes);
    // The server finished an internal query for this client (parameter sync, probe): resume input.
    void on_server_ready();
    // A batch of this client's, already routed once, is to be routed again (its Bind met a
    // statement the backend lost, Server::send_lost_statement_batch_again): its bytes go back in
    // front of the client's input and are read again now. Only when can_take_input_back().
    void take_input_back(std::string_view batch);
    [[nodiscard]] bool can_take_input_back() const { return !stream_.dispatching(); }
    // The transaction ended and the server went back to the pool.
    void on_server_released();
    // The server connection failed under this client (`reason`: the backend's FATAL message, or
    // why pgtether closed it). decide_server_loss (core/server_loss.hpp) says what follows: another
    // server, quietly, when it had not yet seen any request of this client; otherwise the close --
    // after the backend's FATAL (as from PostgreSQL directly), pgtether's 08006, or, for a
    // tethered client, pgtether's 08006 saying the session state is lost.
    void on_server_lost(const std::string& reason, bool server_saw_requests,
                        bool client_got_fatal);
    // Flow control: the server's socket is backed up / drained.
    void pause_input();
    void resume_input();

    // ---- the tether (docs/advisory-locks.md, docs/session-state.md) ----
    // Kinds of session state (StateKind flags) this client holds on its backend.
    [[nodiscard]] std::uint32_t tether_kinds() const { return tether_kinds_; }
    [[nodiscard]] bool tethered() const { return (tether_kinds_ & kTetherKinds) != 0; }
    // The session advisory locks the client holds, as far as pgtether knows (exact accounting
    // or the last probe); empty while untethered.
    [[nodiscard]] const LockLedger& lock_ledger() const;
    [[nodiscard]] std::vector<AdvisoryLockKey> held_locks() const { return lock_ledger().keys(); }
    [[nodiscard]] std::uint64_t tethered_since_ms() const {
        return tether_ ? tether_->since_ms : 0;
    }
    void set_tether_kinds(std::uint32_t kinds);
    // The probe's details for the kinds it looked at: advisory keys and one line per other kind.
    void update_tether_details(std::uint32_t probed, const std::vector<AdvisoryLockKey>& locks,
                               std::vector<std::pair<std::uint32_t, std::string>> summaries);
    // The ledger exact accounting computed for the transaction that just ended.
    void adopt_lock_ledger(const LockLedger& ledger);
    // "advisory locks 42 exclusive; temp tables 1: t" — the reasons the client is tethered.
    [[nodiscard]] std::string describe_tether() const;
    // The last statement of a tethered client (SHOW LOCKS), starting with the one that tethered
    // it; empty while untethered. Truncated.
    [[nodiscard]] const std::string& last_query() const;

    // ---- session settings (docs/session-state.md) ----
    // What this client's session settings are: its start-up parameters, overridden by what the
    // last probe found set in the session.
    [[nodiscard]] SettingsMap wanted_settings() const {
        return settings_ ? SettingsMap::merged(settings_->startup, settings_->session)
                         : SettingsMap{};
    }
    void set_session_settings(SettingsMap settings) {
        if (!settings_ && settings.empty()) return;
        settings_state().session = std::move(settings);
        note_search_path();
    }
    // Whether the client has any settings to replay (most have none).
    [[nodiscard]] bool has_settings() const {
        return settings_ && (!settings_->startup.empty() || !settings_->session.empty());
    }
    // Dotted custom setting names the client has SET (pg_settings does not list them).
    [[nodiscard]] const std::vector<std::string>& custom_setting_names() const;
    [[nodiscard]] ClientStatements& statements() { return statements_; }

    // ---- LISTEN multiplexed (docs/session-state.md; proxy/client/client_listen.cpp) ----
    // A notification, or the listening connection's notice, for this listener: sent now when
    // the client is between transactions, held while it is in one. False when it would pass the
    // client's listen_client_buffer: the client is disconnected.
    bool deliver_to_listener(std::string_view message);
    // Writes what deliver_to_listener queued (ListenHub::send_deliveries).
    void send_queued_notifications();
    // The listening connection listens on every channel this client's LISTEN waits for.
    [[nodiscard]] bool listen_channels_ready() const;
    // ... then its answer goes out and its input is read again.
    void on_listen_ready();
    // The listening connection failed before it listened: the client's LISTEN fails.
    void on_listen_failed(const std::string& why);
    // Notifications held while the client was in a transaction: its server sends them right
    // before the ReadyForQuery that ends it, where PostgreSQL sends them.
    [[nodiscard]] bool has_held_notifications() const { return listen_ && !listen_->held.empty(); }
    // LISTEN/UNLISTEN answered inside the open transaction block wait for its end.
    [[nodiscard]] bool has_pending_listens() const {
        return listen_ && !listen_->pending.empty();
    }
    // LISTEN/UNLISTEN of a Query that mixed them with other statements, which ran inside the
    // client's block, or in their own transaction that just committed (core/listen_splice.hpp).
    void add_pending_listens(const std::vector<protocol::ListenOp>& ops);
    // The block committed: they take effect. `ready_for_query`, the backend's ReadyForQuery that
    // ended the block (or empty when more replies follow), goes out once the listening
    // connection listens on the new channels, so a notification committed after the client saw
    // its COMMIT end reaches it.
    void commit_pending_listens(std::string ready_for_query);
    // The block ended without committing: they never happened.
    void discard_pending_listens();
    std::string take_held_notifications();
    // For the parameter sync of the server linked next, when the client is about to run a
    // LISTEN/UNLISTEN pgtether does not answer (or asks pg_listening_channels()): LISTENs of its
    // channels on that backend, which from then on holds them (the tether). Empty otherwise.
    std::string take_listen_replay();

    // The periodic timeouts (login, idle, wait, transaction idle, tethered idle).
    void janitor(std::uint64_t now_ms);
    // A CancelRequest with this client's key arrived (on connection `from`, described): cancel
    // what its backend runs, or the admin console's wait.
    void on_cancel_request(const std::string& from);

    ListHook pool_hook_;
    ListHook worker_hook_;

private:
    // Stream::Handler
    std::size_t on_stream_data(protocol::ByteSpan data) override;
    void on_stream_end(int status) override;
    void on_stream_drained() override;
    void on_stream_connected(int) override {}
    void on_stream_closed() override;
    void on_stream_tls_ready(const std::string& error) override;

    std::size_t handle_startup(protocol::ByteSpan data);
    std::size_t handle_auth(protocol::ByteSpan data);
    std::size_t handle_requests(protocol::ByteSpan data);
    void handle_startup_packet(const protocol::StartupPacket& packet);
    void handle_cancel_request(const protocol::CancelKey& key);
    // application_name_add_host: the client's address after its application_name.
    void add_host_to_application_name();
    void refuse_over_client_limit_now();
    // TLS and authentication methods (client_login.cpp).
    std::size_t handle_encryption_request(protocol::StartupKind kind, protocol::ByteSpan data,
                                          std::size_t request_size);
    std::size_t start_direct_tls(protocol::ByteSpan data);
    [[nodiscard]] bool tls_policy_allows_startup();
    void start_authentication();
    void start_password_authentication(AuthType method);
    void on_secret_fetched(AuthType method, AuthQuery::Result&& result);
    void run_password_authentication();
    // Sends a step's reply and acts on its outcome: a failure, success, or a key derivation or
    // PAM check to start off the loop (proxy/client/login_work.hpp; input is held until it is
    // done).
    void carry_out(ClientAuth::Step step);
    // That work is done: the exchange goes on with `next_step` (its result fed to ClientAuth).
    void resume_authentication(const std::function<ClientAuth::Step()>& next_step);
    // Sends the step's error and closes, logging PgBouncer's reason (ClientAuth::failure_reason,
    // or "no such user" after an auth_query that found none).
    void fail_authentication(const std::string& sqlstate, const std::string& message);
    // `ident_map`: the hba line's map= (empty: the name must be the user name).
    void authenticate_by_certificate(const std::string& ident_map);
    void authenticate_by_peer(const std::string& ident_map);
    // PgBouncer's rule for the console: user "pgbouncer" over the Unix socket, connecting from
    // the OS user pgtether runs as, needs no password.
    [[nodiscard]] bool is_own_user_console_login();
    // max_db_client_connections / max_user_client_connections: counts the client in its
    // database and user and refuses it (false) when that passes a limit.
    [[nodiscard]] bool admit_within_client_limits();
    void uncount_for_limits();
    // Frees its max_client_conn place (ClientContext::release_client_slot), once.
    void release_client_slot();
    [[nodiscard]] std::string tls_description() const;
    void on_authenticated();
    void start_admin_session();  // the client asked for the admin console's database
    void finish_login();
    void set_state(State state);
    // Input that cannot be forwarded yet stays in the stream; reading stops only when too much
    // (`held` bytes) waits.
    void hold_input(std::size_t held);
    // On close: hand the linked server back — directly when clean, through a scrub otherwise.
    void detach_from_server();
    void remember_query(std::string_view sql);
    // What the tether's trigger found in a statement: recorded for the transaction's end.
    void note_effects(std::string_view sql, std::uint32_t effects);
    // Exact lock accounting (docs/advisory-locks.md): tells the linked server's LockAccounting
    // what a lock-relevant Query, Bind or FunctionCall will do.
    [[nodiscard]] bool accounts_locks_exactly() const;
    // True when accounting cannot decide and a probe may follow the text at once.
    [[nodiscard]] bool account_query_locks(std::string_view sql);
    void account_bind_locks(const protocol::BindNames& names, const StatementPtr& statement,
                            protocol::ByteSpan body);
    // A Bind of `statement` (named, or the backend's unnamed one): its effects once more.
    void note_bound_effects(const protocol::BindNames& names, const StatementPtr& statement,
                            protocol::ByteSpan body);
    void account_execute(protocol::ByteSpan body);
    void account_uncertain();
    // Bytes on their way to the server (client_requests.cpp).
    struct Outbound;
    // Appends the transaction-end probe right behind the Query that needs it.
    void pipeline_probe(Outbound& out);

    // Extended-protocol routing (client_requests.cpp): the tether's part here, prepared-statement
    // translation by a StatementTranslator (proxy/server/statement_translator.hpp). Each route_*
    // returns true when it forwarded (rewritten), injected or answered the message itself.
    bool route_parse(const protocol::ParseMessage& parse, Outbound& out);
    // `body_missing`: bytes of a streamed Bind's body still to come (its parameters are not
    // read, and a rewritten head announces them).
    bool route_bind(protocol::ByteSpan body, Outbound& out, std::size_t body_missing = 0);
    bool route_describe_or_close(protocol::ByteSpan body, char type, Outbound& out);
    // A Bind of `statement` that the backend is believed to have may open a batch that goes
    // again should the backend have lost it (core/statement_translation.hpp).
    void arm_lost_statement_retry(const PreparedStatement& statement, std::size_t body_missing);
    // Whether the translator took the message (not forwarded as sent); a refusal starts the
    // discard up to Sync.
    bool routed(StatementTranslator::Routed how);
    // A Query that PREPAREs, EXECUTEs or DEALLOCATEs a reserved name: replaced by one that
    // fails with 42939 on the backend.
    void refuse_reserved_query(Outbound& out);
    // A message larger than client_buffer_limit whose header has arrived (`partial.bytes`: what
    // of it is here): streamed, discarded or refused (core/message_budget.hpp). False while it
    // waits for the names at the start of its body.
    bool take_oversized(const protocol::MessageReader::Next& partial, Outbound& out);
    // Bookkeeping shared by whole and streamed messages: the first request after the server
    // went quiet starts the query clock; a FunctionCall may call a lock function; a message
    // (or the part of it that has arrived) forwarded unchanged.
    void note_request_start();
    void note_function_call();
    void forward_as_sent(char type, protocol::ByteSpan bytes, Outbound& out);
    // The text of a Parse streamed without being held: the trigger sees only its start and
    // assumes the rest (core/message_budget.hpp: unscanned_effects).
    void take_unscanned_parse(std::string_view name, std::string_view text_start, Outbound& out);
    // The translator of this client's statements on the linked backend, writing into `out`.
    [[nodiscard]] StatementTranslator translator(Outbound& out);
    // A lone `DEALLOCATE name` of one of the client's protocol-level statements, while idle.
    bool answer_deallocate(protocol::ByteSpan message);
    // LISTEN multiplexed (client_listen.cpp), between transactions: a Query, or an extended
    // batch up to its Sync, of nothing but LISTEN/UNLISTEN, answered by pgtether
    // (protocol/listen_request.hpp). Returns the bytes taken; 0 when only the start of such a
    // request is here (the input is held for the rest); nullopt when it is not one (it goes to a
    // backend).
    std::optional<std::size_t> answer_listen(protocol::ByteSpan data);
    // The same inside an open transaction block: the answer goes out at once, the LISTENs and
    // UNLISTENs wait for the block's end (Server::handle_linked_data decides).
    std::optional<std::size_t> answer_listen_in_transaction(protocol::ByteSpan data);
    // Whether pgtether may answer this client's LISTEN itself with its transaction at
    // `tx_status` ('I' or 'T'): LISTEN is multiplexed, the backend does not listen for the
    // client (its channels moved there) and they are not about to move, and inside a block no
    // SAVEPOINT came first (a ROLLBACK TO could undo the LISTEN unseen).
    [[nodiscard]] bool answers_listen(char tx_status) const;
    // Whether `more` LISTEN/UNLISTEN may still wait for the block's end (kMaxPendingListenOps).
    [[nodiscard]] bool room_for_pending_listens(std::size_t more) const;
    // A Query text that mixes LISTEN/UNLISTEN with other statements, as pgtether would splice
    // it (protocol::splice_listen_statements), unless a statement of the rest may LISTEN or read
    // pg_listening_channels() unseen (a DO block): such a text goes to the backend as sent.
    // `effects`, when given, gets the trigger scan's effects of the spliced text.
    [[nodiscard]] std::optional<protocol::ListenSplice> listen_splice_of(
        std::string_view sql, std::uint32_t* effects = nullptr) const;
    // ... and whether this client's Query, about to go to its backend, is spliced now: nullopt
    // where its LISTENs must reach the backend, as a lone LISTEN's would. Spliced, `effects`
    // becomes the spliced text's (what the backend runs).
    [[nodiscard]] std::optional<protocol::ListenSplice> take_listen_splice(
        std::string_view sql, std::uint32_t& effects);
    // What both share: the request's kind (Incomplete: the input is held); nullopt for Other.
    std::optional<protocol::ListenRequest> recognise_listen(protocol::ByteSpan data,
                                                            char tx_status);
    // The channels change; the answer goes out once the listening connection listens on them.
    void take_listen_ops(const std::vector<protocol::ListenOp>& ops, std::string reply);
    // A request pgtether does not answer may LISTEN, UNLISTEN or read pg_listening_channels():
    // the client's channels move to the backend that runs it.
    void note_unanswered_listen(protocol::ByteSpan data);
    [[nodiscard]] bool multiplexes_listen() const;
    // The client's backend may LISTEN on channels of its own (tether kinds listen or unknown):
    // then the client's LISTEN and UNLISTEN go there, not to the pool's listening connection.
    [[nodiscard]] bool backend_may_listen() const;
    [[nodiscard]] bool between_transactions() const;
    [[nodiscard]] bool awaiting_listen() const { return listen_ && listen_->awaiting; }
    void send_held_notifications();
    void leave_listens();
    // Back-pressure (ListenHub::listener_backed_up): after a write, and when the socket drained.
    void note_listener_output();
    void on_listener_drained();
    // From the janitor: a backed-up listener that takes nothing for listen_stall_timeout goes.
    void check_listener_stall(std::uint64_t now_ms);

    // A replication client: what its backend is opened with, and the relay's framing.
    struct Replication {
        ReplicationMode mode = ReplicationMode::None;
        std::vector<std::pair<std::string, std::string>> parameters;
        Server* server = nullptr;  // its backend while that logs in
    };
    std::unique_ptr<Replication> replication_;  // replication clients only
    // An auth_hba_file `ldap` line decided: its options (else auth_ldap_options applies).
    std::unique_ptr<LdapOptions> hba_ldap_;
    // The start-up packet asks for replication: the client's parameters are kept for its
    // backend. False (and the client failed) for a value PostgreSQL refuses.
    bool take_replication_startup(const protocol::StartupPacket& packet);
    // After authentication: queue for a backend of its own.
    void request_replication_server();
    // The relay (state Active): the client's bytes to its backend, unread but for message
    // boundaries, where a Terminate ends the connection.
    std::size_t relay_to_server(protocol::ByteSpan data);

    // Authentication messages are small; anything larger is refused before it is buffered.
    static constexpr std::uint32_t kMaxAuthMessage = 16 * 1024;

    ClientContext& context_;
    Stream stream_;
    State state_ = State::Startup;
    std::uint32_t tether_kinds_ = 0;  // the tether (below)
    // Flags, one bit each, packed with the two fields above: thousands of idle clients carry them
    // (idle memory per client, docs/benchmarks.md).
    bool tcp_ : 1 = true;
    bool own_user_ : 1 = false;
    bool console_only_ : 1 = false;  // restrict_to_console()
    bool over_client_limit_ : 1 = false;  // refuse_over_client_limit()
    // Counted in the process's clients of database_ and user_ (admit_within_client_limits).
    bool counted_for_limits_ : 1 = false;
    // Counted in max_client_conn's count (from the accept until it starts closing).
    bool holds_client_slot_ : 1 = true;
    // Told it is queued (query_wait_notify): once per connection, as PgBouncer does.
    bool wait_notice_sent_ : 1 = false;
    bool auth_query_found_no_user_ : 1 = false;
    bool input_paused_ : 1 = false;  // the server's socket is backed up
    bool has_cancel_key_ : 1 = false;
    bool ssl_answered_ : 1 = false;
    bool gss_answered_ : 1 = false;
    bool direct_tls_ : 1 = false;  // TLS began with a ClientHello, no SSLRequest (PostgreSQL 17)
    // pgtether answered a message of the current extended batch with an error: discard the
    // client's messages up to its Sync, as PostgreSQL would.
    bool skip_until_sync_ : 1 = false;
    // Without statement translation, the client named more statements than pgtether tracks
    // (kMaxClientStatements): a Bind of a name it does not know assumes every effect.
    bool untracked_statement_names_ : 1 = false;
    std::uint64_t id_;
    std::uint64_t state_since_ms_ = 0;
    std::uint64_t connected_at_ms_ = 0;
    std::string user_;
    std::string database_;
    std::string peer_;
    // Built when first asked for; idle clients never are, so they pay a pointer, not a string.
    std::unique_ptr<const std::string> logged_in_description_;
    Pool* pool_ = nullptr;
    Server* server_ = nullptr;
    protocol::CancelKey cancel_key_;
    ParamValues params_;
    std::unique_ptr<ClientAuth> auth_;
    // The requests: the rest of a CopyData or of a message over client_buffer_limit streamed to
    // the server, or of one pgtether refused or skipped (take_oversized).
    protocol::MessageReader reader_;
    std::uint64_t auth_lookup_ = 0;  // ticket of the auth_query lookup (State::AuthLookup)
    std::uint64_t login_work_ticket_ = 0;  // a login's key derivation or PAM check (State::Auth)
    std::uint64_t last_activity_ms_ = 0;  // last request sent (idle timeouts)
    std::uint64_t query_started_ms_ = 0;  // first request after the server went quiet
    // The request that began the current transaction (or lone statement): transaction_timeout.
    std::uint64_t transaction_started_ms_ = 0;
    // The tether.
    // The tether's details, allocated only while there are any: the many untethered clients
    // carry one pointer instead of these fields (idle memory per client, docs/benchmarks.md).
    struct TetherDetails {
        std::uint64_t since_ms = 0;
        std::uint64_t idle_probe_at_ms = 0;  // when the janitor last probed this tether
        LockLedger locks;
        std::vector<std::pair<std::uint32_t, std::string>> summaries;
        std::string last_query;
    };
    std::unique_ptr<TetherDetails> tether_;
    TetherDetails& tether_details();  // allocates on first use
    // Session settings, allocated at the first one: most clients have none, and each of the idle
    // thousands then carries one pointer (idle memory per client, docs/benchmarks.md).
    struct Settings {
        SettingsMap startup;
        SettingsMap session;
        std::vector<std::string> custom_names;
        // The search_path names pg_temp: a CREATE may make a temporary object.
        bool temp_schema_in_path = false;
    };
    std::unique_ptr<Settings> settings_;
    Settings& settings_state();  // allocates on first use
    void note_search_path();     // after the start-up or session settings changed
    // LISTEN multiplexed, allocated at the first LISTEN: most clients never listen.
    struct ListenState {
        ChannelSet channels;      // what the client listens on through the pool's hub
        std::string held;         // notifications waiting for the client's transaction to end
        std::string queued;       // notifications to write once the hub's read is handled
        std::string reply;        // the answer to a LISTEN waiting for the hub
        std::vector<std::string> awaited;  // channels that answer waits for
        // LISTEN/UNLISTEN answered inside the open transaction block: applied at its COMMIT,
        // forgotten at its ROLLBACK (decide_pending_listens), at most kMaxPendingListenOps.
        std::vector<protocol::ListenOp> pending;
        bool after_commit = false;  // what awaits the hub is a committed transaction's
        bool awaiting = false;
        bool replay_on_link = false;  // take_listen_replay() has the channels for the backend
        // The socket is backed up past half the budget: the hub waits for it to drain.
        bool backed_up = false;
        std::uint64_t backed_up_since_ms = 0;  // or since it last took anything
        std::size_t unsent_seen = 0;           // at that time
    };
    std::unique_ptr<ListenState> listen_;
    ListenState& listen_state();  // allocates on first use
    // The client's named prepared statements (docs/prepared-statements.md).
    ClientStatements statements_;
    std::unique_ptr<ConsoleSession> admin_;  // set for a client of the admin console
};

}  // namespace pgtether
