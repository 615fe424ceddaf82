// The workers of one process (`workers = N`) and the little they share: the cancel registry, the
// server budget that keeps pool limits process-wide, the client counts for max_client_conn and
// the per-database and per-user client limits, and a way to run something on every worker's own
// thread (docs/architecture.md, "Workers").
//
// Nothing a worker's loop owns (clients, servers, pools) is ever touched from another thread:
// what one worker needs from another goes to that worker's mailbox (Worker::post) and runs there.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "proxy/client/cancel_registry.hpp"
#include "proxy/client/client_counts.hpp"
#include "proxy/pool/server_budget.hpp"
#include "proxy/pool/watch_claims.hpp"

namespace pgtether {

class Worker;

class WorkerGroup {
public:
    explicit WorkerGroup(std::size_t size) : budget_(size) {}
    WorkerGroup(const WorkerGroup&) = delete;
    WorkerGroup& operator=(const WorkerGroup&) = delete;

    // Called by each Worker's constructor, in index order; its index is the current size.
    [[nodiscard]] std::size_t add(Worker& worker);
    [[nodiscard]] std::size_t size() const { return workers_.size(); }
    [[nodiscard]] Worker& at(std::size_t index) const { return *workers_.at(index); }

    [[nodiscard]] CancelRegistry& cancels() { return cancels_; }
    [[nodiscard]] ServerBudget& budget() { return budget_; }
    // Which worker runs each database's catalog watch.
    [[nodiscard]] WatchClaims& catalog_watches() { return catalog_watches_; }
    // Client connections of every worker (max_client_conn is a limit of the process).
    [[nodiscard]] std::atomic<std::size_t>& clients() { return clients_; }
    // The process holds more clients than max_client_conn allows (the newest counted).
    [[nodiscard]] bool over_client_limit(int max_client_conn) const {
        return clients_ > static_cast<std::size_t>(max_client_conn);
    }
    // Client connections per database and per user of every worker
    // (max_db_client_connections, max_user_client_connections).
    [[nodiscard]] ClientCounts& client_counts() { return client_counts_; }

    // Runs `fn` on every worker's own thread, `caller`'s first and directly, and returns when all
    // have run it. While it waits, `caller` runs what other workers gather from it, so that two
    // workers gathering from each other at once do not wait for each other forever. `fn` must
    // only read (it may run while the caller is in the middle of a callback). A worker whose loop
    // has stopped is skipped.
    void gather(Worker& caller, const std::function<void(Worker&)>& fn);
    // Queues `fn` on every worker other than `caller` (run from their loops, in order).
    void post_to_others(const Worker& caller, const std::function<void(Worker&)>& fn);
    // Queues `fn` on worker `index`; false when its loop has stopped (`fn` is not run).
    bool post_to(std::size_t index, std::function<void(Worker&)> fn);

    // The same three with `fn` seeing each worker only as one of its contexts (`Context`:
    // PoolContext or AdminContext, what the pools and the console may reach of another worker).
    template <class Context>
    void gather_as(Worker& caller, const std::function<void(Context&)>& fn) {
        gather(caller, [&fn](Worker& other) { fn(other); });
    }
    template <class Context>
    void post_to_others_as(const Worker& caller, std::function<void(Context&)> fn) {
        post_to_others(caller, [fn = std::move(fn)](Worker& other) { fn(other); });
    }
    template <class Context>
    bool post_to_as(std::size_t index, std::function<void(Context&)> fn) {
        return post_to(index, [fn = std::move(fn)](Worker& other) { fn(other); });
    }

private:
    std::vector<Worker*> workers_;
    CancelRegistry cancels_;
    ServerBudget budget_;
    WatchClaims catalog_watches_;
    std::atomic<std::size_t> clients_{0};
    ClientCounts client_counts_;
};

}  // namespace pgtether
