// Replication connections through pgtether (docs/session-state.md, "Replication connections"):
// a client that asks for replication=true/database gets a backend of its own, opened with its
// own start-up parameters, and the bytes pass both ways unread until either side leaves; the
// backend is then closed, never lent to anyone else. Driven with PostgreSQL's own replication
// clients (pg_basebackup, pg_receivewal) and with libpq's replication=database mode.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"
#include "tests/integration/support/tls_support.hpp"

using namespace pgtether::itest;

namespace {

// The replication clients' server connections never show under the test database, which other
// tests running in parallel count in pg_stat_activity.
PoolerConfig replication_pool(int size) {
    PoolerConfig config = pool_config("transaction", size, {{"log_disconnections", "1"}});
    config.databases = {isolated_database("*")};
    return config;
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

std::string tool(const std::string& name) { return quoted(TestEnv::get().pg_bin + "/" + name); }

std::string tool_connection(const Pgtether& pooler) {
    return " -h 127.0.0.1 -p " + std::to_string(pooler.port()) + " -U " +
           TestEnv::get().superuser + " -w";
}

// Backends of PostgreSQL whose application_name is `app`, by backend_type.
long long backends_named(const std::string& app, const std::string& type = "walsender") {
    Conn direct = Conn::must(direct_conninfo());
    Result r = direct.exec_params(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND backend_type = $2",
        {app, type});
    REQUIRE_MESSAGE(r.ok(), r.describe());
    return std::stoll(r.value());
}

}  // namespace

TEST_CASE("pg_basebackup and pg_receivewal work through pgtether") {
    // Small socket buffers (PgBouncer's suite runs so): they must be set before the handshake,
    // whose window scale depends on them, or the stream crawls (8 KB per 200 ms).
    PoolerConfig config = replication_pool(3);
    config.settings["tcp_socket_buffer"] = "4096";
    Pgtether pooler(config);
    TempDir out("pgt-replication", TestEnv::get().tmp_dir);

    // A whole base backup with its WAL streamed alongside: two replication connections at once,
    // BASE_BACKUP's archives and a CopyBoth stream through the same pooler.
    const std::string base = out.path() + "/base";
    run_command("timeout 60 " + tool("pg_basebackup") + tool_connection(pooler) + " -D " +
                quoted(base) + " -Ft -X stream -c fast --no-sync --no-manifest");
    CHECK(read_file(base + "/base.tar").size() > 1000000);
    CHECK(read_file(base + "/pg_wal.tar").size() > 0);

    // pg_receivewal streams WAL until it has reached the position it was told to stop at.
    Conn direct = Conn::must(direct_conninfo());
    const std::string stop = direct.exec_ok("SELECT pg_current_wal_lsn()").value();
    const std::string wal = out.path() + "/wal";
    run_command("mkdir -p " + quoted(wal));
    run_command("timeout 60 " + tool("pg_receivewal") + tool_connection(pooler) + " -D " +
                quoted(wal) + " -E " + stop + " -n --no-sync");
    CHECK(run_command("ls " + quoted(wal)).find("00000001") != std::string::npos);

    // Each replication backend was closed when its client left, never pooled.
    CHECK(eventually([&] { return backends_named("pg_receivewal") == 0; }));
    CHECK(pooler.wait_for_log("closing because: replication client disconnected"));
    CHECK(pooler.wait_for_log("replication=physical"));
}

TEST_CASE("replication=database: the client's own backend, its parameters, and SQL") {
    Pgtether pooler(replication_pool(2));
    Conn logical = Conn::must(pooler.conninfo(
        "", "postgres", "",
        "replication=database application_name=pgt_logical options='-c statement_timeout=4321'"));
    // The walsender's own commands and SQL both reach the backend.
    Result identify = logical.exec_ok("IDENTIFY_SYSTEM");
    CHECK(identify.columns.at(0) == "systemid");
    CHECK(identify.value(0, 3) == "postgres");  // dbname: the logical slot's database
    CHECK(logical.exec_ok("SHOW application_name").value() == "pgt_logical");
    CHECK(logical.exec_ok("SHOW statement_timeout").value() == "4321ms");
    CHECK(logical.exec_ok("SELECT 6 * 7").value() == "42");
    CHECK(logical.parameter("application_name") == "pgt_logical");
    CHECK(backends_named("pgt_logical") == 1);
    // A cancel with the key pgtether gave the client reaches its backend.
    REQUIRE(PQsendQuery(logical.raw(), "SELECT pg_sleep(30)") == 1);
    REQUIRE(eventually([&] {
        Conn direct = Conn::must(direct_conninfo());
        return direct
                   .exec_ok("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                            "'pgt_logical' AND state = 'active' AND query LIKE 'SELECT pg_sleep%'")
                   .value() == "1";
    }));
    PGcancel* cancel = PQgetCancel(logical.raw());
    REQUIRE(cancel != nullptr);
    char errbuf[256] = {};
    CHECK(PQcancel(cancel, errbuf, sizeof errbuf) == 1);
    PQfreeCancel(cancel);
    auto cancelled = wait_result(logical, 10s);
    REQUIRE(cancelled.has_value());
    CHECK(cancelled->sqlstate == "57014");

    // SHOW CLIENTS and SHOW SERVERS say which kind of replication each connection is.
    Conn admin = console(pooler);
    auto client = find_row(admin.exec_ok("SHOW CLIENTS"), "application_name", "pgt_logical");
    REQUIRE(client.has_value());
    CHECK(cell(*client, "replication") == "logical");
    CHECK(cell(*client, "state") == "active");
    auto server = find_row(admin.exec_ok("SHOW SERVERS"), "replication", "logical");
    REQUIRE(server.has_value());
    CHECK(cell(*server, "state") == "active");

    // A physical walsender takes no SQL: PostgreSQL's own error reaches the client unchanged.
    Conn physical = Conn::must(
        pooler.conninfo("", "postgres", "", "replication=true application_name=pgt_physical"));
    CHECK(physical.exec_ok("IDENTIFY_SYSTEM").columns.size() == 4);
    Result sql = physical.exec("SELECT 1");
    REQUIRE(sql.is_error());
    CHECK(sql.message.find("cannot execute SQL commands in WAL sender for physical replication") !=
          std::string::npos);
    CHECK(physical.exec_ok("IDENTIFY_SYSTEM").rows.size() == 1);  // still usable

    logical.close();
    physical.close();
    CHECK(eventually([&] {
        return backends_named("pgt_logical") == 0 && backends_named("pgt_physical") == 0;
    }));
}

TEST_CASE("replication start-up refusals") {
    Pgtether pooler(replication_pool(2));
    SUBCASE("a role without REPLICATION: PostgreSQL's refusal, PgBouncer's log") {
        const AuthUser& user = TestEnv::get().auth_user("scram-sha-256");
        Conn conn(pooler.conninfo(user.name, "postgres", user.password, "replication=true"));
        REQUIRE_FALSE(conn.ok());
        CHECK(conn.error().find("server login failed: ") != std::string::npos);
        CHECK(conn.error().find("replication") != std::string::npos);
        CHECK(pooler.wait_for_log("closing because: login failed (age="));
        // Ordinary clients of the same pool are not held back by it.
        Conn plain = Conn::must(pooler.conninfo(user.name, "postgres", user.password));
        CHECK(plain.exec_ok("SELECT 1").value() == "1");
    }
    SUBCASE("an invalid replication value: PostgreSQL's FATAL, word for word") {
        Conn conn(pooler.conninfo("", "postgres", "", "replication=sometimes"));
        REQUIRE_FALSE(conn.ok());
        CHECK(conn.error().find("invalid value for parameter \"replication\": \"sometimes\"") !=
              std::string::npos);
    }
    SUBCASE("replication=false is an ordinary client") {
        Conn conn = Conn::must(pooler.conninfo("", "postgres", "", "replication=false"));
        CHECK(conn.exec_ok("SELECT 1").value() == "1");
    }
    SUBCASE("the admin console takes no replication connection") {
        Conn conn(pooler.conninfo("", "pgbouncer", "", "replication=database"));
        REQUIRE_FALSE(conn.ok());
        CHECK(conn.error().find("not supported") != std::string::npos);
    }
}

TEST_CASE("a replication client evicts an idle server of a full pool") {
    Pgtether pooler(replication_pool(1));
    Conn plain = Conn::must(pooler.conninfo("", "postgres", "", "application_name=pgt_plain"));
    CHECK(plain.exec_ok("SELECT 1").value() == "1");  // the pool's one server, now idle
    Conn repl = Conn::must(
        pooler.conninfo("", "postgres", "", "replication=database application_name=pgt_evict"));
    CHECK(repl.exec_ok("IDENTIFY_SYSTEM").rows.size() == 1);
    // With one worker the pool's own idle server goes; with two, the other worker's may lend
    // its slot instead.
    if (workers_in_this_run() == 1) CHECK(pooler.wait_for_log("closing because: evicted"));

    // The ordinary client waits for a slot while the replication client holds it, and gets one
    // as soon as the replication client leaves.
    REQUIRE(PQsendQuery(plain.raw(), "SELECT 2") == 1);
    std::this_thread::sleep_for(300ms);
    REQUIRE(PQconsumeInput(plain.raw()) == 1);
    CHECK(PQisBusy(plain.raw()) == 1);  // no answer yet: it waits
    repl.close();
    auto result = wait_result(plain, 10s);
    REQUIRE(result.has_value());
    CHECK(result->value() == "2");
}

TEST_CASE("a replication backend goes when pgtether closes it") {
    Pgtether pooler(replication_pool(2));
    Conn repl = Conn::must(
        pooler.conninfo("", "postgres", "", "replication=database application_name=pgt_kill"));
    CHECK(repl.exec_ok("IDENTIFY_SYSTEM").rows.size() == 1);
    // The backend is terminated from outside: the client sees PostgreSQL's own FATAL.
    Conn direct = Conn::must(direct_conninfo());
    direct.exec_ok("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE application_name = 'pgt_kill'");
    // Once it has gone, its FATAL is there to read (libpq hands an error that came while idle to
    // the notice receiver), as on a direct connection.
    REQUIRE(eventually([&] { return backends_named("pgt_kill") == 0; }));
    (void)PQconsumeInput(repl.raw());
    (void)PQisBusy(repl.raw());  // parses what was read
    auto notices = repl.take_notices();
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].sqlstate == "57P01");
    CHECK(notices[0].message == "terminating connection due to administrator command");
    CHECK(repl.exec("IDENTIFY_SYSTEM").is_error());

    // RECONNECT closes it too, with pgtether's reason.
    Conn again = Conn::must(
        pooler.conninfo("", "postgres", "", "replication=database application_name=pgt_kill"));
    CHECK(again.exec_ok("IDENTIFY_SYSTEM").rows.size() == 1);
    Conn admin = console(pooler);
    admin.exec_ok("RECONNECT");
    CHECK(eventually([&] { return backends_named("pgt_kill") == 0; }));
    Result gone = again.exec("IDENTIFY_SYSTEM");
    CHECK(gone.is_error());
}


