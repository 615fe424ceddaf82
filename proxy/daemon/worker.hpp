// A worker: one libuv loop and everything it owns — its listeners, clients, server connections and
// its share of every pool. With `workers = N`, N of these run on N threads; nothing here is shared
// with another worker except the immutable config snapshot and what the WorkerGroup holds (the
// cancel registry, the server budget, the client count). Another worker reaches this one only
// through post() (docs/architecture.md, "Workers").
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <uv.h>

#include "protocol/startup.hpp"
#include "core/auth_file.hpp"
#include "core/config.hpp"
#include "core/fd_budget.hpp"
#include "core/host_choice.hpp"
#include "core/prepared_statements.hpp"
#include "core/stats.hpp"
#include "core/stats_history.hpp"
#include "proxy/net/listener.hpp"
#include "proxy/admin/admin_context.hpp"

namespace pgtether {

class AuthLookups;
class LoginWork;
class CancelForwarder;
class CancelRegistry;
class Client;
class ConfigReloader;
class Listener;
class LockCatalog;
class MetricsServer;
class PeerCancels;
class Pool;
class PoolControl;
class Server;
class WorkerGroup;
struct LendRequest;
struct SecuritySetup;

class Worker final : public AdminContext, public Acceptor {
public:
    // `security` is built from `config` when not given (load_security; may throw ConfigError).
    // The worker joins `group`; its index is the group's size before.
    Worker(std::shared_ptr<const Config> config, std::shared_ptr<const AuthFile> auth_file,
           WorkerGroup& group, std::shared_ptr<const SecuritySetup> security = nullptr);
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Opens the listeners and starts the timers. Throws std::runtime_error when a listener cannot
    // be opened (start-up only).
    void start();
    // Runs the loop until shutdown completes.
    void run();
    // The workers of this process (this one's place among them is index(): 0 runs on the main
    // thread and owns the Unix socket and the metrics endpoint).
    [[nodiscard]] WorkerGroup& group() { return group_; }
    void post_to_other_workers(std::function<void(PoolContext&)> fn) override;
    bool post_to_worker(std::size_t index, std::function<void(PoolContext&)> fn) override;
    void gather_from_workers(const std::function<void(PoolContext&)>& fn) override;
    void gather_all_workers(const std::function<void(AdminContext&)>& fn) override;
    void tell_other_workers(std::function<void(AdminContext&)> fn) override;
    bool tell_worker(std::size_t index, std::function<void(AdminContext&)> fn) override;
    // Runs `task` on this worker's loop thread, soon (thread-safe; what another worker needs
    // from this one). `gathering` tasks only read and may also run while this worker waits in
    // WorkerGroup::gather. False once the loop has stopped (the task is not run).
    bool post(std::function<void()> task, bool gathering = false);
    // Runs the gathering tasks queued so far (WorkerGroup::gather, while this worker waits).
    void serve_gathers();
    // Stop accepting, wait as `mode` says, then stop. A second call stops waiting.
    void begin_shutdown(ShutdownMode mode = ShutdownMode::Graceful) override;
    // Called once when shutdown has finished closing everything (to close signal handles).
    void set_on_stopped(std::function<void()> callback) { on_stopped_ = std::move(callback); }
    // Closes the metrics endpoint (worker 0's). Not part of this worker's own shutdown: it
    // answers until every worker has stopped, then main calls this on worker 0's loop.
    void close_metrics_endpoint();
    // Applies a new configuration and auth file (SIGHUP). Existing clients stay connected. The
    // TLS contexts and HBA rules are rebuilt from `config` unless given; that happens first, so a
    // ConfigError leaves everything as it was.
    void apply_config(std::shared_ptr<const Config> config,
                      std::shared_ptr<const AuthFile> auth_file,
                      std::shared_ptr<const SecuritySetup> security = nullptr);

    // Ids of clients and servers, unique in the process: worker i of N hands out i+1, i+1+N,
    // i+1+2N, ... (with one worker: 1, 2, 3, ...).
    [[nodiscard]] std::uint64_t next_id() override;
    [[nodiscard]] std::size_t worker_count() const override;

    // The listening sockets (SHOW FDS).
    [[nodiscard]] const std::vector<std::unique_ptr<Listener>>& listeners() const override {
        return listeners_;
    }
    // A connection a listener accepted (`drained`: while it drains before closing, SHUTDOWN
    // WAIT_FOR_CLIENTS).
    void accept_client(int fd, bool tcp, bool drained) override;
    // A listener's accept() failed for want of descriptors (it pauses): counted, and logged at
    // most every few seconds (core/fd_budget.hpp).
    void on_accept_out_of_descriptors(const std::string& error) override;

    // The [databases] entry clients reach under `name`: its own, or the "*" fallback turned into
    // an entry for the database of that name. nullopt when neither exists.
    [[nodiscard]] std::optional<DatabaseConfig> resolve_database(
        const std::string& name) const override;
    [[nodiscard]] bool database_disabled(const std::string& database) const override;
    // The pool for a database entry and (server) user, created on first use.
    Pool& pool_for(const DatabaseConfig& database, const std::string& user) override;
    std::unique_ptr<ConsoleSession> open_admin_session(Client& client) override;
    // The pools of forced-user database entries with a min_pool_size, opened before any client
    // (run by the janitor).
    void open_forced_user_pools();

    // Registries of live connections: each object links itself in when it is created and out
    // when it is destroyed.
    void register_client(Client& client) override;
    void unregister_client(Client& client) override;
    // A client no longer counts towards max_client_conn: it is closing (its handle goes a little
    // later), as PgBouncer frees the place at the disconnect. Once per client.
    void release_client_slot() override;
    [[nodiscard]] bool over_client_limit() const override;
    [[nodiscard]] ClientCounts& client_counts() override;
    void register_server(Server& server) override;
    void unregister_server(Server& server) override;
    [[nodiscard]] std::size_t client_count() const override;
    [[nodiscard]] std::size_t server_count() const override;
    // Every live client / server, in creation order (admin console, metrics). `fn` must not
    // destroy objects; closing them is fine (they leave the registry only when freed).
    void for_each_client(const std::function<void(Client&)>& fn) const override;
    void for_each_server(const std::function<void(Server&)>& fn) const override;
    // Cancel requests being forwarded to `server`'s backend (SHOW POOLS' sv_active_cancel).
    [[nodiscard]] int cancels_in_flight_for(const Server& server) const override;
    // Every cancel request being forwarded, to a backend or to a peer (SHOW PEER_POOLS).
    void for_each_cancel(const std::function<void(const CancelForwarder&)>& fn) const override;
    // The janitor's visit to cancel requests: queued ones and unsent ones past
    // cancel_wait_timeout are given up.
    void cancels_janitor(std::uint64_t now);

    // Server connections of a database, in the whole process (the group's ServerBudget).
    [[nodiscard]] int database_server_count(const std::string& database) const override;

    // A pool has idle servers and waiting clients: Pool::serve_waiting_clients runs once this
    // loop iteration's I/O callbacks are done (uv_check), before the loop blocks in poll again
    // (uv_idle keeps a hand-off scheduled from a timer from waiting for the next event).
    void schedule_hand_offs(Pool& pool) override;

    // Cancel a query on a backend: opens a short connection to its postmaster.
    void forward_cancel(Server& server) override;
    // Forward a CancelRequest for another process's key to that peer ([peers]).
    void forward_cancel_to_peer(const PeerConfig& peer, const protocol::CancelKey& key) override;
    // Client cancel keys (the group's CancelRegistry): a client's own, and a CancelRequest's
    // way to the client holding the key -- here, or posted to the worker it lives on.
    protocol::CancelKey add_cancel_key(Client& client) override;
    void remove_cancel_key(const protocol::CancelKey& key) override;
    void cancel_key_holder(const protocol::CancelKey& key, const std::string& from) override;
    void register_cancel(CancelForwarder& forwarder) override;
    void unregister_cancel(CancelForwarder& forwarder) override;
    // A server is being destroyed: cancel forwarders must not report to it.
    void forget_cancel_target(Server& server) override;

    // auth_query lookups: their pooled auth_user connections and queue (proxy/server/auth_lookups.hpp).
    [[nodiscard]] AuthLookups& auth_lookups() override { return *auth_lookups_; }
    // Logins' blocking work (SCRAM key derivations, PAM checks), off the loop
    // (proxy/client/login_work.hpp).
    [[nodiscard]] LoginWork& login_work() override { return *login_work_; }
    [[nodiscard]] PeerCancels& peer_cancels() override { return *peer_cancels_; }
    [[nodiscard]] const PeerCancels& peer_cancels() const { return *peer_cancels_; }


    void on_catalog_change(const std::string& database) override;
    void on_unknown_lock_call(const std::string& database) override;

    // Snapshots at the last stats_period ticks, for SHOW STATS' averages.
    [[nodiscard]] const StatsHistory<Pool>& stats_history() const override {
        return stats_history_;
    }

    // How RELOAD and SET change the configuration (set by main; null in tests without one).
    void set_reloader(ConfigReloader* reloader) { reloader_ = reloader; }
    // RELOAD and SET, through the reloader.
    [[nodiscard]] bool settings_changeable() const override { return reloader_ != nullptr; }
    std::optional<std::string> reload_config(std::string_view trigger) override;
    std::optional<std::string> set_setting(std::string_view key, std::string_view value,
                                           std::string& notice) override;

private:
    // The process's client cancel keys (the group's), behind add_cancel_key, remove_cancel_key
    // and cancel_key_holder.
    [[nodiscard]] CancelRegistry& cancels();
    // On this worker's loop: when `key` is one of its clients, cancel that client's request
    // (Client::on_cancel_request); the key is looked up again, as the client may have left since
    // cancel_key_holder posted it here.
    void cancel_client(const protocol::CancelKey& key, const std::string& from);
    static void on_mailbox(uv_async_t* async);
    void serve_mailbox();
    // The loop is stopping: no more tasks are taken, the ones queued run now.
    void close_mailbox();
    static void on_janitor(uv_timer_t* timer);
    static void on_hand_off_check(uv_check_t* check);
    static void on_hand_off_idle(uv_idle_t* idle);
    void run_hand_offs();
    static void on_stats_timer(uv_timer_t* timer);
    void janitor();
    // Whether `database` is served by the "*" entry (an auto-database).
    [[nodiscard]] bool is_auto_database(const std::string& database) const;
    // autodb_idle_timeout: the pools of an auto-database without clients or servers that long
    // are dropped, with their statistics, as PgBouncer drops the database (checked every second).
    void drop_idle_auto_databases(std::uint64_t now);
    void stats_tick();
    void log_stats(const StatsAverages& total);
    void restart_stats_timer();
    void maybe_finish_shutdown();
    // Listeners, lock discovery and auth_query connections: closed when a shutdown begins (the
    // metrics endpoint stays open until it completes, for /healthz and /readyz).
    void close_everything();
    // A worker destroyed before its loop finished (start-up failed, or it never started) still
    // has its handles open: closes them all and runs the loop until their close callbacks have
    // run, while their owners still live, so that uv_loop_close can free the loop.
    void close_for_exit();

    WorkerGroup& group_;
    uv_async_t mailbox_async_{};
    std::mutex mailbox_mutex_;
    struct Task {
        std::function<void()> run;
        bool gathering = false;  // only reads: may run ahead while this worker gathers itself
    };
    std::vector<Task> mailbox_;    // guarded by mailbox_mutex_, in the order posted
    bool mailbox_closed_ = false;  // guarded by mailbox_mutex_
    uv_timer_t janitor_timer_{};
    uv_timer_t stats_timer_{};
    uv_check_t hand_off_check_{};
    uv_idle_t hand_off_idle_{};
    std::vector<Pool*> hand_offs_;  // pools whose serve_waiting_clients() is due
    std::vector<std::unique_ptr<Listener>> listeners_;
    // Auto-databases seen without clients or servers, since when (drop_idle_auto_databases).
    std::map<std::string, std::uint64_t> auto_database_idle_since_;
    std::uint64_t next_auto_database_check_ms_ = 0;
    struct Registry;  // intrusive lists of every client and server (defined in worker.cpp)
    std::unique_ptr<Registry> registry_;
    std::uint64_t last_id_ = 0;
    bool stopped_ = false;
    std::function<void()> on_stopped_;
    std::uint64_t shutdown_deadline_ms_ = 0;
    AcceptFailureReports accept_failure_reports_;
    StatsHistory<Pool> stats_history_;
    std::unique_ptr<MetricsServer> metrics_;
    std::unique_ptr<AuthLookups> auth_lookups_;
    std::unique_ptr<LoginWork> login_work_;
    std::unique_ptr<PeerCancels> peer_cancels_;
    ConfigReloader* reloader_ = nullptr;
    std::uint64_t stats_period_ms_ = 0;  // the running stats timer's period
    PoolStats logged_totals_;  // all pools' counters at the previous stats log line
};

}  // namespace pgtether
