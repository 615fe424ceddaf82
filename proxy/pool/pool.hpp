// A pool: the server connections for one (database entry, server user) pair, the clients queued
// for them, and the server parameters new clients are greeted with.
//
// Invariants:
//   - every live Server of this pool is in exactly one of idle_ (clean, unlinked, ready) or used_
//     (connecting, logging in, linked to a client, or busy with pgtether's own queries), as its
//     state says (core/server_state.hpp); Server::transition() moves it (on_server_transition),
//     and state_counts_ counts the servers per state;
//   - waiting_ holds clients that have a request but no server, in arrival order; two other
//     lists wait for something else: welcome_waiting_ for the server parameters a login greets
//     with (no server of the pool has logged in yet), replication_waiting_ for a slot to open a
//     backend of their own (a replication client never takes a pooled server, so it must not be
//     among those a released server is handed to);
//   - server_count() never exceeds pool_size + reserve_pool_size + tether_reserve_size, nor the
//     database and user limits. Servers beyond pool_size (+ the reserve pool) are opened only
//     for tethered clients, one per tethered server up to tether_reserve_size, and closed when
//     idle for a second after those tethers ended (core/pool_capacity.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/backend_messages.hpp"
#include "proxy/client/client.hpp"
#include "core/client_timeouts.hpp"
#include "core/config.hpp"
#include "core/departure.hpp"
#include "core/host_choice.hpp"
#include "proxy/net/intrusive_list.hpp"
#include "proxy/pool/lock_catalog.hpp"
#include "core/login_retry.hpp"
#include "core/pool_capacity.hpp"
#include "core/readiness.hpp"
#include "proxy/server/server.hpp"
#include "proxy/server/server_login.hpp"
#include "core/session_params.hpp"
#include "core/stats.hpp"

namespace pgtether {

class ClientAuth;
class ListenHub;
class PoolContext;

// What a worker whose clients wait asks of the others (Pool::lend): the pool that needs a slot,
// the limits that are full, and what ServerBudget::hand_over needs to give it the slot.
struct LendRequest {
    std::size_t worker = 0;
    std::string database;
    std::string user;
    bool db_full = false;    // max_db_connections: any pool of the database may lend
    bool user_full = false;  // max_user_connections: any pool of the user may lend
    PoolSizes sizes;
    int tethered = 0;
};

class Pool {
public:
    // `database` is the client-facing entry (a copy: reload replaces it); `user` is the user the
    // servers log in as (the entry's forced user, or the client's own).
    Pool(PoolContext& context, DatabaseConfig database, std::string user);
    ~Pool();
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    [[nodiscard]] const std::string& database_name() const { return database_.name; }
    [[nodiscard]] const std::string& user_name() const { return user_; }
    [[nodiscard]] const DatabaseConfig& database() const { return database_; }
    // The host of the database's host list the next server connection goes to (an index for
    // split_host_list / port_for_host): core/host_choice.hpp, from what the pool knows of its hosts.
    [[nodiscard]] std::size_t choose_host();
    // The host for one of pgtether's own connections of this pool (the LISTEN hub's, the lock
    // catalog's watch): the same choice, without taking a round-robin turn or counting as an
    // attempt, so that after a failover they follow the pooled servers to the new primary
    // instead of staying on the first host of the list.
    [[nodiscard]] std::size_t side_host() const;
    // What the pool knows of each host of its database's list (SHOW HOSTS).
    [[nodiscard]] const std::vector<HostStatus>& hosts() const { return hosts_; }
    // What another pool learnt of a host (PoolContext::share_host_news): applied to each host of
    // this pool's list with the same host and port.
    void learn_host(const HostNews& news);
    [[nodiscard]] SessionAttrs session_attrs() const { return session_attrs_; }
    // Whether a server that reports `role` serves this database (target_session_attrs).
    [[nodiscard]] bool serves(const ServerRole& role) const {
        return role_fits(session_attrs_, role, true);
    }
    [[nodiscard]] PoolMode mode() const { return mode_; }
    // pool_size, reserve pool, tether allowance and caps as resolved from the configuration.
    [[nodiscard]] const PoolSizes& sizes() const { return sizes_; }
    // Its clients' timeouts: the global ones over which its database entry and its user's
    // [users] entry may set their own (core/client_timeouts.hpp).
    [[nodiscard]] const ClientTimeouts& timeouts() const { return timeouts_; }
    [[nodiscard]] PoolStats& stats() { return stats_; }
    // The tether's trigger for this pool's database (proxy/pool/lock_catalog.hpp).
    [[nodiscard]] const LockTrigger& lock_trigger() const { return *lock_trigger_; }
    // The pool's multiplexed LISTEN (proxy/pool/listen_hub.hpp), made at the first listener.
    [[nodiscard]] ListenHub& listen_hub();
    [[nodiscard]] const ListenHub* listen_hub_if_any() const { return listen_hub_.get(); }
    // Shutdown: the listening connection closes.
    void stop_listening();

    // Re-resolves sizes and modes after a reload.
    void apply_config(const DatabaseConfig& database);

    // ---- server greeting ----
    [[nodiscard]] bool has_welcome() const { return !welcome_.empty(); }
    // ParameterStatus pairs the first server sent, in order.
    [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& welcome() const {
        return welcome_;
    }
    // Values of the tracked parameters a fresh server starts with.
    [[nodiscard]] const ParamValues& default_params() const { return default_params_; }
    // With several workers: takes the greeting of the same pool on another worker, if it has one.
    void learn_welcome_from_other_workers();
    // A logged-in client waits here until the first server has told us its parameters.
    void wait_for_welcome(Client& client);
    void cancel_welcome_wait(Client& client);

    // ---- credentials for logging in to servers ----
    [[nodiscard]] ServerCredentials server_credentials() const;
    // After a client authenticated: keep what it proved (SCRAM keys, and the secret itself when
    // it came from auth_query rather than auth_file) for server logins.
    void learn_client_credentials(const ClientAuth& auth);

    // ---- clients asking for servers ----
    enum class Assignment {
        Assigned,  // linked now: the client's on_server_assigned ran before this returned
        Queued,    // waiting: a released or new server reaches it at a hand-off (below)
        Failed,    // logins are failing: the client was closed with the server's error
    };
    // The client has a request: link an idle server now, or queue the client. Clients already
    // waiting come first: an idle server is theirs at the next hand-off.
    [[nodiscard]] Assignment request_server(Client& client);
    void cancel_request(Client& client);
    // A replication client (core/replication.hpp) authenticated: a backend is opened for it
    // alone, counted against the pool's limits like any (an idle one is evicted to make room,
    // as PgBouncer does), and relayed to it once logged in (Client::on_replication_server_ready).
    // Until a slot is free the client waits, in arrival order.
    void request_replication_server(Client& client);
    // Its backend's login ended, either way (neither counts for the pool's login backoff: a
    // missing REPLICATION privilege or pg_hba.conf line says nothing of other clients' logins).
    void on_replication_login_ended();
    // Clients wait for a server of this pool: here, or on another worker that asked this one to
    // lend a server (lend()).
    [[nodiscard]] bool clients_wait_for_servers() const;

    // ---- servers coming back ----
    // A server is clean and unlinked, for `reason`: the one way back. plan_release
    // (core/departure.hpp) says whether it closes, waits for a cancel, runs the reset query
    // first, or returns: to a client owed a lent server, or the idle list (with a hand-off
    // scheduled when clients wait).
    void release(Server& server, ReleaseReason reason);
    // The hand-off (PgBouncer's per_loop_activate): idle servers go to waiting clients. Run by the
    // worker once per loop iteration when scheduled (PoolContext::schedule_hand_offs), never from
    // inside the read callback of the server being released.
    void serve_waiting_clients();
    // A server finished logging in (first ReadyForQuery). on_server_role says whether the role
    // it reported serves this database first (false: it is closed as a failed login).
    void on_server_login(Server& server);
    [[nodiscard]] bool on_server_role(const Server& server, const ServerRole& role);
    // A periodic role check (Server::check_role) answered `role` for the server's host: noted
    // as a login there would be, learnt by this pool's other servers of the host that do not
    // report their role, and those idle that no longer serve the database are closed.
    void on_role_checked(Server& server, const ServerRole& role);
    void on_server_login_failed(Server& server, const protocol::ErrorFields& error,
                                LoginFailureKind kind);
    // The same pool on another worker logged in after failed logins: the server is back.
    void on_login_recovered_elsewhere();
    // A reload changed what this pool's logins are made from: failed logins are forgotten and
    // waiting clients get a new attempt (core/login_retry.hpp).
    void on_login_settings_changed();
    // A server is being destroyed (it has left the lists on its way to Closing).
    void forget_server(Server& server);
    // Server::transition(): move the server to the list of its new state, count it there.
    void on_server_transition(Server& server, ServerState from, ServerState to);
    // Servers of this pool per state (SHOW POOLS, SHOW SERVERS, metrics: proxy/pool/pool_census.hpp).
    [[nodiscard]] const ServerStateCounts& state_counts() const { return state_counts_; }
    // One of this pool's clients became tethered, or stopped being tethered: a new tether widens
    // the pool (tether_reserve_size), so clients waiting for a server may get a new one now.
    void on_tether_change();

    // PAUSE / KILL of this pool's database (proxy/pool/pool_control.hpp): no servers are handed out
    // or launched, and released servers are closed. resume() serves the queue again.
    [[nodiscard]] bool paused() const;
    void resume();

    // Periodic work: timeouts, min_pool_size, reserve pool, idle checks.
    void janitor(std::uint64_t now_ms);
    // RECONNECT / reload: close idle servers now, the others when released.
    void close_all_servers(const char* reason);
    void close_idle_servers(const char* reason);
    // Closes one idle server, if there is one (to make room for another pool); true if it did.
    bool close_one_idle_server(const char* reason);
    // Whether closing one of this pool's servers frees room for pool (`database`, `user`) whose
    // database (`db_full`) or user (`user_full`) limit is reached, or, neither, its own limit.
    [[nodiscard]] bool frees_room_for(const std::string& database, const std::string& user,
                                      bool db_full, bool user_full) const;
    // Worker `request.worker` has clients waiting and no slot of the budget for them: close an
    // idle server now, or else the next one released (within kLendRequestLifetimeMs, while this
    // worker can spare it); its slot goes to the requester (ServerBudget::hand_over), which is
    // told. False when the pool has no server at all.
    bool lend(const LendRequest& request);
    // Another worker handed this pool a slot of the budget (lend()): open a server with it for
    // the clients waiting here, or give it back when none wait any more.
    void use_lent_slot();
    [[nodiscard]] bool empty() const;

    // The pool's failed logins since its last successful one (GET /readyz, core/readiness.hpp).
    [[nodiscard]] PoolLoginRecord login_record() const;

    [[nodiscard]] int server_count() const { return server_count_; }
    [[nodiscard]] std::size_t idle_count() const { return idle_.size(); }
    // An idle server to lend to one of pgtether's own short queries (the catalog check): the one
    // the next client would be handed last; nullptr: none idle, or the pool is paused (its
    // servers close as they come back).
    [[nodiscard]] Server* idle_server_to_lend() { return paused() ? nullptr : idle_.back(); }
    // Servers linked to a tethered client.
    [[nodiscard]] int tethered_server_count() const;

private:
    // A login or role check on hosts_[index] (as `where`) found `role`: noted, logged when the
    // host changed role, shared with the other pools when it is news.
    void note_host_role(std::size_t index, const ServerRole& role, const std::string& where);
    // News of hosts_[index] for the other pools (PoolContext::share_host_news).
    [[nodiscard]] HostNews host_news(std::size_t index, HostNews::Kind kind) const;
    // The pool's greeting is known (from a server of its own or another worker's share): keep
    // it and log in every client waiting for it.
    void adopt_welcome(std::vector<std::pair<std::string, std::string>> welcome,
                       ParamValues params);
    void launch_if_needed();
    // Launches for the clients waiting (for a server, or for the pool's greeting), as allowed.
    void retry_waiting();
    // Waiting clients that no server covers: neither one logging in nor an idle one about to be
    // handed to them.
    [[nodiscard]] std::size_t uncovered_waiting() const;
    void schedule_hand_offs();
    // Shutting down, paused, or waiting for the next login attempt after failed ones
    // (core/login_retry.hpp): no server is launched at all.
    [[nodiscard]] bool launch_suspended() const;
    // Which limit, if any, keeps the pool from launching another server (pool_capacity.hpp).
    [[nodiscard]] LaunchVerdict launch_verdict(bool use_reserve) const;
    [[nodiscard]] bool may_launch(bool use_reserve) const;
    // This worker's tethered servers of the pool, as the server budget counts them.
    [[nodiscard]] int tethered_for_budget() const;
    // Takes a slot of the process-wide server budget (proxy/pool/server_budget.hpp) if the limits
    // allow one more server; the verdict says which limit did not.
    [[nodiscard]] LaunchVerdict take_slot(bool use_reserve);
    // Clients wait although the pool is below its share for them, because more clients are
    // tethered than tether_reserve_size covers: logged and counted once per occurrence.
    void note_tether_reserve_exhausted(bool exhausted);
    // Logins are failing in a way that clients without a server should hear about now.
    [[nodiscard]] bool login_fails_clients() const;
    // While clients are failed fast: a login attempt, when the backoff allows one.
    void probe_login();
    // Opens a server when not suspended and the budget gives a slot; false otherwise.
    bool launch_server(bool use_reserve);
    // Opens a server for a slot already taken.
    // `replication_client`: the backend is that client's alone (request_replication_server).
    void open_server(Client* replication_client = nullptr);
    // Opens backends for the replication clients waiting, while slots can be had.
    void launch_for_replication();
    void hand_to_waiting_client(Server& server);
    // Which idle server a client gets, and which waiting client a released server goes to:
    // LIFO and FIFO, with a preference for matching session settings (pool.cpp).
    Server* idle_server_for(const Client& client);
    Client* waiting_client_for(const Server& server);
    // max_db_connections / max_user_connections are reached by other pools: close an idle
    // server of one of them; or the limits are reached by servers of other workers: ask them to
    // lend one (ask_to_lend).
    void make_room_elsewhere();
    void ask_to_lend(bool db_full, bool user_full);
    // A lend is owed (lend()): close `server`, just released, instead of keeping it idle, when
    // this worker can spare it. True if it did.
    bool pays_lend_owed_with(Server& server);
    // release()'s plan says close (core/departure.hpp, plan_release): with the words of `why`.
    void close_released(Server& server, ReleasePlan::Why why);
    // Whether this worker may lend one of its servers of the pool to worker `requester` now.
    [[nodiscard]] bool can_spare_for(std::size_t requester) const;
    // Servers other than `except` that are logged in and not retired: those that can still serve
    // a queued client (core/login_retry.hpp: fail_queued_clients).
    [[nodiscard]] int working_servers(const Server& except);
    // Closes `server` with its slot handed to `request`'s pool.
    void close_for(Server& server, const LendRequest& request);
    // How long a lend request is honoured: the requester repeats it every janitor tick while
    // its clients still wait.
    static constexpr std::uint64_t kLendRequestLifetimeMs = 1000;

    PoolContext& context_;
    DatabaseConfig database_;
    std::string user_;
    PoolMode mode_ = PoolMode::Transaction;
    PoolSizes sizes_;
    ClientTimeouts timeouts_;

    IntrusiveList<Server, &Server::pool_hook_> idle_;
    IntrusiveList<Server, &Server::pool_hook_> used_;
    IntrusiveList<Client, &Client::pool_hook_> waiting_;
    IntrusiveList<Client, &Client::pool_hook_> welcome_waiting_;
    IntrusiveList<Client, &Client::pool_hook_> replication_waiting_;
    bool launching_for_replication_ = false;  // launch_for_replication() runs (no re-entry)
    std::uint64_t host_turn_ = 0;  // choose_host(): round robin over the host list
    std::vector<HostStatus> hosts_;  // one per host of database_'s host list
    SessionAttrs session_attrs_ = SessionAttrs::Any;
    int server_count_ = 0;   // idle_ + used_
    std::uint64_t idle_places_given_ = 0;  // Server::idle_place
    ServerStateCounts state_counts_;
    int connecting_ = 0;     // servers not yet logged in
    int head_skips_ = 0;     // times the first waiting client was passed over (waiting_client_for)
    bool tether_reserve_exhausted_ = false;  // an occurrence is going on (logged, counted)
    bool hand_offs_scheduled_ = false;       // serve_waiting_clients() is due this iteration
    std::optional<LendRequest> lend_owed_;    // a lend() to pay with the next release
    std::uint64_t lend_owed_until_ms_ = 0;
    std::optional<LendRequest> lending_now_;  // close_for(): forget_server hands the slot over

    std::vector<std::pair<std::string, std::string>> welcome_;
    ParamValues default_params_;
    LoginBackoff login_backoff_;
    std::optional<protocol::ErrorFields> last_login_error_;
    std::optional<UserSecret> fetched_secret_;
    // fetched_secret_ is the password PAM or LDAP accepted: servers use it before auth_file's.
    bool secret_checked_outside_ = false;  // from auth_query, for users not in auth_file
    std::optional<protocol::ScramKey> scram_client_key_;
    std::optional<protocol::ScramKey> scram_server_key_;
    PoolStats stats_;
    const LockTrigger* lock_trigger_;  // owned by the worker's LockCatalog
    std::unique_ptr<ListenHub> listen_hub_;
};

}  // namespace pgtether
