// PostgreSQL stopped and restarted under pgtether (a private PostgreSQL, so tests running in
// parallel on the shared one are not disturbed): while it is down clients get a clear connection
// error and pgtether keeps running; once it is back, old and new clients work again.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/private_postgres.hpp"

using namespace pgtether::itest;

TEST_CASE("PostgreSQL stopped and restarted under pgtether") {
    PrivatePostgres pg;
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"server_login_retry", "0.5"},
                       {"query_wait_timeout", "10"}};
    config.databases = {"* = host=" + pg.env().pg_host + " port=" + std::to_string(pg.port())};
    config.extra_args = {"-v"};
    Pgtether pooler(config, 10s, pg.env());

    Conn idle_client = Conn::must(pooler.conninfo("", "postgres"));
    CHECK(scalar(idle_client, "SELECT 'up'") == "up");
    Conn in_transaction = Conn::must(pooler.conninfo("", "postgres"));
    PGT_REQUIRE_OK(in_transaction.exec("BEGIN"));
    CHECK(scalar(in_transaction, "SELECT 1") == "1");

    pg.stop();

    // The client whose transaction was cut off hears about it.
    Result cut = first_error(in_transaction.exec_all("SELECT 1"));
    CHECK_MESSAGE(cut.is_error(), cut.describe());
    // A client between transactions gets a clear error for its next query, quickly (the pool
    // knows logins are failing) and not a hang.
    for (int i = 0; i < 3; ++i) {
        auto started = std::chrono::steady_clock::now();
        Conn c(pooler.conninfo("", "postgres"));
        std::string error;
        if (c.ok()) {
            Result r = first_error(c.exec_all("SELECT 1"));
            CHECK(r.is_error());
            error = r.describe();
        } else {
            error = c.error();
        }
        CAPTURE(error);
        CHECK((error.find("08006") != std::string::npos ||
               error.find("could not connect") != std::string::npos ||
               error.find("connection") != std::string::npos));
        CHECK(std::chrono::steady_clock::now() - started < 8s);
        std::this_thread::sleep_for(300ms);
    }
    Result idle_error = first_error(idle_client.exec_all("SELECT 1"));
    CHECK(idle_error.is_error());
    REQUIRE(pooler.running());

    pg.start();

    // New clients work again once a login succeeds (after server_login_retry at most).
    CHECK(eventually(
        [&] {
            Conn c(pooler.conninfo("", "postgres"));
            return c.ok() && c.exec("SELECT 'back'").ok();
        },
        15s));
    Conn after = Conn::must(pooler.conninfo("", "postgres"));
    CHECK(scalar(after, "SELECT 'back'") == "back");
    // Two at once: the pool is rebuilt to full size.
    Conn second = Conn::must(pooler.conninfo("", "postgres"));
    PGT_REQUIRE_OK(after.exec("BEGIN"));
    PGT_REQUIRE_OK(second.exec("BEGIN"));
    CHECK(scalar(after, "SELECT pg_backend_pid()") != scalar(second, "SELECT pg_backend_pid()"));
    CHECK(pooler.running());
}
