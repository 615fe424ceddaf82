// A server connection: one backend of a pool, from connect and login through serving clients to
// being closed.
#pragma once

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host_choice.hpp"
#include "core/listen_channels.hpp"
#include "core/login_retry.hpp"
#include "core/own_query_outcome.hpp"
#include "core/prepared_statements.hpp"
#include "core/query_result.hpp"
#include "core/replication.hpp"
#include "core/server_state.hpp"
#include "core/session_params.hpp"
#include "core/state_probe.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/message_reader.hpp"
#include "protocol/startup.hpp"
#include "proxy/net/intrusive_list.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/net/stream.hpp"
#include "proxy/server/link.hpp"

namespace pgtether {

class Client;
class ForwardBatch;
struct CleanupPlan;
class Pool;
class ServerContext;
class ServerLogin;
class TlsContext;

class Server final : public Stream::Handler, public ResolveClient {
public:
    // The states, the pool list each lives on and what may follow: core/server_state.hpp.
    using State = ServerState;

    Server(ServerContext& context, Pool& pool);
    ~Server();

    void connect();
    // Closes the connection (sending Terminate when it is logged in) and tells pool and client.
    void close(const std::string& reason);

    [[nodiscard]] State state() const { return state_; }
    [[nodiscard]] std::uint64_t id() const { return id_; }
    [[nodiscard]] Pool& pool() { return pool_; }
    [[nodiscard]] Client* client() { return client_; }
    [[nodiscard]] const Client* client() const { return client_; }
    [[nodiscard]] const protocol::CancelKey& backend_key() const { return backend_key_; }
    [[nodiscard]] int backend_pid() const { return backend_key_.pid; }
    [[nodiscard]] const ParamValues& params() const { return params_; }
    // The pairing with the linked client (proxy/server/link.hpp); after the client departs, what
    // it left until the server is released.
    [[nodiscard]] Link& link() { return link_; }
    [[nodiscard]] const Link& link() const { return link_; }
    [[nodiscard]] bool busy() const { return internal_ != nullptr; }
    // The client's input must wait: pgtether's own query runs, or its probe's answer is due.
    [[nodiscard]] bool holds_client_input() const {
        return internal_ != nullptr || link_.pipelined_probe_kinds() != 0;
    }
    // The linked client is between transactions: nothing owed to it, no block open, none of
    // pgtether's own queries running (LISTEN multiplexed answers and notifies it now).
    [[nodiscard]] bool client_between_transactions() const {
        return state_ == State::Linked && link_.tracker().idle() && !holds_client_input();
    }
    // The linked client is inside an open transaction block ('T', not failed) with nothing owed
    // to it and none of pgtether's own queries running: a LISTEN it sends now may be answered by
    // pgtether and take effect at the COMMIT (docs/session-state.md).
    [[nodiscard]] bool client_in_open_transaction() const {
        const auto& tracker = link_.tracker();
        return state_ == State::Linked && tracker.quiet() && tracker.tx_status() == 'T' &&
               !tracker.in_copy_in() && !holds_client_input();
    }
    [[nodiscard]] std::uint64_t connected_at_ms() const { return connected_at_ms_; }
    [[nodiscard]] std::uint64_t idle_since_ms() const { return idle_since_ms_; }
    [[nodiscard]] std::uint64_t last_checked_ms() const { return last_checked_ms_; }
    // Its place in the pool's idle list (Pool::on_server_transition): a number given each time
    // a client's release makes it idle, kept while it is lent to pgtether's own query, so that
    // it comes back where it was.
    [[nodiscard]] std::uint64_t idle_place() const { return idle_place_; }
    void set_idle_place(std::uint64_t place) { idle_place_ = place; }
    [[nodiscard]] const sockaddr_storage& address() const { return address_; }
    [[nodiscard]] bool address_is_unix() const { return address_is_unix_; }
    [[nodiscard]] const std::string& unix_path() const { return unix_path_; }
    // "S-7 db/user@127.0.0.1:5432" ("@[::1]:5432", "@unix:/tmp/.s.PGSQL.5432") for logs.
    [[nodiscard]] std::string describe() const;
    // For the admin console and metrics.
    [[nodiscard]] std::uint64_t state_since_ms() const { return state_since_ms_; }
    [[nodiscard]] std::optional<InternalPurpose> internal_purpose() const;
    [[nodiscard]] Stream& stream() { return stream_; }

    // ---- replication (core/replication.hpp) ----
    // Opened for this replication client alone (Pool::request_replication_server): its start-up
    // parameters go in the StartupMessage, and once logged in the backend is relayed to it
    // (state Relaying) with none of pgtether's own queries, then closed when either side leaves.
    void dedicate_to(Client& client);
    // The client left while the backend logged in (it is closed next).
    void abandon_replication_client() { replication_client_ = nullptr; }
    [[nodiscard]] ReplicationMode replication() const { return replication_; }

    // ---- life in the pool ----
    // Moves the server to `next` (core/server_state.hpp says which may follow which): the pool
    // moves it between its lists and counts, and the time is stamped (state_since_ms).
    void transition(State next);
    // When the login started (server_connect_timeout counts connecting and logging in apart).
    [[nodiscard]] std::uint64_t login_since_ms() const { return login_since_ms_; }
    // The ParameterStatus pairs the backend sent at login (the pool's greeting).
    [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& welcome() const {
        return welcome_;
    }
    // Which host of the database's host list it connected to, and that host as "host:port".
    [[nodiscard]] std::size_t host_index() const { return host_index_; }
    [[nodiscard]] std::string host_and_port() const;
    // What the backend reports of its role (in_hot_standby at login and since; the
    // default_transaction_read_only of its login): target_session_attrs (core/host_choice.hpp).
    [[nodiscard]] const ServerRole& role() const { return role_; }
    // Whether the backend reports its role (in_hot_standby, PostgreSQL 14+). When it does not,
    // pgtether asks (kRoleCheckQuery): at login, then now and then on an idle backend
    // (check_role), and a check on one backend of a host tells the others (learn_role).
    [[nodiscard]] bool role_reported() const { return role_reported_; }
    void learn_role(const ServerRole& role) {
        if (!role_reported_) role_ = role;
    }
    // The periodic role check on this idle backend: the pool hears the answer
    // (Pool::on_role_checked), then the server goes back to the pool, or is closed when its
    // role no longer serves the database.
    void check_role();
    // Onto the idle list: clean, unlinked, nothing in flight.
    void mark_idle(std::uint64_t now_ms);
    // The janitor: an idle server is due for server_check_query before its next use (Used), or
    // not (Idle).
    void mark_check_due(bool due);
    // Released while a cancel for its last client is still on its way: cancel_finished()
    // releases it once none is.
    void wait_for_cancels() { transition(State::BeingCancelled); }
    // Whether the backend, idle in the pool, sent something the loop has not read yet (in
    // practice a FATAL and EOF: it was terminated). Looked at (one system call) only when it has
    // been idle for a millisecond or more: a busy pool's servers are handed on at once.
    [[nodiscard]] bool spoke_while_idle(std::uint64_t now_ms) const;
    // Linking: the pool hands this server to a client, and a new Link begins. Applies the
    // client's parameters first when they differ; the client's input waits until then (busy()).
    void link_client(Client& client);
    // The client is done with this server (transaction end, or it left cleanly).
    void unlink_client();
    // Close instead of reusing when released (reload, RECONNECT, lifetime), logged with `why`
    // then ("closing because: WHY").
    void retire(std::string why) {
        retired_ = true;
        retire_reason_ = std::move(why);
    }
    [[nodiscard]] bool retired() const { return retired_; }
    [[nodiscard]] const std::string& retire_reason() const { return retire_reason_; }

    // ---- forwarding ----
    // Client messages, already inspected by the client; returns false if the write is pending.
    bool send_from_client(const uv_buf_t* bufs, unsigned count);
    // ---- prepared-statement translation (docs/prepared-statements.md) ----
    // The backend's statements, whoever prepared them (the link's requests() are the pairing's).
    [[nodiscard]] ServerStatements& statements() { return statements_; }
    // Acts on requests the queue finished: hands pgtether's own answers to `emit` (in order with
    // the forwarded replies) and undoes what failed or skipped requests would have changed.
    void settle_requests(const std::function<void(std::string&&)>& emit);
    // The same, sending answers straight to the client (no backend reply is pending before them).
    void settle_requests();

    // The last byte of a client message passed on in pieces went out. If the backend had
    // answered everything else by then (a CopyData outside a COPY gets no answer), its
    // transaction ended and is decided now (PipelineTracker::set_frontend_partial).
    void on_partial_message_sent();
    // The client's socket drained after back-pressure: read from this server again.
    void resume_input_from_client();
    // The backend's unnamed prepared statement (protocol §55.2.3): what a Bind of "" executes,
    // whoever parsed it — a client may bind it in a later transaction, or another client's
    // statement may still be there. Null: none, or one without session effects. A Parse of ""
    // replaces it, a simple Query destroys it (`statement` null).
    [[nodiscard]] const StatementPtr& unnamed_statement() const { return unnamed_statement_; }
    void note_unnamed_statement(StatementPtr statement);
    // After an error the backend skips messages up to the next Sync, a Parse of "" among them:
    // which statement a later Bind of "" runs is not known until one is parsed at a quiet point.
    [[nodiscard]] bool unnamed_statement_unknown() const { return unnamed_unknown_; }
    // The session settings this backend has beyond its defaults (docs/session-state.md).
    [[nodiscard]] const SettingsMap& applied_settings() const { return applied_settings_; }
    // When the backend last answered everything it had been sent (idle_transaction_timeout
    // counts from there, not from the request).
    [[nodiscard]] std::uint64_t quiet_since_ms() const { return quiet_since_ms_; }

    // ---- pgtether's own queries (proxy/server/own_queries.hpp: one object each) ----
    // The linked client is tethered by locks only a probe can settle, and is idle: probe now
    // (Client::janitor decides when; docs/advisory-locks.md, tether_probe_delay).
    void probe_idle_tether();
    // The transaction-end probe for `kinds`, to go out right behind the client's statement when
    // exact accounting cannot decide (docs/advisory-locks.md): the messages to append to the
    // client's write. The answer is taken at the transaction's end.
    [[nodiscard]] std::string pipeline_probe(std::uint32_t kinds);
    // The client left mid-transaction or tethered: drain what it left running, roll back, release
    // advisory locks, verify, then return to the pool — or close when any step fails.
    void scrub();
    // server_reset_query (and, with tracking, unlock_all and its verification) before reuse.
    void reset();
    // The periodic leak sweep of an idle pooled backend (docs/advisory-locks.md).
    void sweep_for_leaks();
    // Reads the catalog's fingerprint (core/lock_discovery.hpp) on this idle backend for lock
    // discovery's freshness check, then goes back to the pool. `done` gets the value, or
    // nullopt when the query failed or the server closed first; it runs after the release.
    using CatalogCheckDone = std::function<void(std::optional<std::string>)>;
    void check_catalog(CatalogCheckDone done);


    // Number of cancel requests sent for this backend and not yet completed.
    void cancel_started() { ++cancels_in_flight_; }
    [[nodiscard]] int cancels_in_flight() const { return cancels_in_flight_; }
    void cancel_finished();

    // Who used this backend last and what they ran last, for leak reports and SHOW LOCKS.
    void note_statement(std::string_view sql) { last_statement_.assign(sql); }
    [[nodiscard]] const std::string& last_statement() const { return last_statement_; }

    // Intrusive hooks (IntrusiveList needs them as public members; only Pool's lists and the
    // worker's registry link them): the pool's idle/used list; the worker's registry.
    ListHook pool_hook_;
    ListHook worker_hook_;

private:
    // pgtether's own queries, one class each (proxy/server/own_queries.hpp). Nested: their
    // handlers carry out what follows on this server's private state.
    class OwnQueryJob;
    class ConnectQueryJob;
    class LoginRoleCheckJob;
    class RoleCheckJob;
    class ServerCheckJob;
    class ParameterSyncJob;
    class TetherProbeJob;
    class DiscardedProbeJob;
    class CleanupJob;
    class CatalogCheckJob;

    // Stream::Handler
    std::size_t on_stream_data(protocol::ByteSpan data) override;
    void on_stream_end(int status) override;
    void on_stream_drained() override;
    void on_stream_connected(int status) override;
    void on_stream_closed() override;
    void on_stream_tls_ready(const std::string& error) override;

    // Login: the StartupMessage; before it, the answer to SSLRequest (server_tls_sslmode).
    void send_startup();
    std::size_t handle_tls_answer(protocol::ByteSpan data);
    void start_connect_to(const sockaddr* address);
    // `kind`: whether the pool retries soon (core/login_retry.hpp). `close_reason`: the log's
    // "closing because" words when not the usual ones.
    void login_failed(const protocol::ErrorFields& error,
                      LoginFailureKind kind = LoginFailureKind::Refused,
                      const char* close_reason = nullptr);
    void sync_parameters();
    // Runs `queries` as simple Query messages sent in one write (after `prefix`, raw frontend
    // messages such as CopyFail/Sync), expecting `extra_ready` more ReadyForQuery than queries for
    // requests already in flight; `probed`: the state kinds the last query probes for.
    void run_internal(std::unique_ptr<OwnQueryJob> job, const std::vector<std::string>& queries,
                      std::string prefix = {}, int extra_ready = 0, std::uint32_t probed = 0);
    // Sends `messages` (ours: `own_ready` ReadyForQuery answer them, after `extra_ready` that
    // answer requests already in flight) and consumes the replies until finish_internal() hands
    // them to the job.
    void start_internal(std::unique_ptr<OwnQueryJob> job, std::string messages, int own_ready,
                        int extra_ready, std::uint32_t probed);
    // Sends a clean-up plan (core/departure.hpp) as `purpose` (Reset, Scrub, LeakSweep): its
    // messages and queries, then the state probe; cancels what the client left running when the
    // plan says so.
    void run_cleanup(InternalPurpose purpose, const CleanupPlan& plan);
    void release_to_pool();
    void maybe_finish_close();
    void on_resolved(int status, const sockaddr* address) override;
    std::size_t handle_login_data(protocol::ByteSpan data);
    std::size_t handle_linked_data(protocol::ByteSpan data);
    // Relaying: the backend's bytes to the replication client as they come.
    std::size_t relay_to_client(protocol::ByteSpan data);
    // The login of a replication client's backend ended: relay it, or fail the client.
    void finish_replication_login();
    void fail_replication_login(const protocol::ErrorFields& error);
    // A failed login's log line ("S-N db/user: WORDS: FATAL message") and counters.
    void note_login_failure(const char* words, const protocol::ErrorFields& error);
    // A spliced Query's answer (core/listen_splice.hpp): what the client gets in place of the
    // backend message `type` (a LISTEN's CommandComplete, an error with the client's position;
    // kept in `answers`), nullptr for the message as it is; sets `swallow` for a stand-in's row.
    const std::string* spliced_reply(char type, protocol::ByteSpan body,
                                     std::list<std::string>& answers, bool& swallow);
    // At a ReadyForQuery: what becomes of the LISTENs pgtether answered in the client's
    // transaction, a spliced Query's included (decide_spliced_listens, decide_pending_listens).
    PendingListenAction pending_listens_at_ready(char status);
    // At the ReadyForQuery of a batch whose Bind met a statement the backend lost (26000,
    // held back): when it may go again (core/statement_translation.hpp), the client's batch is
    // routed once more (a fresh Parse first). True if it was.
    bool send_lost_statement_batch_again(char status);
    std::size_t handle_internal_data(protocol::ByteSpan data);
    std::size_t handle_unexpected_data(protocol::ByteSpan data);
    void finish_login();
    // The login's end once the role is known: does the host serve the database, connect_query,
    // then the pool.
    void finish_login_with_role();
    // The last ReadyForQuery of pgtether's own query came: its job's handler says what follows.
    void finish_internal();
    void on_transaction_end();
    // Sets the linked client's tether kinds and logs/counts a tether or untether.
    void note_tether_change(std::uint32_t kinds);
    // The tether's probe for `kinds`, for the linked client.
    void probe_tether(std::uint32_t kinds);
    // The settings the linked client named beyond the tracked ones, which a probe for `kinds`
    // reads back too (none without a linked client, or without kStateSettings).
    [[nodiscard]] const std::vector<std::string>& custom_settings_to_probe(
        std::uint32_t kinds) const;
    // The probe for `kinds` as messages answered by one ReadyForQuery: prepared once per backend
    // (Parse the first time, then Bind/Execute/Sync), or a simple Query when it cannot be.
    std::string probe_messages(std::uint32_t kinds);
    void record_parameter(std::string_view name, std::string_view value, bool forward_to_client);
    void record_timing(char tx_status);

    ServerContext& context_;
    Pool& pool_;
    Stream stream_;
    State state_ = State::Connecting;
    std::uint64_t id_;
    Client* client_ = nullptr;
    protocol::CancelKey backend_key_;
    ParamValues params_;
    Link link_;
    ServerStatements statements_;
    std::unique_ptr<ServerLogin> login_;
    // TLS towards the server: the context chosen at connect time (a reload may replace the
    // worker's).
    std::shared_ptr<const TlsContext> tls_context_;
    std::unique_ptr<OwnQueryJob> internal_;
    // The message stream from the backend: the rest of a message streamed to the client, or of
    // one a departed client left behind that is skipped.
    protocol::MessageReader reader_;
    std::vector<std::pair<std::string, std::string>> welcome_;  // ParameterStatus at login
    sockaddr_storage address_{};
    bool address_is_unix_ = false;
    std::string unix_path_;
    std::string host_;  // the host of the database entry connected to (one of a host list)
    int port_ = 0;
    std::size_t host_index_ = 0;  // host_ is the host list's host_index_-th
    ServerRole role_;
    bool role_reported_ = false;  // an in_hot_standby ParameterStatus came
    StatementPtr unnamed_statement_;  // see unnamed_statement()
    bool unnamed_unknown_ = false;    // see unnamed_statement_unknown()
    // Kind masks whose transaction-end probe is prepared on this backend (as
    // "pgtether_probe_<mask>"); cleared by DISCARD ALL / DEALLOCATE ALL.
    std::vector<std::uint32_t> prepared_probes_;
    bool prepared_probe_refused_ = false;  // a prepared probe failed here: simple ones only
    SettingsMap applied_settings_;
    bool retired_ = false;
    std::string retire_reason_;
    bool login_failed_reported_ = false;
    bool stream_closed_ = false;
    bool stream_ended_ = false;  // the backend closed the connection (EOF or error)
    // A replication client's backend: its mode, and the client until it is linked (client_).
    ReplicationMode replication_ = ReplicationMode::None;
    Client* replication_client_ = nullptr;
    int pending_resolves_ = 0;       // a DNS lookup still holds a pointer to this object
    int cancels_in_flight_ = 0;
    // Scrubs repeated because a cancel hit the scrub itself (CleanupJob::on_end); reset once a
    // scrub succeeds.
    int scrub_repeats_ = 0;
    std::uint64_t connected_at_ms_ = 0;
    std::uint64_t state_since_ms_ = 0;
    std::uint64_t login_since_ms_ = 0;
    std::uint64_t idle_since_ms_ = 0;
    std::uint64_t last_checked_ms_ = 0;
    std::uint64_t idle_place_ = 0;
    std::uint64_t quiet_since_ms_ = 0;
    // Who used this backend last and what they ran last, for leak reports.
    std::string last_client_description_;
    std::uint64_t last_client_id_ = ~std::uint64_t{0};  // whose description that is
    std::string last_statement_;
};

}  // namespace pgtether
