// The process-wide server budget (proxy/pool/server_budget.hpp): with several workers, a pool's
// limits count the servers of every worker, and two workers never both take the last slot.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "proxy/pool/server_budget.hpp"

using namespace pgtether;

namespace {

PoolSizes sizes(int pool, int reserve, int tether, int max_db = 0, int max_user = 0) {
    PoolSizes s;
    s.pool_size = pool;
    s.reserve_pool_size = reserve;
    s.tether_reserve_size = tether;
    s.max_db_connections = max_db;
    s.max_user_connections = max_user;
    return s;
}

}  // namespace

TEST_CASE("pool_size counts the pool's servers on every worker") {
    ServerBudget budget(2);
    const auto s = sizes(3, 0, 0);
    CHECK(budget.take("db", "u", 0, 0, s, false) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "u", 1, 0, s, false) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "u", 1, 0, s, false) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "u", 0, 0, s, false) == LaunchVerdict::PoolFull);
    CHECK(budget.verdict("db", "u", 1, 0, s, false) == LaunchVerdict::PoolFull);
    CHECK(budget.pool_servers("db", "u") == 3);
    CHECK(budget.pool_servers_on("db", "u", 0) == 1);
    CHECK(budget.pool_servers_on("db", "u", 1) == 2);
    // The reserve pool on top, for whichever worker asks.
    CHECK(budget.take("db", "u", 0, 0, sizes(3, 1, 0), true) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "u", 1, 0, sizes(3, 1, 0), true) == LaunchVerdict::PoolFull);
    // A slot given back on one worker can be taken on the other.
    budget.give_back("db", "u", 1);
    CHECK(budget.pool_servers_on("db", "u", 1) == 1);
    CHECK(budget.take("db", "u", 0, 0, sizes(3, 1, 0), true) == LaunchVerdict::Launch);
    CHECK(budget.total_servers() == 4);
}

TEST_CASE("max_db_connections and max_user_connections count every pool on every worker") {
    ServerBudget budget(2);
    const auto s = sizes(5, 0, 0, 2, 0);
    CHECK(budget.take("db", "a", 0, 0, s, false) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "b", 1, 0, s, false) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "c", 1, 0, s, false) == LaunchVerdict::DatabaseFull);
    CHECK(budget.database_servers("db") == 2);
    const auto u = sizes(5, 0, 0, 0, 1);
    CHECK(budget.take("other", "a", 1, 0, u, false) == LaunchVerdict::UserFull);
    CHECK(budget.take("other", "z", 1, 0, u, false) == LaunchVerdict::Launch);
    CHECK(budget.user_servers("a") == 1);
    CHECK(budget.user_servers("z") == 1);
}

TEST_CASE("the tether allowance is shared by the pool's tethered servers on every worker") {
    ServerBudget budget(2);
    const auto s = sizes(1, 0, 1);  // pool_size 1, one more for a tethered server
    // Worker 0 has its one server tethered: the pool may open one more, on either worker.
    CHECK(budget.take("db", "u", 0, 0, s, false) == LaunchVerdict::Launch);
    CHECK(budget.take("db", "u", 0, 1, s, false) == LaunchVerdict::Launch);
    // Worker 1's tethered server needs the allowance too, but it is used up: the limit is
    // pool_size + tether_reserve_size in total, and the clients without a lock have nothing.
    CHECK(budget.take("db", "u", 1, 1, s, false) == LaunchVerdict::TetherReserveExhausted);
    // Worker 0's tether ended (it reports 0 with its next request): still full.
    CHECK(budget.take("db", "u", 0, 0, s, false) == LaunchVerdict::PoolFull);
}

TEST_CASE("two workers racing for the last slots never exceed the limit") {
    ServerBudget budget(2);
    const auto s = sizes(10, 0, 0);
    std::atomic<int> taken{0};
    auto race = [&](std::size_t worker) {
        for (int i = 0; i < 1000; ++i) {
            if (budget.take("db", "u", worker, 0, s, false) == LaunchVerdict::Launch) ++taken;
        }
    };
    std::thread a(race, 0);
    std::thread b(race, 1);
    a.join();
    b.join();
    CHECK(taken == 10);
    CHECK(budget.pool_servers("db", "u") == 10);
    CHECK(budget.pool_servers_on("db", "u", 0) + budget.pool_servers_on("db", "u", 1) == 10);
}
