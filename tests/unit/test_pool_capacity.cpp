// A pool's capacity (core/pool_capacity.hpp): how pool_size, reserve_pool_size, the tether
// allowance and the database and user caps decide whether a pool may open another server, and
// when a server is one too many.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/pool_capacity.hpp"

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

const char* name(LaunchVerdict v) {
    switch (v) {
        case LaunchVerdict::Launch:
            return "Launch";
        case LaunchVerdict::PoolFull:
            return "PoolFull";
        case LaunchVerdict::TetherReserveExhausted:
            return "TetherReserveExhausted";
        case LaunchVerdict::DatabaseFull:
            return "DatabaseFull";
        case LaunchVerdict::UserFull:
            return "UserFull";
    }
    return "?";
}

const char* name(Surplus s) {
    switch (s) {
        case Surplus::None:
            return "None";
        case Surplus::PoolSizeReduced:
            return "PoolSizeReduced";
        case Surplus::TetherReserveUnused:
            return "TetherReserveUnused";
    }
    return "?";
}

}  // namespace

TEST_CASE("the launch limit grows by one per tethered server, up to tether_reserve_size") {
    struct Case {
        int pool, reserve, tether, tethered;
        bool use_reserve;
        int limit;
    };
    const std::vector<Case> cases = {
        {2, 0, 2, 0, false, 2},  // nobody tethered: the pool's size
        {2, 0, 2, 1, false, 3},  // one lock holder: one more
        {2, 0, 2, 2, false, 4},  // two: the allowance is used up
        {2, 0, 2, 5, false, 4},  // more: never beyond pool_size + tether_reserve_size
        {2, 0, 0, 2, false, 2},  // tether_reserve_size = 0: today's behaviour
        {2, 3, 1, 2, false, 3},  // the reserve pool only when asked for
        {2, 3, 1, 2, true, 6},   // pool + reserve + allowance
        {20, 0, 20, 7, false, 27}, {0, 0, 5, 0, false, 0},  // pool_size 0 opens nothing
        {2, 0, 2, -1, false, 2},  // a nonsensical count never shrinks the pool
    };
    for (const auto& c : cases) {
        CAPTURE(c.pool);
        CAPTURE(c.reserve);
        CAPTURE(c.tether);
        CAPTURE(c.tethered);
        CAPTURE(c.use_reserve);
        CHECK(pool_server_limit(sizes(c.pool, c.reserve, c.tether), c.tethered, c.use_reserve) ==
              c.limit);
    }
}

TEST_CASE("launch verdicts: pool limit first, then max_db_connections, then max_user_connections") {
    struct Case {
        PoolSizes sizes;
        ServerCounts counts;  // pool, tethered, database, user
        bool use_reserve;
        LaunchVerdict verdict;
    };
    using V = LaunchVerdict;
    const std::vector<Case> cases = {
        {sizes(2, 0, 2), {1, 0, 1, 1}, false, V::Launch},
        {sizes(2, 0, 2), {2, 0, 2, 2}, false, V::PoolFull},
        // Issue 11's case: two lock holders in a pool of two; a third client gets a server.
        {sizes(2, 0, 2), {2, 2, 2, 2}, false, V::Launch},
        {sizes(2, 0, 2), {3, 2, 3, 3}, false, V::Launch},
        // Two untethered servers besides the two tethered ones: the others have their share.
        {sizes(2, 0, 2), {4, 2, 4, 4}, false, V::PoolFull},
        // Three lock holders, allowance 2: the others are down to one server of two.
        {sizes(2, 0, 2), {4, 3, 4, 4}, false, V::TetherReserveExhausted},
        // Allowance 1, three lock holders and one plain client's server: exhausted.
        {sizes(2, 0, 1), {3, 3, 3, 3}, false, V::TetherReserveExhausted},
        {sizes(2, 0, 1), {3, 2, 3, 3}, false, V::TetherReserveExhausted},
        // Allowance 0 (today's behaviour): every tether eats into the pool.
        {sizes(2, 0, 0), {2, 1, 2, 2}, false, V::TetherReserveExhausted},
        {sizes(2, 0, 0), {2, 0, 2, 2}, false, V::PoolFull},
        // The reserve pool counts as the others' share when it is in use.
        {sizes(2, 1, 1), {4, 2, 4, 4}, true, V::TetherReserveExhausted},
        {sizes(2, 1, 1), {4, 1, 4, 4}, true, V::PoolFull},
        {sizes(2, 1, 1), {3, 2, 3, 3}, true, V::Launch},
        // Servers above every limit (sizes lowered by a reload) are not the tethers' fault.
        {sizes(1, 0, 0), {5, 1, 5, 5}, false, V::PoolFull},
        // The caps stay hard, tethers or not.
        {sizes(2, 0, 2, 3), {2, 2, 3, 3}, false, V::DatabaseFull},
        {sizes(2, 0, 2, 0, 2), {2, 2, 2, 2}, false, V::UserFull},
        {sizes(2, 0, 2, 10, 10), {2, 2, 9, 9}, false, V::Launch},
        // Other pools of the database hold the servers: the database cap, not this pool.
        {sizes(2, 0, 2, 4), {1, 0, 4, 4}, false, V::DatabaseFull},
    };
    for (const auto& c : cases) {
        CAPTURE(c.sizes.pool_size);
        CAPTURE(c.sizes.reserve_pool_size);
        CAPTURE(c.sizes.tether_reserve_size);
        CAPTURE(c.counts.pool);
        CAPTURE(c.counts.tethered);
        CAPTURE(c.use_reserve);
        CHECK(std::string(name(launch_verdict(c.sizes, c.counts, c.use_reserve))) ==
              name(c.verdict));
    }
}

TEST_CASE("surplus: above the sizes at once, above the current limit once tethers ended") {
    struct Case {
        PoolSizes sizes;
        int servers, tethered;
        Surplus surplus;
    };
    const std::vector<Case> cases = {
        {sizes(2, 0, 2), 2, 0, Surplus::None},
        {sizes(2, 0, 2), 4, 2, Surplus::None},
        {sizes(2, 0, 2), 4, 1, Surplus::TetherReserveUnused},
        {sizes(2, 0, 2), 3, 0, Surplus::TetherReserveUnused},
        {sizes(2, 0, 2), 5, 2, Surplus::PoolSizeReduced},
        {sizes(2, 1, 2), 3, 0, Surplus::None},  // the reserve pool stays until idle timeout
        {sizes(2, 1, 2), 4, 0, Surplus::TetherReserveUnused},
        {sizes(2, 0, 0), 3, 3, Surplus::PoolSizeReduced},
    };
    for (const auto& c : cases) {
        CAPTURE(c.servers);
        CAPTURE(c.tethered);
        CHECK(std::string(name(server_surplus(c.sizes, c.servers, c.tethered))) == name(c.surplus));
    }
}

TEST_CASE("sizes resolve per database over the defaults; the allowance defaults to pool_size") {
    Config config;
    config.default_pool_size = 20;
    config.reserve_pool_size = 1;
    config.max_db_connections = 50;
    config.max_user_connections = 40;
    DatabaseConfig db;

    auto s = resolve_pool_sizes(config, db, PoolMode::Transaction, nullptr);
    CHECK(s.pool_size == 20);
    CHECK(s.reserve_pool_size == 1);
    CHECK(s.tether_reserve_size == 20);  // -1: as many as the pool's size
    CHECK(s.max_db_connections == 50);
    CHECK(s.max_user_connections == 40);

    db.pool_size = 3;
    CHECK(resolve_pool_sizes(config, db, PoolMode::Transaction, nullptr).tether_reserve_size ==
          3);
    CHECK(resolve_pool_sizes(config, db, PoolMode::Statement, nullptr).tether_reserve_size ==
          3);
    // Session mode: every client keeps its server anyway, so no allowance.
    CHECK(resolve_pool_sizes(config, db, PoolMode::Session, nullptr).tether_reserve_size == 0);

    config.tether_reserve_size = 5;
    CHECK(resolve_pool_sizes(config, db, PoolMode::Transaction, nullptr).tether_reserve_size ==
          5);
    db.tether_reserve_size = 0;
    CHECK(resolve_pool_sizes(config, db, PoolMode::Transaction, nullptr).tether_reserve_size ==
          0);
    db.tether_reserve_size = -1;
    CHECK(resolve_pool_sizes(config, db, PoolMode::Transaction, nullptr).tether_reserve_size ==
          3);

    db.max_db_connections = 7;
    UserConfig user;
    user.max_user_connections = 9;
    auto per_entry = resolve_pool_sizes(config, db, PoolMode::Transaction, &user);
    CHECK(per_entry.max_db_connections == 7);
    CHECK(per_entry.max_user_connections == 9);
    CHECK(per_entry.pool_size == 3);  // a [users] entry without pool_size: the database's
    CHECK(per_entry.reserve_pool_size == 1);
}

TEST_CASE("a [users] entry's pool_size and reserve_pool_size win over database and defaults") {
    Config config;
    config.default_pool_size = 20;
    config.reserve_pool_size = 1;
    DatabaseConfig db;
    UserConfig user;
    struct Row {
        std::optional<int> db_pool, db_reserve, user_pool, user_reserve;
        int pool, reserve;
    };
    const Row rows[] = {
        {std::nullopt, std::nullopt, std::nullopt, std::nullopt, 20, 1},
        {5, 2, std::nullopt, std::nullopt, 5, 2},
        {5, 2, 3, std::nullopt, 3, 2},
        {std::nullopt, std::nullopt, 4, 0, 4, 0},
        {5, 2, 0, 3, 0, 3},  // 0 is a value (PgBouncer: a user's pool_size >= 0 wins)
    };
    for (const auto& r : rows) {
        db.pool_size = r.db_pool;
        db.reserve_pool_size = r.db_reserve;
        user.pool_size = r.user_pool;
        user.reserve_pool_size = r.user_reserve;
        auto s = resolve_pool_sizes(config, db, PoolMode::Transaction, &user);
        CHECK(s.pool_size == r.pool);
        CHECK(s.reserve_pool_size == r.reserve);
        CHECK(s.tether_reserve_size == r.pool);  // the allowance follows the pool's own size
    }
}

TEST_CASE("waiting clients are covered by idle, connecting and briefly lent servers") {
    struct Case {
        WaitingCover cover;
        std::size_t uncovered;
    };
    const Case cases[] = {
        {{0, 0, 0, 0}, 0},
        {{1, 0, 0, 0}, 1},  // nobody on the way: open one
        {{1, 1, 0, 0}, 0},  // one connecting
        {{1, 0, 1, 0}, 0},  // one idle (handed off next)
        {{1, 0, 0, 1}, 0},  // one lent to a catalog check: it comes back, no second backend
        {{3, 1, 0, 1}, 1},
        {{2, 0, 0, 5}, 0},
        {{5, 1, 1, 1}, 2},
    };
    for (const auto& c : cases) {
        CAPTURE(c.cover.waiting);
        CAPTURE(c.cover.connecting);
        CAPTURE(c.cover.idle);
        CAPTURE(c.cover.lent);
        CHECK(uncovered_waiting(c.cover) == c.uncovered);
    }
    // A lent server counts only while it is away briefly: a silent backend under a leak sweep
    // does not keep a client waiting for it.
    CHECK(lent_server_covers(0));
    CHECK(lent_server_covers(kLentServerGraceMs - 1));
    CHECK_FALSE(lent_server_covers(kLentServerGraceMs));
    CHECK_FALSE(lent_server_covers(10'000));
}
