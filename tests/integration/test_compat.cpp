// PgBouncer drop-in behaviour that its own test suite checks (issue "A true drop-in"; the suite
// itself runs with tests/compat/pgbouncer_suite.sh): host lists, the admin console login as
// "pgbouncer" from pgtether's own OS user, idle_transaction_timeout, server_fast_close, SHOW
// VERSION / SOCKETS / FDS, and PgBouncer's log phrases.
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

std::string pg_port() {
    return std::to_string(TestEnv::get().pg_port);
}

// Connects to the console of `pooler` over its Unix socket as "pgbouncer" without a password,
// from a child process running as `uid`/`gid` (or as ourselves when nullopt), and runs SHOW FDS
// there (admins only). The child's exit status: 0 logged in and admin, 1 login refused, 2 logged
// in without admin rights.
int console_login_from(const PoolerProcess& pooler, std::optional<DaemonUser> as) {
    std::string conninfo = "host=" + pooler.dir() + " port=" + std::to_string(pooler.port()) +
                           " user=pgbouncer dbname=pgbouncer connect_timeout=10";
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (as && (setgid(as->gid) != 0 || setuid(as->uid) != 0)) _exit(3);
        PGconn* conn = PQconnectdb(conninfo.c_str());
        if (PQstatus(conn) != CONNECTION_OK) _exit(1);
        PGresult* r = PQexec(conn, "SHOW FDS");
        int status = PQresultStatus(r) == PGRES_TUPLES_OK ? 0 : 2;
        PQclear(r);
        PQfinish(conn);
        _exit(status);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_line_of_command(const std::string& command) {
    std::string out;
    if (FILE* pipe = popen(command.c_str(), "r")) {
        char buf[512];
        if (fgets(buf, sizeof buf, pipe)) out = buf;
        pclose(pipe);
    }
    while (!out.empty() && out.back() == '\n')
        out.pop_back();
    return out;
}

}  // namespace

TEST_CASE("host lists: new server connections go to the listed hosts in turn") {
    const auto& env = TestEnv::get();
    // One worker: the turn through the list is per worker's share of the pool, and a and b must
    // take consecutive turns of one.
    PoolerConfig config = pool_config("transaction", 2, {{"workers", "1"}});
    // The same PostgreSQL twice, over its Unix socket and over TCP, so the two are told apart.
    config.databases = {"hl = host=" + env.pg_socket_dir + "," + env.pg_host +
                        " port=" + pg_port() + " dbname=postgres"};
    Pgtether pooler(config);
    Conn a = Conn::must(pooler.conninfo("", "hl"));
    Conn b = Conn::must(pooler.conninfo("", "hl"));
    a.exec_ok("BEGIN");
    b.exec_ok("BEGIN");  // both hold a server: two new connections, one per host
    const std::string over_unix =
        "SELECT client_addr IS NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()";
    std::set<std::string> transports = {scalar(a, over_unix), scalar(b, over_unix)};
    CHECK(transports == std::set<std::string>{"t", "f"});
    CHECK(pooler.wait_for_log("hl/postgres@unix:" + env.pg_socket_dir + "/.s.PGSQL." + pg_port() +
                              " new connection to server"));
    CHECK(pooler.wait_for_log("hl/postgres@" + env.pg_host + ":" + pg_port() +
                              " new connection to server (from "));
    a.exec_ok("COMMIT");
    b.exec_ok("COMMIT");
    // SHOW DATABASES shows the list as written.
    Conn admin = console(pooler);
    auto row = find_row(admin.exec("SHOW DATABASES"), "name", "hl");
    REQUIRE(row);
    CHECK(cell(*row, "host") == env.pg_socket_dir + "," + env.pg_host);
}

TEST_CASE("host lists: an empty name in the list is a configuration error") {
    PoolerConfig config = pool_config("transaction", 2);
    config.databases = {"bad = host=127.0.0.1,,::1 port=" + pg_port()};
    bool started = true;
    try {
        Pgtether pooler(config, 3s);
    } catch (const std::exception& e) {
        started = false;
    }
    CHECK_FALSE(started);
}

TEST_CASE("admin console: user pgbouncer over the Unix socket from pgtether's own OS user") {
    // md5 and no "pgbouncer" in admin_users: only PgBouncer's own-user rule can let it in.
    PoolerConfig config = pool_config("transaction", 2, {{"auth_type", "md5"}});
    Pgtether pooler(config);
    CHECK(console_login_from(pooler, daemon_user()) == 0);
    CHECK(pooler.wait_for_log("pgbouncer access from unix socket"));
    if (daemon_user()) {
        // We are root, pgtether runs as the daemon user: another OS user needs a password.
        CHECK(console_login_from(pooler, std::nullopt) == 1);
    }
    // Over TCP the rule never applies.
    Conn tcp(pooler.conninfo("pgbouncer", "pgbouncer"));
    CHECK_FALSE(tcp.ok());
}

TEST_CASE("idle_transaction_timeout counts only the time a client is idle in a transaction") {
    Pgtether pooler(pool_config("transaction", 2, {{"idle_transaction_timeout", "1"}}));
    Conn conn = Conn::must(pooler.conninfo());
    conn.exec_ok("BEGIN");
    // A query that runs longer than the timeout is query_timeout's business, not this one's.
    PGT_CHECK_OK(conn.exec("SELECT pg_sleep(1.6)"));
    PGT_CHECK_OK(conn.exec("SELECT 1"));
    std::this_thread::sleep_for(2500ms);
    CHECK_FALSE(conn.exec("SELECT 1").ok());
    CHECK(pooler.wait_for_log("closing because: idle transaction timeout"));
}

TEST_CASE("server_fast_close: RECONNECT closes a session client's server between transactions") {
    for (bool fast_close : {false, true}) {
        CAPTURE(fast_close);
        Pgtether pooler(pool_config("session", 2, {{"server_fast_close", fast_close ? "1" : "0"}}));
        Conn conn = Conn::must(pooler.conninfo());
        auto pid = scalar(conn, "SELECT pg_backend_pid()");
        Conn admin = console(pooler);
        PGT_REQUIRE_OK(admin.exec("RECONNECT"));
        std::this_thread::sleep_for(500ms);
        if (fast_close) {
            CHECK_FALSE(conn.exec("SELECT 1").ok());
            CHECK(pooler.wait_for_log("closing because: database configuration changed"));
        } else {
            // Without it the session keeps its server until it ends.
            CHECK(scalar(conn, "SELECT pg_backend_pid()") == pid);
        }
    }
}

TEST_CASE("SHOW VERSION is --version's first line; SOCKETS and FDS list every socket") {
    // Their headers are compared with PgBouncer's in test_admin_console.cpp.
    const auto& env = TestEnv::get();
    Pgtether pgtether(pool_config("transaction", 2));
    Conn ours = console(pgtether);
    CHECK(scalar(ours, "SHOW VERSION") == first_line_of_command(env.pgtether_bin + " --version"));
    Conn a = Conn::must(pgtether.conninfo());
    a.exec_ok("SELECT 1");
    auto sockets = ours.exec("SHOW SOCKETS");
    CHECK(find_row(sockets, "state", "cl_active"));
    CHECK(find_row(sockets, "state", "sv_idle"));
    auto fds = ours.exec("SHOW FDS");
    CHECK(find_row(fds, "task", "pooler"));
    CHECK(find_row(fds, "task", "client"));
    CHECK(find_row(fds, "task", "server"));
    // Passwords never leave pgtether.
    for (const auto& row : named_rows(fds))
        CHECK_FALSE(row.at("password").has_value());
}

TEST_CASE("PgBouncer's log phrases, with pgtether's detail after them") {
    const auto& env = TestEnv::get();
    PoolerConfig config = pool_config("transaction", 2);
    config.databases = {isolated_database("known")};
    Pgtether pooler(config);
    // An unknown user with auth_type = trust and an auth_file.
    CHECK_FALSE(Conn(pooler.conninfo("nosuchuser1", "known")).ok());
    CHECK(pooler.wait_for_log("no such user: nosuchuser1"));
    CHECK(pooler.wait_for_log("closing because: \"trust\" authentication failed (age="));
    // An unknown database: PgBouncer's words to the client (with 3D000) and in the log.
    RawConn raw(pooler.host(), pooler.port());
    auto refusal = raw.startup("postgres", "nosuchdb1");
    CHECK(wire::first_error_sqlstate(refusal) == std::optional<std::string>("3D000"));
    Conn nodb(pooler.conninfo("", "nosuchdb1"));
    CHECK_FALSE(nodb.ok());
    CHECK(nodb.error().find("no such database: nosuchdb1") != std::string::npos);
    CHECK(pooler.wait_for_log("closing because: no such database: nosuchdb1"));
    // New server connections, and a client that goes without Terminate or with it.
    {
        Conn conn = Conn::must(pooler.conninfo("", "known"));
        conn.exec_ok("SELECT 1");
        CHECK(pooler.wait_for_log("known/postgres@" + env.pg_host + ":" + pg_port() +
                                  " new connection to server (from 127.0.0.1:"));
    }
    CHECK(pooler.wait_for_log("closing because: client close request (age="));
    // DISABLE: PgBouncer's message to the client.
    Conn admin = console(pooler);
    PGT_REQUIRE_OK(admin.exec("DISABLE known"));
    Conn disabled(pooler.conninfo("", "known"));
    CHECK(disabled.error().find("database \"known\" is disabled") != std::string::npos);
    PGT_REQUIRE_OK(admin.exec("ENABLE known"));
    // RECONNECT closes the server: "closing because" with the age, then the backend.
    PGT_REQUIRE_OK(admin.exec("RECONNECT known"));
    CHECK(pooler.wait_for_log(") backend pid "));
}

TEST_CASE("auto-databases are logged as PgBouncer logs them") {
    PoolerConfig config = pool_config("transaction", 2);
    config.databases = {isolated_database("*")};
    Pgtether pooler(config);
    Conn conn = Conn::must(pooler.conninfo("", "someauto"));
    conn.exec_ok("SELECT 1");
    CHECK(pooler.wait_for_log("registered new auto-database: db=someauto"));
}

TEST_CASE("autodb_idle_timeout: an auto-database without clients or servers is dropped") {
    // PgBouncer's janitor drops a database the "*" entry made once it has had no client and no
    // server for autodb_idle_timeout, with its pools and their statistics; the next client
    // registers it anew.
    PoolerConfig config = pool_config("transaction", 2, {{"autodb_idle_timeout", "1"},
                                                         {"server_idle_timeout", "1"}});
    config.databases = {isolated_database("*"), isolated_database("kept")};
    Pgtether pooler(config);
    Conn admin = console(pooler);
    // SHOW DATABASES lists an auto-database where the console's worker has a pool of it: with
    // two workers the client may be on the other one, so the listing is checked with one.
    const bool one_worker = workers_in_this_run() == 1;
    auto databases = [&] {
        std::set<std::string> names;
        for (const auto& row : named_rows(admin.exec("SHOW DATABASES"))) {
            names.insert(cell(row, "name"));
        }
        return names;
    };
    {
        Conn conn = Conn::must(pooler.conninfo("", "someauto"));
        conn.exec_ok("SELECT 1");
        Conn other = Conn::must(pooler.conninfo("", "kept"));
        other.exec_ok("SELECT 1");
        if (one_worker) CHECK(databases().count("someauto") == 1);
        // In use (a client, then a server): not dropped however long.
        std::this_thread::sleep_for(2500ms);
        if (one_worker) CHECK(databases().count("someauto") == 1);
    }
    // The client has left; its server goes after server_idle_timeout, the database a second
    // after that.
    CHECK(pooler.wait_for_log("dropping database 'someauto' as it does not exist anymore or "
                              "inactive auto-database",
                              10s));
    if (one_worker) CHECK(databases().count("someauto") == 0);
    CHECK(databases().count("kept") == 1);  // a [databases] entry stays
    Conn again = Conn::must(pooler.conninfo("", "someauto"));
    again.exec_ok("SELECT 1");
    if (one_worker) CHECK(databases().count("someauto") == 1);
    const std::string log = pooler.log();
    const std::string registered = "registered new auto-database: db=someauto";
    CHECK(log.find(registered) != log.rfind(registered));  // registered twice
}

TEST_CASE("server connections that fail are logged in PgBouncer's words") {
    // A host name that does not resolve (the first of a host list, as in PgBouncer's
    // test_load_balance_hosts_disable_bad_first) and a port nobody listens on.
    const TestEnv& env = TestEnv::get();
    PoolerConfig config = pool_config("transaction", 2);
    config.databases = {
        "badname = host=pgtether-unresolvable-host,127.0.0.1 port=" + pg_port() +
            " load_balance_hosts=disable dbname=" + env.database,
        "nobody = host=127.0.0.1 port=1 dbname=" + env.database};
    Pgtether pooler(config);
    // The second host serves the client; the first was tried and logged.
    Conn served(pooler.conninfo("", "badname") + " connect_timeout=15");
    CHECK_MESSAGE(served.ok(), served.error());
    CHECK(pooler.wait_for_log("closing because: server DNS lookup failed", 10s));
    Conn refused(pooler.conninfo("", "nobody") + " connect_timeout=15");
    CHECK_FALSE(refused.ok());
    CHECK(pooler.wait_for_log("closing because: connect failed"));
    CHECK(pooler.wait_for_log("server login failed: FATAL could not connect to server"));
}
