// Faults stay where they happen: a backend killed under a client (mid-session, mid-transaction)
// or while idle in the pool; clients that vanish mid-transaction, mid-query or mid-pipeline;
// and the client-side timeouts (client_login_timeout, client_idle_timeout,
// idle_transaction_timeout, query_timeout). Afterwards the pool serves clean backends only:
// pools of one backend make "the next client gets the backend the last one left" certain.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/netns.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

PoolerConfig pool_for(const std::string& role, const std::string& mode, int size,
                      std::map<std::string, std::string> extra = {}) {
    PoolerConfig config;
    config.settings = {{"pool_mode", mode},
                       {"default_pool_size", std::to_string(size)},
                       {"query_wait_timeout", "5"}};
    for (auto& [k, v] : extra) config.settings[k] = v;
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    config.extra_args = {"-v"};
    return config;
}

void terminate_backend(const std::string& pid) {
    CHECK(direct_scalar("SELECT pg_terminate_backend(" + pid + ")") == "t");
}

// Closes the socket under libpq without Terminate, like a crashed client.
void vanish(Conn& conn) {
    shutdown(PQsocket(conn.raw()), SHUT_RDWR);
    conn.close();
}

// The backend a pool of one hands out next is clean: not in a transaction, nothing of `table`'s
// uncommitted rows, no temp table left.
void check_clean_backend(const Pgtether& pooler, const std::string& role,
                         const std::string& expected_pid = "") {
    Conn next = Conn::must(pooler.conninfo(role));
    auto r = next.exec("SELECT pg_backend_pid(), now() = statement_timestamp(), "
                       "(SELECT count(*) FROM faults_rows), "
                       "(SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND "
                       "pg_table_is_visible(oid))");
    // Seen once under workers = 2 (a 25P03 here, unexplained): the log tells what happened.
    REQUIRE_MESSAGE(r.ok(), r.describe() << "\npgtether's log:\n" << pooler.log());
    // The same backend, reused (with two workers the next client may get it lent: a new one).
    if (!expected_pid.empty() && workers_in_this_run() == 1) CHECK(r.value(0, 0) == expected_pid);
    CHECK(r.value(0, 1) == "t");  // a fresh transaction, not one left open
    CHECK(r.value(0, 2) == "0");  // rolled back
    CHECK(r.value(0, 3) == "0");  // no temp table left behind
    CHECK(next.transaction_status() == PQTRANS_IDLE);
}

struct RowsTable {
    explicit RowsTable(const std::string& role) {
        Conn conn = Conn::must(direct_conninfo());
        conn.exec_ok("DROP TABLE IF EXISTS faults_rows");
        conn.exec_ok("CREATE TABLE faults_rows (n int)");
        conn.exec_ok("GRANT ALL ON faults_rows TO " + role);
    }
    ~RowsTable() { Conn(direct_conninfo()).exec("DROP TABLE IF EXISTS faults_rows"); }
};

}  // namespace

TEST_CASE("a backend killed mid-session: that client gets an error, others are unaffected") {
    const std::string role = private_role("pgt_faults_kill");
    for (const std::string mode : {"transaction", "session"}) {
        CAPTURE(mode);
        Pgtether pooler(pool_for(role, mode, 2));
        Conn victim = Conn::must(pooler.conninfo(role));
        Conn other = Conn::must(pooler.conninfo(role));
        PGT_REQUIRE_OK(victim.exec("BEGIN"));
        std::string victim_pid = scalar(victim, "SELECT pg_backend_pid()");
        PGT_REQUIRE_OK(other.exec("BEGIN"));
        std::string other_pid = scalar(other, "SELECT pg_backend_pid()");
        REQUIRE(victim_pid != other_pid);

        terminate_backend(victim_pid);
        Result r = first_error(victim.exec_all("SELECT 1"));
        CHECK(r.is_error());
        INFO(r.describe());
        // PostgreSQL's own FATAL (57P01, forwarded) or pgtether's 08006: either way a clear error.
        CHECK((r.sqlstate == "57P01" || r.sqlstate == "08006" ||
               r.message.find("terminat") != std::string::npos ||
               r.message.find("closed") != std::string::npos));

        // The other client, mid-transaction on the other backend, does not notice.
        CHECK(scalar(other, "SELECT pg_backend_pid()") == other_pid);
        PGT_CHECK_OK(other.exec("COMMIT"));
        other.close();  // in session mode it would keep its backend
        // The pool replaces the dead backend: two clients can hold transactions at once again.
        Conn a = Conn::must(pooler.conninfo(role));
        Conn b = Conn::must(pooler.conninfo(role));
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(b.exec("BEGIN"));
        CHECK(scalar(a, "SELECT pg_backend_pid()") != victim_pid);
        CHECK(scalar(b, "SELECT pg_backend_pid()") != victim_pid);
        CHECK(pooler.running());
    }
}

TEST_CASE("a backend killed while idle in the pool is never handed to a client") {
    const std::string role = private_role("pgt_faults_idle_kill");
    REQUIRE(settled(role));
    Pgtether pooler(pool_for(role, "transaction", 2));
    {
        Conn a = Conn::must(pooler.conninfo(role));
        Conn b = Conn::must(pooler.conninfo(role));
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(b.exec("BEGIN"));
        PGT_REQUIRE_OK(a.exec("COMMIT"));
        PGT_REQUIRE_OK(b.exec("COMMIT"));
    }
    auto pids = backend_pids_of(role);
    REQUIRE(pids.size() == 2);
    for (int pid : pids) terminate_backend(std::to_string(pid));
    // A kill and a request that cross can meet on any pooler (and on a direct connection); the
    // point here is that once the backends have gone, pgtether never hands them out again.
    REQUIRE(eventually([&] { return backends_of(role) == 0; }));
    std::this_thread::sleep_for(100ms);
    // Every later request is served without an error.
    for (int i = 0; i < 10; ++i) {
        Conn c = Conn::must(pooler.conninfo(role));
        auto r = c.exec("SELECT pg_backend_pid()");
        PGT_REQUIRE_OK(r);
        CHECK(std::find(pids.begin(), pids.end(), std::stoi(r.value())) == pids.end());
    }
}

TEST_CASE("a client vanishing mid-transaction, mid-query or mid-pipeline leaves a clean backend") {
    const std::string role = private_role("pgt_faults_vanish");
    RowsTable table(role);
    for (const std::string mode : {"transaction", "session"}) {
        CAPTURE(mode);
        Pgtether pooler(pool_for(role, mode, 1));
        std::string pid;
        SUBCASE("mid-transaction") {
            Conn a = Conn::must(pooler.conninfo(role));
            PGT_REQUIRE_OK(a.exec("BEGIN"));
            PGT_REQUIRE_OK(a.exec("INSERT INTO faults_rows VALUES (1)"));
            PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE vanish_tmp (x int) ON COMMIT DROP"));
            pid = scalar(a, "SELECT pg_backend_pid()");
            vanish(a);
        }
        SUBCASE("in a failed transaction") {
            Conn a = Conn::must(pooler.conninfo(role));
            PGT_REQUIRE_OK(a.exec("BEGIN"));
            pid = scalar(a, "SELECT pg_backend_pid()");
            PGT_REQUIRE_OK(a.exec("INSERT INTO faults_rows VALUES (1)"));
            CHECK(a.exec("SELECT 1/0").is_error());
            vanish(a);
        }
        SUBCASE("mid-query, inside a transaction") {
            Conn a = Conn::must(pooler.conninfo(role));
            PGT_REQUIRE_OK(a.exec("BEGIN"));
            PGT_REQUIRE_OK(a.exec("INSERT INTO faults_rows VALUES (1)"));
            pid = scalar(a, "SELECT pg_backend_pid()");
            send_query(a, "SELECT pg_sleep(60)");
            REQUIRE(eventually([&] {
                return direct_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid +
                                     " AND query = 'SELECT pg_sleep(60)'") == "1";
            }));
            vanish(a);
        }
        SUBCASE("mid-pipeline, extended messages without a Sync") {
            Conn a = Conn::must(pooler.conninfo(role));
            pid = scalar(a, "SELECT pg_backend_pid()");
            REQUIRE(PQenterPipelineMode(a.raw()) == 1);
            REQUIRE(PQsendQueryParams(a.raw(), "BEGIN", 0, nullptr, nullptr, nullptr, nullptr,
                                      0) == 1);
            REQUIRE(PQsendQueryParams(a.raw(), "INSERT INTO faults_rows VALUES (1)", 0, nullptr,
                                      nullptr, nullptr, nullptr, 0) == 1);
            REQUIRE(PQflush(a.raw()) == 0);  // sent, but no Sync follows
            std::this_thread::sleep_for(200ms);
            vanish(a);
        }
        SUBCASE("with Terminate in the middle of a transaction") {
            Conn a = Conn::must(pooler.conninfo(role));
            PGT_REQUIRE_OK(a.exec("BEGIN"));
            PGT_REQUIRE_OK(a.exec("INSERT INTO faults_rows VALUES (1)"));
            pid = scalar(a, "SELECT pg_backend_pid()");
            a.close();
        }
        check_clean_backend(pooler, role, pid);
    }
}

TEST_CASE("client_login_timeout: a client that never finishes logging in is dropped") {
    const std::string role = private_role("pgt_faults_login");
    // 3 s: the last check's login is the pool's first, and it waits for its server's login too
    // (a backend forked on a loaded machine took more than 1 s).
    PoolerConfig config = pool_for(role, "transaction", 1, {{"client_login_timeout", "3"}});
    config.settings["auth_type"] = "plain";
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, "pw"}, {role, "pw"}};
    Pgtether pooler(config);
    SUBCASE("no start-up packet at all") {
        RawConn raw(pooler.host(), pooler.port());
        auto reply = raw.read_until_ready_or_error(10s);
        INFO(wire::describe(reply));
        CHECK(wire::first_error_sqlstate(reply) == "08P01");
        CHECK(raw.wait_closed());
    }
    SUBCASE("half a start-up packet") {
        RawConn raw(pooler.host(), pooler.port());
        REQUIRE(raw.send(wire::startup({{"user", role}}).substr(0, 10)));
        auto reply = raw.read_until_ready_or_error(10s);
        CHECK(wire::first_error_sqlstate(reply) == "08P01");
        CHECK(raw.wait_closed());
    }
    SUBCASE("asked for a password, never answers") {
        RawConn raw(pooler.host(), pooler.port());
        REQUIRE(raw.send(wire::startup({{"user", role}, {"database", "pgtether_test"}})));
        auto request = raw.read_message();
        REQUIRE(request.has_value());
        CHECK(request->type == 'R');
        auto reply = raw.read_until_ready_or_error(10s);
        INFO(wire::describe(reply));
        CHECK(wire::first_error_sqlstate(reply) == "08P01");
        CHECK(raw.wait_closed());
    }
    // A client that does log in is not affected by the timeout later.
    Conn ok = Conn::must(pooler.conninfo(role, "", "pw"));
    std::this_thread::sleep_for(3500ms);
    CHECK(scalar(ok, "SELECT 'logged in long ago'") == "logged in long ago");
}

TEST_CASE(
    "a client that leaves while its pool's first server is still logging in is gone at once") {
    // The pool's only server hangs in its login (the port accepts, nothing answers), so clients
    // that have logged in wait for the server's greeting. One that leaves meanwhile must free its
    // place then, not when server_connect_timeout or query_wait_timeout fails it.
    SilentListener silent(8);
    PoolerConfig config = pool_config("transaction", 1,
                                      {{"server_connect_timeout", "30"},
                                       {"query_wait_timeout", "30"},
                                       {"server_login_retry", "30"}});
    config.databases = {"silentdb = host=127.0.0.1 port=" + std::to_string(silent.port()) +
                        " dbname=postgres"};
    Pgtether pooler(config);
    const std::string user = TestEnv::get().superuser;
    auto waiting = [&] {
        Conn admin = console(pooler);
        auto pool = find_row(admin.exec("SHOW POOLS"), "database", "silentdb");
        return pool ? cell_int(*pool, "cl_waiting") : -1;
    };
    RawConn leaving(pooler.host(), pooler.port());
    RawConn staying(pooler.host(), pooler.port());
    REQUIRE(leaving.send(wire::startup({{"user", user}, {"database", "silentdb"}})));
    REQUIRE(staying.send(wire::startup({{"user", user}, {"database", "silentdb"}})));
    REQUIRE(eventually([&] { return waiting() == 2; }, 5s));
    SUBCASE("orderly close") {
        leaving.shutdown_write();
    }
    SUBCASE("reset") {
        leaving.reset();
    }
    CHECK(eventually([&] { return waiting() == 1; }, 3s));
    CHECK(waiting() == 1);  // the other one still waits
    CHECK_FALSE(staying.read_message(200ms).has_value());
}

TEST_CASE("a query sent while the pool's first server logs in is answered once it has") {
    // The relay holds every chunk 300 ms, so the pool's first server login takes over half a
    // second; the client's query, sent meanwhile, is read and held, then answered after the
    // greeting, in order.
    const TestEnv& env = TestEnv::get();
    TcpRelay slow(env.pg_socket_dir + "/.s.PGSQL." + std::to_string(env.pg_port), 300ms);
    PoolerConfig config = pool_config("transaction", 1);
    config.databases = {"slowdb = host=127.0.0.1 port=" + std::to_string(slow.port()) +
                        " dbname=" + env.database};
    Pgtether pooler(config);
    RawConn client(pooler.host(), pooler.port());
    REQUIRE(client.send(wire::startup({{"user", env.superuser}, {"database", "slowdb"}})));
    std::this_thread::sleep_for(150ms);  // logged in, waiting for the greeting
    REQUIRE(client.send(wire::query("SELECT 'sent early'")));
    auto login = client.read_until_ready_or_error(10s);
    INFO(wire::describe(login));
    REQUIRE((!login.empty() && login.back().type == 'Z'));
    CHECK(login.front().type == 'R');
    auto answer = client.read_until_ready_or_error(10s);
    INFO(wire::describe(answer));
    REQUIRE(answer.size() == 4);  // RowDescription, DataRow, CommandComplete, ReadyForQuery
    CHECK(answer[1].type == 'D');
    CHECK(answer[1].body.find("sent early") != std::string::npos);
    CHECK(answer[3].type == 'Z');
}

TEST_CASE("client_idle_timeout: an idle client is disconnected; an active one is not") {
    const std::string role = private_role("pgt_faults_idle");
    Pgtether pooler(pool_for(role, "transaction", 1, {{"client_idle_timeout", "1"}}));
    const TestEnv& env = TestEnv::get();
    RawConn idle(pooler.host(), pooler.port());
    auto hello = idle.startup(role, env.database);
    REQUIRE((!hello.empty() && hello.back().type == 'Z'));
    Conn busy = Conn::must(pooler.conninfo(role));
    for (int i = 0; i < 8; ++i) {
        CHECK(scalar(busy, "SELECT 1") == "1");  // keeps resetting its own idle time
        std::this_thread::sleep_for(250ms);
    }
    auto reply = idle.read_until_ready_or_error(3s);
    INFO(wire::describe(reply));
    CHECK(wire::first_error_sqlstate(reply) == "57P05");  // PostgreSQL's idle_session_timeout
    CHECK(idle.wait_closed());
    CHECK(scalar(busy, "SELECT 'still here'") == "still here");
}

TEST_CASE("idle_transaction_timeout: the idle-in-transaction client goes, its backend is cleaned") {
    const std::string role = private_role("pgt_faults_idle_tx");
    RowsTable table(role);
    Pgtether pooler(pool_for(role, "transaction", 1, {{"idle_transaction_timeout", "1"}}));
    const TestEnv& env = TestEnv::get();
    RawConn raw(pooler.host(), pooler.port());
    auto hello = raw.startup(role, env.database);
    REQUIRE((!hello.empty() && hello.back().type == 'Z'));
    REQUIRE(raw.send(wire::query("BEGIN; INSERT INTO faults_rows VALUES (1)")));
    auto in_tx = raw.read_until_ready_or_error();
    REQUIRE((!in_tx.empty() && in_tx.back().body == "T"));
    auto reply = raw.read_until_ready_or_error(5s);
    INFO(wire::describe(reply));
    CHECK(wire::first_error_sqlstate(reply) == "25P03");  // PostgreSQL's code for the same
    CHECK(raw.wait_closed());
    check_clean_backend(pooler, role);
}

TEST_CASE("query_timeout: a query running too long is stopped, the backend reused cleanly") {
    const std::string role = private_role("pgt_faults_query");
    RowsTable table(role);
    // 3 s, not 1: the clients after `a` may wait for the cancelled backend's scrub and, with two
    // workers, for a lent server's login (CI saw a login there take over a second on the loaded
    // machine), and query_timeout counts that wait too.
    Pgtether pooler(pool_for(role, "transaction", 1, {{"query_timeout", "3"}}));
    Conn a = Conn::must(pooler.conninfo(role));
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("INSERT INTO faults_rows VALUES (1)"));
    std::string pid = scalar(a, "SELECT pg_backend_pid()");
    auto started = std::chrono::steady_clock::now();
    Result r = first_error(a.exec_all("SELECT pg_sleep(30)"));
    CHECK(std::chrono::steady_clock::now() - started < 20s);
    CHECK_MESSAGE(r.sqlstate == "57014", r.describe());
    CHECK(r.message.find("query_timeout") != std::string::npos);
    // Short queries are not affected.
    Conn b = Conn::must(pooler.conninfo(role));
    CHECK(scalar(b, "SELECT pg_sleep(0.3)::text") == "");
    check_clean_backend(pooler, role);
}

namespace {

// Waits until a backend runs `sql` (pg_stat_activity) and terminates it from a direct connection.
void terminate_backend_running(const std::string& sql) {
    std::string pid;
    REQUIRE(eventually([&] {
        pid = direct_scalar("SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE query = '" +
                            sql + "' AND state = 'active'");
        return pid != "0";
    }));
    terminate_backend(pid);
}

// What a raw client sees when its backend is terminated in the middle of `SELECT pg_sleep(60)`.
std::string terminated_mid_query_raw(const std::string& host, int port, const std::string& tag) {
    const TestEnv& env = TestEnv::get();
    RawConn raw(host, port);
    auto hello = raw.startup(env.superuser, env.database);
    REQUIRE((!hello.empty() && hello.back().type == 'Z'));
    const std::string sql = "SELECT pg_sleep(60) /* " + tag + " */";
    REQUIRE(raw.send(wire::query(sql)));
    terminate_backend_running(sql);
    return wire::render_reply(raw.read_until_closed(10s));
}

// The same through libpq: every result PQgetResult gives, and the connection's error text.
std::string terminated_mid_query_libpq(const std::string& conninfo, const std::string& tag) {
    Conn conn = Conn::must(conninfo);
    const std::string sql = "SELECT pg_sleep(60) /* " + tag + " */";
    send_query(conn, sql);
    terminate_backend_running(sql);
    std::string out;
    while (PGresult* res = PQgetResult(conn.raw())) {
        Result r = Result::from(res);
        PQclear(res);
        out += r.status_name() + " " + r.sqlstate + " " + r.error_text + "\n";
    }
    return out + "status " + std::to_string(PQstatus(conn.raw())) + ": " + conn.error();
}

}  // namespace

TEST_CASE("a backend terminated mid-query: the client sees PostgreSQL's FATAL and nothing else") {
    // pg_terminate_backend: PostgreSQL sends FATAL 57P01 and closes. pgtether forwards that one
    // error and closes the client, as a direct connection would; its own 08006 is for backends
    // that vanish without a word.
    const TestEnv& env = TestEnv::get();
    Pgtether pooler(pool_for(env.superuser, "transaction", 2));
    SUBCASE("raw protocol") {
        const std::string direct = terminated_mid_query_raw(env.pg_host, env.pg_port, "raw direct");
        const std::string pooled =
            terminated_mid_query_raw(pooler.host(), pooler.port(), "raw pooled");
        CHECK(direct.find("C=57P01") != std::string::npos);
        CHECK_MESSAGE(direct == pooled, "PostgreSQL:\n" << direct << "\npgtether:\n" << pooled);
    }
    SUBCASE("libpq") {
        const std::string direct = terminated_mid_query_libpq(direct_conninfo(), "libpq direct");
        const std::string pooled = terminated_mid_query_libpq(pooler.conninfo(), "libpq pooled");
        CHECK(direct.find("57P01") != std::string::npos);
        CHECK_MESSAGE(direct == pooled, "PostgreSQL:\n" << direct << "\npgtether:\n" << pooled);
    }
    // The pool replaced the backend.
    Conn next = Conn::must(pooler.conninfo());
    CHECK(scalar(next, "SELECT 1") == "1");
    CHECK(pooler.wait_for_log("closing because: server closed the connection after a FATAL"));
}

TEST_CASE("a tethered client whose backend is lost is told its session state is gone") {
    // Its session lock died with the backend: it must not carry on as if it still held it, nor
    // be handed another backend quietly. It gets pgtether's 08006 naming what was lost, is
    // disconnected, and can reconnect and take the lock again.
    const std::string role = private_role("pgt_faults_lost_tether");
    Pgtether pooler(pool_for(role, "transaction", 2));
    const std::string key = "4242";
    auto check_told = [&](const Result& r) {
        INFO(r.describe());
        CHECK(r.sqlstate == "08006");
        CHECK(r.message.find("this session's state") != std::string::npos);
        CHECK(r.message.find("advisory locks") != std::string::npos);
        CHECK(r.message.find(key) != std::string::npos);
        // The backend's own word on why it went.
        CHECK(r.message.find("administrator command") != std::string::npos);
    };
    Conn holder = Conn::must(pooler.conninfo(role));
    PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_lock(" + key + ")"));
    const std::string pid = scalar(holder, "SELECT pg_backend_pid()");
    SUBCASE("idle between statements: told at its next statement") {
        terminate_backend(pid);
        REQUIRE(eventually([&] { return backends_of(role) <= 1; }));
        check_told(first_error(holder.exec_all("SELECT 1")));
    }
    SUBCASE("in the middle of a statement: told as its answer") {
        const std::string sql = "SELECT pg_sleep(60) /* lost tether */";
        send_query(holder, sql);
        terminate_backend_running(sql);
        auto results = wait_results(holder, 10s);
        REQUIRE(results.has_value());
        check_told(first_error(*results));
    }
    CHECK(PQstatus(holder.raw()) == CONNECTION_BAD);
    CHECK(pooler.wait_for_log("server connection lost, and with it this session's state"));
    // The lock went with the backend; a new session takes it through pgtether.
    Conn again = Conn::must(pooler.conninfo(role));
    CHECK(scalar(again, "SELECT pg_try_advisory_lock(" + key + ")") == "t");
    CHECK(direct_scalar("SELECT pg_try_advisory_lock(" + key + ")") == "f");
    PGT_CHECK_OK(again.exec("SELECT pg_advisory_unlock(" + key + ")"));
}

TEST_CASE("a backend terminated while idle, before pgtether read its FATAL, is not handed out") {
    // pgtether is stopped (SIGSTOP) while a client sends its next transaction and the backend it
    // would get is terminated: on SIGCONT the loop sees the client first, with the dead backend
    // still idle in the pool and its FATAL unread. It must not be handed out.
    const std::string role = private_role("pgt_faults_idle_race");
    REQUIRE(settled(role));
    Pgtether pooler(pool_for(role, "transaction", 1));
    Conn client = Conn::must(pooler.conninfo(role));
    const std::string pid = scalar(client, "SELECT pg_backend_pid()");
    std::this_thread::sleep_for(50ms);  // idle for a while in the pool
    REQUIRE(::kill(pooler.pid(), SIGSTOP) == 0);
    send_query(client, "SELECT 'served'");
    std::this_thread::sleep_for(50ms);  // the request is in pgtether's socket before the FATAL
    terminate_backend(pid);
    CHECK(eventually([&] { return backends_of(role) == 0; }));
    REQUIRE(::kill(pooler.pid(), SIGCONT) == 0);
    auto result = wait_result(client, 10s);
    REQUIRE(result.has_value());
    CHECK_MESSAGE(result->ok(), result->describe());
    if (result->ok()) CHECK(result->value() == "served");
    CHECK(scalar(client, "SELECT pg_backend_pid()") != pid);
}

TEST_CASE("a backend that stops answering during server_check_query: the client gets another") {
    // SIGSTOP on the backend: the connection stays up (the kernel still acknowledges), but
    // nothing answers -- a backend that vanished without RST or FIN looks the same to pgtether.
    // server_check_delay = 0 checks every backend before it serves; query_timeout bounds that
    // check as it bounds the client's own query, and the client, whose request never reached the
    // silent backend, is served by another.
    const std::string role = private_role("pgt_faults_silent_check");
    REQUIRE(settled(role));
    Pgtether pooler(pool_for(role, "transaction", 2,
                             {{"server_check_delay", "0"}, {"query_timeout", "2"}}));
    Conn client = Conn::must(pooler.conninfo(role));
    const std::string pid = scalar(client, "SELECT pg_backend_pid()");
    REQUIRE(::kill(std::stoi(pid), SIGSTOP) == 0);
    // The backend resumes after 20 s whatever happens, so that a pgtether that waits for it for
    // ever fails this test instead of hanging it (and the shared server's shutdown).
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
        for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(100ms);
        ::kill(std::stoi(pid), SIGCONT);
    });
    auto started = std::chrono::steady_clock::now();
    Result r = client.exec("SELECT pg_backend_pid()");
    CHECK_MESSAGE(r.ok(), r.describe());
    if (r.ok()) CHECK(r.value() != pid);
    // query_timeout (2 s) and the janitor's tick; generous for a loaded machine.
    CHECK(std::chrono::steady_clock::now() - started < 15s);
    done = true;
    watchdog.join();
    CHECK(pooler.wait_for_log("took longer than query_timeout"));
}
