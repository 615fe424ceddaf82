// core/fd_budget: the descriptors pgtether expects to use, its start-up lines, and the rate limit
// of "accept() failed: Too many open files".
#include <doctest/doctest.h>

#include "core/config.hpp"
#include "core/fd_budget.hpp"

using namespace pgtether;

namespace {

DatabaseConfig database(const std::string& name) {
    DatabaseConfig db;
    db.name = name;
    return db;
}

}  // namespace

TEST_CASE("expected_fd_use: PgBouncer's estimate plus reserve pools and workers") {
    Config config;
    config.max_client_conn = 2000;
    config.default_pool_size = 20;
    config.workers = 2;
    SUBCASE("no [databases] entry (only '*'): clients and overhead") {
        auto budget = expected_fd_use(config, 5);
        CHECK(budget.clients == 2000);
        CHECK(budget.servers == 0);
        CHECK(budget.overhead == 10 + 2 * 4);
        CHECK(budget.expected() == 2018);
    }
    SUBCASE("pool size times users; a forced user counts once; max_db_connections caps") {
        auto plain = database("app");
        auto forced = database("reports");
        forced.user = "reporter";
        forced.pool_size = 5;
        auto capped = database("big");
        capped.max_db_connections = 30;
        config.databases = {plain, forced, capped};
        config.reserve_pool_size = 2;
        // app: (20 + 2) x 3 users; reports: (5 + 2) once; big: min(66, 30).
        auto budget = expected_fd_use(config, 3);
        CHECK(budget.servers == 66 + 7 + 30);
    }
    SUBCASE("an empty auth_file counts as one user") {
        config.databases = {database("app")};
        CHECK(expected_fd_use(config, 0).servers == 20);
    }
}

TEST_CASE("fd_budget_line and fd_budget_warning") {
    Config config;
    config.max_client_conn = 100;
    FdBudget budget{100, 60, 14};
    CHECK(fd_budget_line(1024, 4096, config, budget) ==
          "kernel file descriptor limit: 1024 (hard: 4096); max_client_conn: 100, max expected "
          "fd use: 174");
    CHECK_FALSE(fd_budget_warning(174, budget).has_value());
    auto warning = fd_budget_warning(173, budget);
    REQUIRE(warning.has_value());
    CHECK(warning->find("file descriptor limit 173 is below the expected use of 174 (100 "
                        "clients, 60 server connections, 14 other)") == 0);
}

TEST_CASE("AcceptFailureReports: the first at once, then one line per 10 s with a count") {
    AcceptFailureReports reports;
    const std::string error = "Too many open files";
    auto first = reports.on_failure(1000, error);
    REQUIRE(first.has_value());
    CHECK(*first ==
          "accept() failed: Too many open files; not accepting new connections for "
          "100 ms");
    CHECK_FALSE(reports.on_failure(1100, error).has_value());
    CHECK_FALSE(reports.on_failure(10'999, error).has_value());
    auto later = reports.on_failure(11'000, error);
    REQUIRE(later.has_value());
    CHECK(later->find("accept() failed: Too many open files (2 more since the last report)") == 0);
    CHECK_FALSE(reports.on_failure(11'001, error).has_value());
    auto quiet = reports.on_failure(60'000, error);
    REQUIRE(quiet.has_value());
    CHECK(quiet->find("(1 more since") != std::string::npos);
}
