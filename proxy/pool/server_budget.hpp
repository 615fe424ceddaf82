// The process-wide count of server connections, so that pool limits stay limits of the whole
// process however clients spread over workers (`workers = N`, docs/architecture.md, "Workers").
//
// Each worker's Pool takes a slot here before it opens a server connection and gives it back when
// that connection is gone; the decision is launch_verdict() (core/pool_capacity.hpp) over the
// counts of every worker together, taken under one mutex, so two workers can never both take the
// last slot. Only opening and closing a server connection (and a tether starting or ending) come
// here: the per-query path never does.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/pool_capacity.hpp"

namespace pgtether {

class ServerBudget {
public:
    explicit ServerBudget(std::size_t workers) : workers_(workers) {}

    // Takes one slot for a new server connection of pool (`database`, `user`) on `worker` when
    // launch_verdict() over the process-wide counts says Launch; otherwise takes nothing and
    // returns the limit that stopped it. `tethered_here`: the pool's servers on `worker` linked
    // to tethered clients now (the allowance, tether_reserve_size, is shared by the pool's
    // servers on every worker); it is recorded either way.
    [[nodiscard]] LaunchVerdict take(const std::string& database, const std::string& user,
                                     std::size_t worker, int tethered_here, const PoolSizes& sizes,
                                     bool use_reserve);
    // What take() would say now, taking nothing.
    [[nodiscard]] LaunchVerdict verdict(const std::string& database, const std::string& user,
                                        std::size_t worker, int tethered_here,
                                        const PoolSizes& sizes, bool use_reserve) const;
    // A server connection of pool (`from_database`, `from_user`) on `from_worker` is gone, and
    // its slot goes straight to pool (`to_database`, `to_user`) on `to_worker` if the limits
    // allow that pool one more (as take() would decide), so that no other pool or worker takes
    // it first (lending between workers). False: the slot was only given back.
    [[nodiscard]] bool hand_over(const std::string& from_database, const std::string& from_user,
                                 std::size_t from_worker, const std::string& to_database,
                                 const std::string& to_user, std::size_t to_worker,
                                 int to_tethered, const PoolSizes& to_sizes);
    // `worker`'s servers of the pool linked to tethered clients changed (a tether began or
    // ended).
    void set_tethered(const std::string& database, const std::string& user, std::size_t worker,
                      int tethered);
    // A server connection taken with take() is gone.
    void give_back(const std::string& database, const std::string& user, std::size_t worker);

    // Process-wide open server connections of a pool, a database, a server user; and of a pool
    // on one worker.
    [[nodiscard]] int pool_servers(const std::string& database, const std::string& user) const;
    [[nodiscard]] int pool_servers_on(const std::string& database, const std::string& user,
                                      std::size_t worker) const;
    [[nodiscard]] int database_servers(const std::string& database) const;
    [[nodiscard]] int user_servers(const std::string& user) const;
    [[nodiscard]] int total_servers() const;

    // A pool's servers and tethered servers on every worker (`tethered_here` standing for
    // `worker`'s), and whether `worker` holds the most of them (the lowest index among equals):
    // that worker alone closes servers beyond the pool's limits (after a reload lowered them,
    // or when tethers that justified them ended), so two workers do not both close one.
    struct PoolShare {
        int servers = 0;
        int tethered = 0;
        bool largest = false;
    };
    [[nodiscard]] PoolShare share(const std::string& database, const std::string& user,
                                  std::size_t worker, int tethered_here) const;

private:
    struct PoolEntry {
        std::vector<int> servers;   // per worker
        std::vector<int> tethered;  // per worker
    };
    PoolEntry& entry(const std::string& database, const std::string& user);
    void release(const std::string& database, const std::string& user, std::size_t worker);
    // The process-wide counts, with `tethered_here` standing for `worker`'s tethered servers.
    [[nodiscard]] ServerCounts counts(const std::string& database, const std::string& user,
                                      std::size_t worker, int tethered_here) const;

    std::size_t workers_;
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, std::string>, PoolEntry> pools_;
    std::map<std::string, int> databases_;
    std::map<std::string, int> users_;
};

}  // namespace pgtether
