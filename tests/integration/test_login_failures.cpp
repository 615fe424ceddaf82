// Failed and slow server logins as a current PgBouncer (1.22+) handles them: a failed login is
// forgotten when the operator changes what logins are made from (console SET, RELOAD); clients
// queued for a server are failed with the login error once no server can serve them (RECONNECT
// retired the only one); query_timeout runs while a client waits for a server that is slow to
// log in.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/private_postgres.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// The error a client of `conninfo` meets: at login, or at its first query.
std::string client_error(const std::string& conninfo) {
    Conn c(conninfo);
    if (!c.ok()) return c.error();
    return first_error(c.exec_all("SELECT 1")).describe();
}

}  // namespace

TEST_CASE("a failed server login is forgotten when the console or a reload changes its settings") {
    // server_tls_sslmode = require against the shared PostgreSQL, which has no TLS: every login
    // fails, and for server_login_retry (30 s) new clients get the remembered error at once.
    // Fixing the setting must let the next client in (PgBouncer connects with the new setting).
    const std::string role = private_role("pgt_loginfail_tls");
    PoolerConfig config = pool_config("transaction", 1,
                                      {{"server_tls_sslmode", "require"},
                                       {"server_login_retry", "30"},
                                       {"query_wait_timeout", "10"}});
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    Pgtether pooler(config);
    for (int i = 0; i < 2; ++i) {
        std::string error = client_error(pooler.conninfo(role));
        CAPTURE(error);
        CHECK((contains(error, "SSL") || contains(error, "TLS")));
    }
    SUBCASE("SET server_tls_sslmode = disable on the console") {
        Conn admin = console(pooler);
        PGT_REQUIRE_OK(admin.exec("SET server_tls_sslmode = disable"));
    }
    SUBCASE("RELOAD of a file that says disable") {
        PoolerConfig fixed = config;
        fixed.settings["server_tls_sslmode"] = "disable";
        pooler.reload(fixed);  // the file, and a SIGHUP that may come before or after RELOAD
        Conn admin = console(pooler);
        PGT_REQUIRE_OK(admin.exec("RELOAD"));
    }
    // At once, not after server_login_retry: the first client after the fix is served.
    Conn next(pooler.conninfo(role));
    REQUIRE_MESSAGE(next.ok(), next.error());
    auto r = next.exec("SELECT 'served'");
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == "served");
}

TEST_CASE("a failed login fails the queued clients when no server can serve them (RECONNECT)") {
    // PgBouncer >= 1.22: the server password changed (ALTER ROLE on a direct connection), the
    // only server busy with a pg_sleep, a client queued behind it; RECONNECT retires that server
    // and SET default_pool_size = 2 starts a login that fails with 28P01. The queued client gets
    // that error at once instead of waiting for the sleep (and then failing anyway).
    PrivatePostgres pg;
    const TestEnv& env = pg.env();
    const AuthUser& user = env.auth_user("scram-sha-256");
    PoolerConfig config = pool_config("transaction", 1,
                                      {{"server_login_retry", "30"},
                                       {"query_wait_timeout", "60"}});
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {env.superuser, ""}, {user.name, user.password}};
    Pgtether pooler(config, 10s, env);
    const std::string conninfo = pooler.conninfo(user.name, env.database, user.password);

    Conn sleeper = Conn::must(conninfo);
    send_query(sleeper, "SELECT pg_sleep(8)");
    Conn direct = Conn::must(direct_conninfo("", "", "", "", env));
    direct.exec_ok("ALTER ROLE " + user.name + " PASSWORD 'changed'");
    Conn queued = Conn::must(conninfo);  // the pool knows its greeting: no server needed
    send_query(queued, "SELECT 'queued'");
    Conn admin = console(pooler);
    auto waiting = [&] {
        auto pool = find_row(admin.exec("SHOW POOLS"), "user", user.name);
        return pool ? cell_int(*pool, "cl_waiting") : -1;
    };
    REQUIRE(eventually([&] { return waiting() == 1; }, 5s));
    PGT_REQUIRE_OK(admin.exec("RECONNECT"));
    PGT_REQUIRE_OK(admin.exec("SET default_pool_size = 2"));
    const auto started = std::chrono::steady_clock::now();
    auto results = wait_results(queued, 4s);
    REQUIRE_MESSAGE(results.has_value(), "the queued client still waits");
    const std::string error = first_error(*results).describe();
    CAPTURE(error);
    CHECK(contains(error, "28P01"));
    CHECK(contains(error, "password authentication failed"));
    CHECK(std::chrono::steady_clock::now() - started < 4s);
    // The sleeper is unaffected: its query completes on its (retired) server.
    auto slept = wait_result(sleeper, 15s);
    REQUIRE(slept.has_value());
    CHECK(slept->ok());
}

TEST_CASE("query_timeout applies while a client waits for a server that is slow to log in") {
    // PgBouncer's janitor applies query_timeout to every waiting client (CL_WAITING and
    // CL_WAITING_LOGIN). The server here accepts the connection and never answers (PostgreSQL
    // with pre_auth_delay behaves the same to the pooler): server_connect_timeout = 2 gives up
    // on each attempt and they are retried, so without query_timeout the client would wait for
    // client_login_timeout (60 s).
    SilentListener silent(16);
    PoolerConfig config = pool_config("transaction", 1,
                                      {{"query_timeout", "3"},
                                       {"server_connect_timeout", "2"},
                                       {"query_wait_timeout", "30"}});
    config.databases = {"slowlogin = host=127.0.0.1 port=" + std::to_string(silent.port()) +
                        " dbname=postgres"};
    Pgtether pooler(config);
    const auto started = std::chrono::steady_clock::now();
    Conn c(pooler.conninfo(TestEnv::get().superuser, "slowlogin", "", "connect_timeout=15"));
    const auto waited = std::chrono::steady_clock::now() - started;
    REQUIRE_FALSE(c.ok());
    CHECK_MESSAGE(contains(c.error(), "query_timeout"), c.error());
    CHECK(waited >= 2500ms);
    CHECK(waited < 6s);
}

TEST_CASE("query_timeout applies while a client is queued for a busy pool") {
    const std::string role = private_role("pgt_loginfail_queued");
    PoolerConfig config = pool_config("transaction", 1,
                                      {{"query_timeout", "2"}, {"query_wait_timeout", "30"}});
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    Pgtether pooler(config);
    Conn holder = Conn::must(pooler.conninfo(role));
    holder.exec_ok("BEGIN");
    Conn queued = Conn::must(pooler.conninfo(role));
    const auto started = std::chrono::steady_clock::now();
    send_query(queued, "SELECT 1");
    auto results = wait_results(queued, 6s);
    REQUIRE_MESSAGE(results.has_value(), "the queued client still waits");
    const std::string error = first_error(*results).describe();
    CHECK_MESSAGE(contains(error, "query_timeout"), error);
    CHECK(std::chrono::steady_clock::now() - started >= 1500ms);
    holder.exec_ok("ROLLBACK");
}
