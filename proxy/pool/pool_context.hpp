// What the pools of a worker -- and what serves them: the LISTEN hubs, the lock catalog, the
// console's process control, the census SHOW POOLS reads -- need of the worker, beyond what its
// clients need (a ClientContext; docs/architecture.md, "Layer rules"): the pools themselves, the
// process's server budget and catalog-watch claims, PAUSE/KILL/DISABLE state, the lock catalog,
// what is known of each host, and a way to reach the pools of the other workers. A Worker is one
// (it derives from it); pool/ reaches the worker through this alone.
//
// What is read on every transaction (the pause state, the budget, the worker's index) is a plain
// member here, not a virtual call; only what crosses to other workers' threads or walks the
// worker's registries is the worker's to implement.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/host_choice.hpp"
#include "proxy/client/client_context.hpp"
#include "proxy/pool/server_budget.hpp"
#include "proxy/pool/watch_claims.hpp"

namespace pgtether {

class Client;
class LockCatalog;
class Pool;
class PoolControl;
class Server;
struct LendRequest;

class PoolContext : public ClientContext {
public:
    // Pools by (database entry name, server user).
    using PoolMap = std::map<std::pair<std::string, std::string>, std::unique_ptr<Pool>>;

    // `budget` and `catalog_watches` are the process's (one for all workers).
    PoolContext(std::size_t read_buffer, std::shared_ptr<const Config> config,
                std::shared_ptr<const SecuritySetup> security,
                std::shared_ptr<const AuthFile> auth_file, ServerBudget& budget,
                WatchClaims& catalog_watches);

    // This worker's place among the process's workers (worker_count() of them).
    [[nodiscard]] std::size_t index() const { return index_; }
    // The pool limits of the whole process (max_db_connections, ...), shared by every worker.
    [[nodiscard]] ServerBudget& budget() { return budget_; }
    [[nodiscard]] const ServerBudget& budget() const { return budget_; }
    // Which worker runs each database's catalog watch.
    [[nodiscard]] WatchClaims& catalog_watches() { return catalog_watches_; }
    // PAUSE, RESUME, KILL, DISABLE ... (the admin console's process control).
    [[nodiscard]] PoolControl& pool_control() { return *control_; }
    [[nodiscard]] const PoolControl& pool_control() const { return *control_; }
    // The tether's trigger of each database: builtin, configured and discovered lock functions.
    [[nodiscard]] LockCatalog& lock_catalog() { return *lock_catalog_; }
    [[nodiscard]] const LockCatalog& lock_catalog() const { return *lock_catalog_; }
    // This worker's pools (its share of each), for stats, the janitor and lending.
    [[nodiscard]] const PoolMap& pools() const { return pools_; }

    // Worker `request.worker` has clients of pool (`database`, `user`) waiting and the
    // process-wide limits are full (`db_full`: max_db_connections, `user_full`:
    // max_user_connections, neither: the pool's own size): one of this worker's pools that holds
    // such a slot lends it (Pool::lend). Runs from the mailbox.
    void lend_server(const LendRequest& request);
    // Another worker handed pool (`database`, `user`) of this worker a slot of the server
    // budget (Pool::use_lent_slot). Runs from the mailbox.
    void use_lent_slot(const std::string& database, const std::string& user);

    // A pool learnt what holds for every pool with the same host and port (a host of its list
    // refused, or a login found its role: core/host_choice.hpp): this worker's other pools and
    // the other workers' hear it, and every worker remembers it for pools it creates later, so
    // that each pool does not pay a refused connection of its own to learn it.
    void share_host_news(const HostNews& news, const Pool& from);
    // What this worker knows of a host:port from such news (nullptr: nothing), for a new pool.
    [[nodiscard]] const HostStatus* remembered_host(const std::string& host, int port) const;

    // The other workers' pools (their threads: what runs there must go through these).
    // Queues `fn` on every other worker (run from their loops, in order).
    virtual void post_to_other_workers(std::function<void(PoolContext&)> fn) = 0;
    // Queues `fn` on worker `index`; false when its loop has stopped (`fn` is not run).
    virtual bool post_to_worker(std::size_t index, std::function<void(PoolContext&)> fn) = 0;
    // Runs `fn` on every worker, this one first, and returns when all have run it; `fn` only
    // reads (WorkerGroup::gather).
    virtual void gather_from_workers(const std::function<void(PoolContext&)>& fn) = 0;

    // Every live client / server of this worker, in creation order. `fn` must not destroy
    // objects; closing them is fine.
    virtual void for_each_client(const std::function<void(Client&)>& fn) const = 0;
    virtual void for_each_server(const std::function<void(Server&)>& fn) const = 0;
    // Cancel requests being forwarded to `server`'s backend (SHOW POOLS' sv_active_cancel).
    [[nodiscard]] virtual int cancels_in_flight_for(const Server& server) const = 0;
    // A pool has idle servers and waiting clients: Pool::serve_waiting_clients runs once this
    // loop iteration's I/O callbacks are done, before the loop blocks again.
    virtual void schedule_hand_offs(Pool& pool) = 0;

protected:
    ~PoolContext();
    // The news, for this worker's pools but `from` (the one that learnt it) and its memory; from
    // another worker's mailbox, for all of them.
    void take_host_news(const HostNews& news, const Pool* from = nullptr);

    std::size_t index_ = 0;  // set by the worker once it has joined its group
    std::unique_ptr<LockCatalog> lock_catalog_;
    std::unique_ptr<PoolControl> control_;
    PoolMap pools_;

private:
    ServerBudget& budget_;
    WatchClaims& catalog_watches_;
    // See share_host_news: by host and port, only what holds for every pool (never a wrong-role
    // back-off). Bounded by the configuration's host lists.
    std::map<std::pair<std::string, int>, HostStatus> host_memory_;
};

}  // namespace pgtether
