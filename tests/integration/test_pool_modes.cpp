// Pool modes: session mode keeps one backend per client and runs server_reset_query when the
// client leaves; transaction mode can run it always (server_reset_query_always); statement mode
// refuses transaction blocks with 0A000. Pools of one backend make "the next client gets the same
// backend" certain, and pg_backend_pid() proves it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <string>
#include <thread>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

PoolerConfig one_backend(const std::string& mode) {
    // Without lock discovery: a statement that runs before the database's lock functions are
    // known is probed, and its client tethered until the probe answers, which lets the pool
    // open a second backend for the next client (the tether allowance); these tests are about
    // what happens between clients on one backend.
    return pool_config(mode, 1, {{"query_wait_timeout", "20"}, {"advisory_lock_discovery", "off"}});
}

// Leaves session state behind on the client's backend: a temp table, a prepared statement, a
// GUC, a LISTEN, a cursor WITH HOLD. Returns the backend pid.
std::string dirty_the_session(Conn& conn) {
    conn.exec_ok("CREATE TEMP TABLE leftover (x int)");
    conn.exec_ok("INSERT INTO leftover VALUES (1)");
    conn.exec_ok("PREPARE leftover_stmt AS SELECT 1");
    conn.exec_ok("SET work_mem = '7MB'");
    conn.exec_ok("LISTEN leftover_channel");
    conn.exec_ok("BEGIN; DECLARE leftover_cursor CURSOR WITH HOLD FOR SELECT 1; COMMIT");
    return scalar(conn, "SELECT pg_backend_pid()");
}

}  // namespace

TEST_CASE("session mode: server_reset_query (DISCARD ALL) runs when the client leaves") {
    Pgtether pooler(one_backend("session"));
    std::string pid;
    {
        Conn a = Conn::must(pooler.conninfo());
        pid = dirty_the_session(a);
        // Within the session everything is still there, on the same backend.
        for (int i = 0; i < 3; ++i) {
            CHECK(scalar(a, "SELECT pg_backend_pid()") == pid);
            CHECK(scalar(a, "SELECT count(*) FROM leftover") == "1");
        }
    }
    Conn b = Conn::must(pooler.conninfo());
    // The same backend, reused (with two workers b may get it lent: a new one, as clean).
    if (workers_in_this_run() == 1) REQUIRE(scalar(b, "SELECT pg_backend_pid()") == pid);
    PGT_CHECK_SQLSTATE(b.exec("SELECT * FROM leftover"), "42P01");
    PGT_CHECK_SQLSTATE(b.exec("EXECUTE leftover_stmt"), "26000");
    PGT_CHECK_SQLSTATE(b.exec("FETCH leftover_cursor"), "34000");
    CHECK(scalar(b, "SHOW work_mem") == "4MB");
    CHECK(scalar(b, "SELECT count(*) FROM pg_listening_channels()") == "0");
}

TEST_CASE("session mode: a custom server_reset_query is the one that runs") {
    PoolerConfig config = one_backend("session");
    config.settings["server_reset_query"] = "DISCARD TEMP";
    config.settings["workers"] = "1";  // b must meet a's backend, not a lent (new) one
    Pgtether pooler(config);
    std::string pid;
    {
        Conn a = Conn::must(pooler.conninfo());
        pid = dirty_the_session(a);
    }
    Conn b = Conn::must(pooler.conninfo());
    REQUIRE(scalar(b, "SELECT pg_backend_pid()") == pid);
    PGT_CHECK_SQLSTATE(b.exec("SELECT * FROM leftover"), "42P01");  // DISCARD TEMP ran
    PGT_CHECK_OK(b.exec("EXECUTE leftover_stmt"));  // ... and only that (no DISCARD ALL)
}

TEST_CASE("session mode: the leak sweep of an idle backend is not followed by server_reset_query") {
    // The reset ran when the client left; a sweep that finds nothing changes nothing, so a
    // second reset after every sweep (every server_check_delay, on every idle backend) would be
    // work for nothing. A reset query that counts its runs in a sequence tells.
    const std::string counter = "pgt_reset_count_" + std::to_string(::getpid());
    direct_scalar("CREATE SEQUENCE " + counter + "; SELECT 1");
    PoolerConfig config = one_backend("session");
    config.settings["server_reset_query"] = "SELECT nextval('" + counter + "')";
    config.settings["server_check_delay"] = "1";
    config.settings["workers"] = "1";
    Pgtether pooler(config);
    auto resets = [&] {
        return direct_scalar("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM " +
                             counter);
    };
    { Conn a = Conn::must(pooler.conninfo()); PGT_REQUIRE_OK(a.exec("SELECT 1")); }
    REQUIRE(eventually([&] { return resets() == "1"; }));  // the client left
    // Three sweeps or more (one a second), and no reset after them.
    std::this_thread::sleep_for(3500ms);
    CHECK(pooler.log().find("leak sweep") == std::string::npos);  // none failed
    CHECK(resets() == "1");
    { Conn b = Conn::must(pooler.conninfo()); PGT_CHECK_OK(b.exec("SELECT 1")); }
    CHECK(eventually([&] { return resets() == "2"; }));  // the next client's departure
    direct_scalar("DROP SEQUENCE " + counter + "; SELECT 1");
}

TEST_CASE("session mode: a client keeps its backend; a second client waits for it") {
    Pgtether pooler(one_backend("session"));
    Conn a = Conn::must(pooler.conninfo());
    std::string pid = scalar(a, "SELECT pg_backend_pid()");
    Conn b = Conn::must(pooler.conninfo());
    send_query(b, "SELECT pg_backend_pid()");
    // a is idle between transactions but keeps the backend: b has to wait.
    for (int i = 0; i < 3; ++i) CHECK(scalar(a, "SELECT pg_backend_pid()") == pid);
    CHECK_FALSE(wait_result(b, 500ms).has_value());
    a.close();
    auto r = wait_result(b, 10s);
    REQUIRE(r.has_value());
    PGT_REQUIRE_OK(*r);
    if (workers_in_this_run() == 1) CHECK(r->value() == pid);  // else possibly lent: a new one
}

TEST_CASE("transaction mode with server_reset_query_always: session state never leaks") {
    PoolerConfig config = one_backend("transaction");
    config.settings["server_reset_query_always"] = "1";
    // PgBouncer's behaviour for temporary tables: they would otherwise tether `a` (see
    // test_session_state.cpp), and this test is about the reset between clients.
    config.settings["session_state_temp_tables"] = "ignore";
    Pgtether pooler(config);
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    std::string pid = scalar(a, "SELECT pg_backend_pid()");
    PGT_REQUIRE_OK(a.exec("SET work_mem = '9MB'"));
    PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE always_reset (x int)"));
    if (workers_in_this_run() == 1) {
        CHECK_MESSAGE(scalar(b, "SELECT pg_backend_pid()") == pid, pooler.log());
    }
    CHECK(scalar(b, "SHOW work_mem") == "4MB");
    PGT_CHECK_SQLSTATE(b.exec("SELECT * FROM always_reset"), "42P01");
    // Tracked parameters survive the reset for their own client (they are re-applied).
    PGT_REQUIRE_OK(a.exec("SET TimeZone = 'Asia/Tokyo'"));
    CHECK(scalar(b, "SHOW TimeZone") != "Asia/Tokyo");
    CHECK(scalar(a, "SHOW TimeZone") == "Asia/Tokyo");
}

TEST_CASE("statement mode: single statements work, transaction blocks are refused with 0A000") {
    Pgtether pooler(one_backend("statement"));
    Conn a = Conn::must(pooler.conninfo());
    std::string pid = scalar(a, "SELECT pg_backend_pid()");
    CHECK(scalar(a, "SELECT 2 + 2") == "4");
    auto params = a.exec_params("SELECT $1::int * 3", {"5"});
    PGT_REQUIRE_OK(params);
    CHECK(params.value() == "15");
    // A multi-statement string is one implicit transaction, ending idle: allowed, as in PgBouncer.
    auto multi = a.exec_all("SELECT 1; SELECT 2");
    REQUIRE(multi.size() == 2);
    CHECK(multi[1].value() == "2");

    SUBCASE("simple query BEGIN") {
        auto r = first_error(a.exec_all("BEGIN"));
        PGT_CHECK_SQLSTATE(r, "0A000");
        CHECK(r.message.find("transaction blocks not allowed in statement pooling mode") !=
              std::string::npos);
    }
    SUBCASE("BEGIN inside a multi-statement string") {
        auto r = a.exec_all("BEGIN; SELECT 1");
        REQUIRE_FALSE(r.empty());
        // Only the error: the client never sees the transaction begin.
        CHECK(r.front().is_error());
        PGT_CHECK_SQLSTATE(first_error(r), "0A000");
    }
    SUBCASE("extended protocol BEGIN") {
        PGT_CHECK_SQLSTATE(first_error(exec_params_all(a, "BEGIN", {})), "0A000");
    }
    // The client is disconnected (PgBouncer does the same).
    CHECK_FALSE((a.ok() && a.exec("SELECT 1").ok()));
    // The backend did not keep the refused transaction open: the next client gets it clean.
    Conn b = Conn::must(pooler.conninfo());
    auto r = b.exec("SELECT pg_backend_pid(), now() = statement_timestamp()");
    PGT_REQUIRE_OK(r);
    if (workers_in_this_run() == 1) CHECK(r.value(0, 0) == pid);  // else possibly lent: new
    CHECK(r.value(0, 1) == "t");
    CHECK(b.transaction_status() == PQTRANS_IDLE);
}

TEST_CASE("pool_mode per database and per user, as PgBouncer resolves it") {
    const TestEnv& env = TestEnv::get();
    const std::string session_user = private_role("pgt_modes_session_user");
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "2"}};
    const std::string target =
        "host=" + env.pg_host + " port=" + std::to_string(env.pg_port) + " dbname=" + env.database;
    config.databases = {"stmt_db = " + target + " pool_mode=statement",
                        "tx_db = " + target};
    config.users = {session_user + " = pool_mode=session"};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{env.superuser, ""},
                                                                       {session_user, ""}};
    Pgtether pooler(config);

    Conn stmt = Conn::must(pooler.conninfo("", "stmt_db"));
    PGT_CHECK_SQLSTATE(first_error(stmt.exec_all("BEGIN")), "0A000");

    Conn tx = Conn::must(pooler.conninfo("", "tx_db"));
    PGT_REQUIRE_OK(tx.exec("BEGIN"));
    PGT_REQUIRE_OK(tx.exec("COMMIT"));

    // [users] pool_mode wins over the database's: session state survives across transactions
    // even when another client uses the pool in between.
    Conn s = Conn::must(pooler.conninfo(session_user, "stmt_db"));
    PGT_REQUIRE_OK(s.exec("BEGIN"));
    PGT_REQUIRE_OK(s.exec("COMMIT"));
    PGT_REQUIRE_OK(s.exec("CREATE TEMP TABLE session_user_table (x int)"));
    Conn s2 = Conn::must(pooler.conninfo(session_user, "stmt_db"));
    CHECK(scalar(s2, "SELECT 1") == "1");
    CHECK(scalar(s, "SELECT count(*) FROM session_user_table") == "0");
}
