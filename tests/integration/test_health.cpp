// GET /healthz and GET /readyz on the metrics port (docs/admin.md, "Health endpoints"): real HTTP
// requests over sockets against a real pgtether in front of the test PostgreSQL, through PAUSE,
// DISABLE, a database whose server is down, and both kinds of shutdown.
#include <doctest/doctest.h>

#include <signal.h>

#include <string>
#include <thread>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

// The test database, and "dead": a database entry whose server port nobody listens on.
MetricsPooler start_pooler(int dead_port, const std::string& login_retry = "15") {
    const auto& env = TestEnv::get();
    PoolerConfig config;
    config.databases = {
        isolated_database(env.database),
        "dead = host=127.0.0.1 port=" + std::to_string(dead_port) + " dbname=postgres"};
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"server_login_retry", login_retry}};
    return start_with_metrics(config);
}

HttpReply get(int port, const std::string& path) {
    return http_get("127.0.0.1", port, path);
}

}  // namespace

TEST_CASE("healthz answers while the loop runs; readyz follows PAUSE, RESUME and DISABLE") {
    auto started = start_pooler(free_port());
    Pgtether& pooler = *started.pooler;
    const int port = started.port;
    const auto& env = TestEnv::get();

    auto health = get(port, "/healthz");
    CHECK(health.status == 200);
    CHECK(health.body == "ok\n");
    CHECK(health.headers["content-type"] == "text/plain; charset=utf-8");
    // The dead database has not been used yet: nothing says it is down.
    auto ready = get(port, "/readyz");
    CHECK(ready.status == 200);
    CHECK(ready.body == "ready\n");
    auto head = http_exchange("127.0.0.1", port, "HEAD /readyz HTTP/1.1\r\n\r\n");
    CHECK(head.status == 200);
    CHECK(head.body.empty());

    Conn client = Conn::must(pooler.conninfo("", env.database));
    CHECK(scalar(client, "SELECT 1") == "1");
    CHECK(get(port, "/readyz").status == 200);

    Conn admin = console(pooler);
    PGT_REQUIRE_OK(admin.exec("PAUSE"));
    auto paused = get(port, "/readyz");
    CHECK(paused.status == 503);
    CHECK(paused.body == "paused (PAUSE): clients wait for RESUME\n");
    CHECK(get(port, "/healthz").status == 200);
    PGT_REQUIRE_OK(admin.exec("RESUME"));
    CHECK(get(port, "/readyz").status == 200);

    PGT_REQUIRE_OK(admin.exec("DISABLE dead"));
    auto disabled = get(port, "/readyz");
    CHECK(disabled.status == 503);
    CHECK(disabled.body == "database \"dead\" disabled (DISABLE)\n");
    PGT_REQUIRE_OK(admin.exec("ENABLE dead"));
    CHECK(get(port, "/readyz").status == 200);
    CHECK(scalar(client, "SELECT 2") == "2");
}

TEST_CASE("readyz names a database whose server cannot be reached, until server_login_retry") {
    const int dead_port = free_port();
    auto started = start_pooler(dead_port, "3");
    Pgtether& pooler = *started.pooler;
    const int port = started.port;
    CHECK(get(port, "/readyz").status == 200);

    // A client of the dead database waits up to server_login_retry for its server, then fails;
    // meanwhile and for server_login_retry after the pool's last attempt, readyz says why.
    std::thread client([&] { CHECK_FALSE(Conn(pooler.conninfo("", "dead")).ok()); });
    HttpReply during;
    CHECK(eventually([&] {
        during = get(port, "/readyz");
        return during.status == 503;
    }));
    client.join();
    auto after = get(port, "/readyz");
    CHECK(after.status == 503);
    CAPTURE(after.body);
    CHECK(after.body.rfind("database \"dead\" unreachable: server logins failing for ", 0) == 0);
    CHECK(after.body.find("connection refused") != std::string::npos);
    // The other database is unaffected and named nowhere.
    CHECK(after.body.find(TestEnv::get().database) == std::string::npos);
    Conn fine = Conn::must(pooler.conninfo("", TestEnv::get().database));
    CHECK(scalar(fine, "SELECT 1") == "1");
    // No probe opens connections: with no client asking, the failure is forgotten after
    // server_login_retry and the instance is ready again.
    CHECK(eventually([&] { return get(port, "/readyz").status == 200; }, 8s));
}

TEST_CASE("during shutdown readyz answers 503 and healthz 200 until the process exits") {
    const auto& env = TestEnv::get();
    SUBCASE("SIGTERM (WAIT_FOR_CLIENTS)") {
        auto started = start_pooler(free_port());
        Pgtether& pooler = *started.pooler;
        const int port = started.port;
        Conn client = Conn::must(pooler.conninfo("", env.database));
        REQUIRE(kill(pooler.pid(), SIGTERM) == 0);
        REQUIRE(pooler.wait_for_log("got SIGTERM"));
        auto ready = get(port, "/readyz");
        CHECK(ready.status == 503);
        CHECK(ready.body ==
              "shutting down (WAIT_FOR_CLIENTS): no new clients, waiting for connected ones to "
              "leave\n");
        CHECK(get(port, "/healthz").status == 200);
        CHECK(scalar(client, "SELECT 'still served'") == "still served");
        client.close();
        CHECK(eventually([&] { return !pooler.running(); }, 10s));
        CHECK(get(port, "/healthz").status == 0);  // gone: connection refused
    }
    SUBCASE("SHUTDOWN WAIT_FOR_SERVERS with a transaction open") {
        auto started = start_pooler(free_port());
        Pgtether& pooler = *started.pooler;
        const int port = started.port;
        Conn in_tx = Conn::must(pooler.conninfo("", env.database));
        PGT_REQUIRE_OK(in_tx.exec("BEGIN"));
        Conn between = Conn::must(pooler.conninfo("", env.database));
        PGT_REQUIRE_OK(between.exec("SELECT 1"));
        Conn admin = console(pooler);
        (void)admin.exec("SHUTDOWN WAIT_FOR_SERVERS");
        REQUIRE(pooler.wait_for_log("shutting down"));
        // A client between transactions stays until it starts one, which is refused in
        // PgBouncer's words (and at its moment); the open transaction goes on.
        CHECK_FALSE(between.exec("SELECT 1").ok());
        CHECK(pooler.wait_for_log("closing because: server shutting down"));
        CHECK(scalar(in_tx, "SELECT 'still in the transaction'") == "still in the transaction");
        auto ready = get(port, "/readyz");
        CHECK(ready.status == 503);
        CHECK(ready.body == "shutting down: no new clients\n");
        CHECK(get(port, "/healthz").status == 200);
        PGT_CHECK_OK(in_tx.exec("COMMIT"));
        CHECK(eventually([&] { return !pooler.running(); }, 10s));
    }
}
