// PostgreSQL stopped and restarted under pgtether (a private PostgreSQL, so tests running in
// parallel on the shared one are not disturbed): while it is down clients get a clear connection
// error and pgtether keeps running; once it is back, old and new clients work again.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

TEST_CASE("a quick restart: queued clients are served as soon as PostgreSQL is back") {
    // PgBouncer waits server_login_retry (15 s by default) after a failed login, whatever the
    // cause. A server that refused the connection because it was restarting is retried within
    // a second instead (core/login_retry.hpp), and the clients that queued meanwhile are served,
    // not failed: server_login_retry and query_wait_timeout are far above the outage here.
    PrivatePostgres pg;
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"server_login_retry", "30"},
                       {"query_wait_timeout", "60"}};
    config.databases = {"* = host=" + pg.env().pg_host + " port=" + std::to_string(pg.port())};
    config.extra_args = {"-v"};
    Pgtether pooler(config, 10s, pg.env());
    {
        Conn setup = Conn::must(pooler.conninfo("", "postgres"));
        setup.exec_ok("CREATE TABLE restart_commits (n int)");
    }
    // Two backends idle in the pool, and clients idle between transactions.
    std::vector<Conn> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(Conn::must(pooler.conninfo("", "postgres")));
    PGT_REQUIRE_OK(clients[0].exec("BEGIN"));
    PGT_REQUIRE_OK(clients[1].exec("BEGIN"));
    PGT_REQUIRE_OK(clients[0].exec("COMMIT"));
    PGT_REQUIRE_OK(clients[1].exec("COMMIT"));

    pg.stop();
    // While it is down: the idle clients send their next transactions, and a new client logs in
    // (the pool knows the greeting) and sends one too. They wait.
    clients.push_back(Conn::must(pooler.conninfo("", "postgres")));
    for (std::size_t i = 0; i < clients.size(); ++i) {
        send_query(clients[i], "INSERT INTO restart_commits VALUES (" + std::to_string(i) + ")");
    }
    std::this_thread::sleep_for(300ms);  // a few failed logins
    for (auto& client : clients) CHECK_FALSE(wait_result(client, 0ms).has_value());

    pg.start();
    const auto back = std::chrono::steady_clock::now();
    std::chrono::milliseconds first_commit{0};
    for (auto& client : clients) {
        auto result = wait_result(client, 20s);
        REQUIRE(result.has_value());
        CHECK_MESSAGE(result->ok(), result->describe());
        if (result->ok() && first_commit.count() == 0) {
            first_commit = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - back);
        }
    }
    MESSAGE("first commit " << first_commit.count() << " ms after PostgreSQL was back");
    // Far below server_login_retry (30 s here; PgBouncer would wait all of it). Generous: the
    // machine running the tests may be loaded; the retry itself comes within a second.
    CHECK(first_commit < 10s);
    Conn check = Conn::must(pooler.conninfo("", "postgres"));
    CHECK(scalar(check, "SELECT count(*) FROM restart_commits") == std::to_string(clients.size()));
    CHECK(pooler.wait_for_log("server login failed"));
}

TEST_CASE("a refused login still waits server_login_retry, and its clients fail at once") {
    // Authentication failures need an operator: no quick retries, and the clients get the error.
    const TestEnv& env = TestEnv::get();
    const AuthUser& user = env.auth_user("md5");
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"auth_type", "trust"},
                       {"server_login_retry", "30"},
                       {"query_wait_timeout", "60"}};
    // The pool logs in to PostgreSQL with a wrong password.
    config.databases = {"wrongpw = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
                        " dbname=" + env.database + " user=" + user.name + " password=wrong"};
    config.extra_args = {"-v"};
    Pgtether pooler(config);
    for (int i = 0; i < 3; ++i) {
        auto started = std::chrono::steady_clock::now();
        Conn c(pooler.conninfo(user.name, "wrongpw"));
        std::string error = c.ok() ? first_error(c.exec_all("SELECT 1")).describe() : c.error();
        CAPTURE(error);
        CHECK(error.find("password authentication failed") != std::string::npos);
        CHECK(std::chrono::steady_clock::now() - started < 8s);
    }
    // One login attempt only (per worker: each worker's share of the pool remembers its own):
    // the later clients were failed from the remembered error.
    const std::string log = pooler.log();
    const std::string server_line = "/" + user.name + ": server login failed";
    std::size_t attempts = 0;
    for (auto pos = log.find(server_line); pos != std::string::npos;
         pos = log.find(server_line, pos + 1)) {
        ++attempts;
    }
    CHECK(attempts >= 1);
    CHECK(attempts <= static_cast<std::size_t>(workers_in_this_run()));
}
