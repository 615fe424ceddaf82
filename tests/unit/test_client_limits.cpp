// Client connection limits per database and per user (core/client_limits.hpp): which limit
// applies, and which arrival is refused with which of PgBouncer's texts.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "core/client_limits.hpp"

using namespace pgtether;

TEST_CASE("client limits: an entry's own value > 0 wins, else the global one") {
    Config config;
    config.max_db_client_connections = 50;
    config.max_user_client_connections = 7;
    DatabaseConfig db;
    UserConfig user;
    struct Row {
        std::optional<int> db_own;
        std::optional<int> user_own;
        ClientLimits expected;
    };
    const Row rows[] = {
        {std::nullopt, std::nullopt, {50, 7}},
        {3, std::nullopt, {3, 7}},
        {std::nullopt, 2, {50, 2}},
        {0, 0, {50, 7}},  // PgBouncer: <= 0 in an entry means "the global one", not "none"
        {9, 4, {9, 4}},
    };
    for (const auto& row : rows) {
        db.max_db_client_connections = row.db_own;
        user.max_user_client_connections = row.user_own;
        CHECK(resolve_client_limits(config, &db, &user) == row.expected);
    }
    CHECK(resolve_client_limits(config, nullptr, nullptr) == ClientLimits{50, 7});
    CHECK(resolve_client_limits(Config{}, nullptr, nullptr) == ClientLimits{0, 0});
}

TEST_CASE("client limits: the arrival that passes a limit is refused, the database one first") {
    const std::string db_text = "client connections exceeded (max_db_client_connections)";
    const std::string user_text = "client connections exceeded (max_user_client_connections)";
    struct Row {
        ClientLimits limits;
        int db_clients;
        int user_clients;
        std::optional<std::string> expected;
    };
    const Row rows[] = {
        {{0, 0}, 1000, 1000, std::nullopt},  // 0: unlimited
        {{2, 0}, 2, 99, std::nullopt},       // the newcomer is counted: 2 of 2 is allowed
        {{2, 0}, 3, 1, db_text},
        {{0, 1}, 5, 1, std::nullopt},
        {{0, 1}, 5, 2, user_text},
        {{2, 1}, 3, 2, db_text},  // both over: the database's text, as PgBouncer checks it first
        {{2, 1}, 2, 2, user_text},
    };
    for (const auto& row : rows) {
        CHECK(client_limit_refusal(row.limits, row.db_clients, row.user_clients) ==
              row.expected);
    }
}
