// The timeouts of a pool's clients (core/client_timeouts.hpp): the global values, a [users]
// entry's query_timeout / idle_transaction_timeout / client_idle_timeout when > 0, and
// query_wait_timeout from the user's entry, else the database's, else the global one.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>

#include "core/client_timeouts.hpp"

using namespace pgtether;
using namespace std::chrono_literals;

TEST_CASE("client timeouts: a user's positive value overrides; 0 keeps the global one") {
    Config config;
    config.query_timeout = 30s;
    config.idle_transaction_timeout = 20s;
    config.client_idle_timeout = 0s;
    UserConfig user;
    CHECK(resolve_client_timeouts(config, nullptr, &user) ==
          resolve_client_timeouts(config, nullptr, nullptr));
    user.query_timeout = 5s;
    user.idle_transaction_timeout = Duration{0};  // PgBouncer: only > 0 overrides
    user.client_idle_timeout = 7s;
    config.transaction_timeout = 60s;
    user.transaction_timeout = 9s;
    auto t = resolve_client_timeouts(config, nullptr, &user);
    CHECK(t.transaction_timeout == 9s);
    CHECK(t.query_timeout == 5s);
    CHECK(t.idle_transaction_timeout == 20s);
    CHECK(t.client_idle_timeout == 7s);
    CHECK(t.query_wait_timeout == config.query_wait_timeout);
}

TEST_CASE("client timeouts: query_wait_timeout from the user, else the database, else global") {
    Config config;
    config.query_wait_timeout = 120s;
    DatabaseConfig db;
    UserConfig user;
    struct Row {
        std::optional<Duration> db_value;
        std::optional<Duration> user_value;
        Duration expected;
    };
    const Row rows[] = {
        {std::nullopt, std::nullopt, 120s},
        {10s, std::nullopt, 10s},
        {10s, 3s, 3s},
        {std::nullopt, Duration{0}, Duration{0}},  // 0: no limit, a value of its own
        {10s, -1s, 10s},                           // -1: not set (PgBouncer 1.26's spelling)
        {-1s, -1s, 120s},
        {Duration{0}, std::nullopt, Duration{0}},
    };
    for (const auto& r : rows) {
        db.query_wait_timeout = r.db_value;
        user.query_wait_timeout = r.user_value;
        CHECK(resolve_client_timeouts(config, &db, &user).query_wait_timeout == r.expected);
    }
    db.query_wait_timeout = 10s;
    CHECK(resolve_client_timeouts(config, &db, nullptr).query_wait_timeout == 10s);
}
