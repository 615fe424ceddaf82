#include "proxy/pool/server_budget.hpp"

#include <numeric>

namespace pgtether {

namespace {

int sum(const std::vector<int>& values) { return std::accumulate(values.begin(), values.end(), 0); }

int lookup(const std::map<std::string, int>& counts, const std::string& name) {
    auto it = counts.find(name);
    return it == counts.end() ? 0 : it->second;
}

}  // namespace

ServerBudget::PoolEntry& ServerBudget::entry(const std::string& database,
                                             const std::string& user) {
    auto& e = pools_[std::make_pair(database, user)];
    if (e.servers.empty()) {
        e.servers.assign(workers_, 0);
        e.tethered.assign(workers_, 0);
    }
    return e;
}

ServerCounts ServerBudget::counts(const std::string& database, const std::string& user,
                                  std::size_t worker, int tethered_here) const {
    ServerCounts counts;
    counts.tethered = tethered_here;
    if (auto it = pools_.find(std::make_pair(database, user)); it != pools_.end()) {
        counts.pool = sum(it->second.servers);
        counts.tethered += sum(it->second.tethered) - it->second.tethered.at(worker);
    }
    counts.database = lookup(databases_, database);
    counts.user = lookup(users_, user);
    return counts;
}

LaunchVerdict ServerBudget::take(const std::string& database, const std::string& user,
                                 std::size_t worker, int tethered_here, const PoolSizes& sizes,
                                 bool use_reserve) {
    std::lock_guard lock(mutex_);
    const LaunchVerdict verdict =
        launch_verdict(sizes, counts(database, user, worker, tethered_here), use_reserve);
    auto& pool = entry(database, user);
    pool.tethered.at(worker) = tethered_here;
    if (verdict != LaunchVerdict::Launch) return verdict;
    ++pool.servers.at(worker);
    ++databases_[database];
    ++users_[user];
    return verdict;
}

LaunchVerdict ServerBudget::verdict(const std::string& database, const std::string& user,
                                    std::size_t worker, int tethered_here, const PoolSizes& sizes,
                                    bool use_reserve) const {
    std::lock_guard lock(mutex_);
    return launch_verdict(sizes, counts(database, user, worker, tethered_here), use_reserve);
}

void ServerBudget::give_back(const std::string& database, const std::string& user,
                             std::size_t worker) {
    std::lock_guard lock(mutex_);
    release(database, user, worker);
}

void ServerBudget::set_tethered(const std::string& database, const std::string& user,
                                std::size_t worker, int tethered) {
    std::lock_guard lock(mutex_);
    entry(database, user).tethered.at(worker) = tethered;
}

void ServerBudget::release(const std::string& database, const std::string& user,
                           std::size_t worker) {
    --entry(database, user).servers.at(worker);
    --databases_[database];
    --users_[user];
}

bool ServerBudget::hand_over(const std::string& from_database, const std::string& from_user,
                             std::size_t from_worker, const std::string& to_database,
                             const std::string& to_user, std::size_t to_worker, int to_tethered,
                             const PoolSizes& to_sizes) {
    std::lock_guard lock(mutex_);
    release(from_database, from_user, from_worker);
    const LaunchVerdict verdict = launch_verdict(
        to_sizes, counts(to_database, to_user, to_worker, to_tethered), false);
    if (verdict != LaunchVerdict::Launch) return false;
    ++entry(to_database, to_user).servers.at(to_worker);
    ++databases_[to_database];
    ++users_[to_user];
    return true;
}

int ServerBudget::pool_servers(const std::string& database, const std::string& user) const {
    std::lock_guard lock(mutex_);
    auto it = pools_.find(std::make_pair(database, user));
    return it == pools_.end() ? 0 : sum(it->second.servers);
}

int ServerBudget::pool_servers_on(const std::string& database, const std::string& user,
                                  std::size_t worker) const {
    std::lock_guard lock(mutex_);
    auto it = pools_.find(std::make_pair(database, user));
    return it == pools_.end() ? 0 : it->second.servers.at(worker);
}

int ServerBudget::database_servers(const std::string& database) const {
    std::lock_guard lock(mutex_);
    return lookup(databases_, database);
}

int ServerBudget::user_servers(const std::string& user) const {
    std::lock_guard lock(mutex_);
    return lookup(users_, user);
}

}  // namespace pgtether

namespace pgtether {

int ServerBudget::total_servers() const {
    std::lock_guard lock(mutex_);
    int total = 0;
    for (const auto& [name, count] : databases_) total += count;
    return total;
}

}  // namespace pgtether

namespace pgtether {

ServerBudget::PoolShare ServerBudget::share(const std::string& database, const std::string& user,
                                            std::size_t worker, int tethered_here) const {
    std::lock_guard lock(mutex_);
    PoolShare share;
    const ServerCounts c = counts(database, user, worker, tethered_here);
    share.servers = c.pool;
    share.tethered = c.tethered;
    share.largest = true;
    if (auto it = pools_.find(std::make_pair(database, user)); it != pools_.end()) {
        const auto& servers = it->second.servers;
        for (std::size_t i = 0; i < servers.size(); ++i) {
            if (i == worker) continue;
            if (servers[i] > servers.at(worker) || (servers[i] == servers.at(worker) && i < worker)) {
                share.largest = false;
            }
        }
    }
    return share;
}

}  // namespace pgtether
