// Session state beyond advisory locks (issue "Session state without surprises"): temporary
// tables, LISTEN, WITH HOLD cursors, SQL-level PREPARE and LOAD tether their client; settings
// (SET, RESET, set_config, start-up parameters) are replayed instead — every client sees its own
// and nobody else's, through a pool of two backends.
#include <doctest/doctest.h>

#include <algorithm>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

PoolerConfig two_backends(std::map<std::string, std::string> extra = {}) {
    extra.emplace("query_wait_timeout", "20");
    // No allowance on top of the pool, so that a tethered client visibly takes one of the two
    // backends (test_tether_reserve.cpp tests the allowance).
    extra.emplace("tether_reserve_size", "0");
    extra.emplace("max_client_conn", "100");
    return pool_config("transaction", 2, extra);
}

}  // namespace

TEST_CASE("a temporary table tethers its client; others never see it; DROP untethers") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE scratch (n int)"));
    for (int i = 1; i <= 10; ++i) {
        PGT_REQUIRE_OK(a.exec("INSERT INTO scratch VALUES (" + std::to_string(i) + ")"));
        PGT_CHECK_SQLSTATE(b.exec("SELECT count(*) FROM scratch"), "42P01");
    }
    CHECK(scalar(a, "SELECT sum(n) FROM scratch") == "55");
    CHECK(second_transaction_waits(pooler.conninfo()));
    CHECK(pooler.wait_for_log("tethered to backend"));
    CHECK(pooler.log().find("temp tables 1: scratch") != std::string::npos);
    PGT_REQUIRE_OK(a.exec("DROP TABLE scratch"));
    CHECK(two_transactions_fit(pooler.conninfo()));

    SUBCASE("DISCARD TEMP untethers too") {
        PGT_REQUIRE_OK(a.exec("CREATE TEMPORARY TABLE again (n int)"));
        CHECK(second_transaction_waits(pooler.conninfo()));
        PGT_REQUIRE_OK(a.exec("DISCARD TEMP"));
        CHECK(two_transactions_fit(pooler.conninfo()));
    }
    SUBCASE("ON COMMIT DROP never tethers") {
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE gone (n int) ON COMMIT DROP"));
        PGT_REQUIRE_OK(a.exec("COMMIT"));
        CHECK(two_transactions_fit(pooler.conninfo()));
    }
    SUBCASE("a client that leaves with a temp table: it is gone before anyone else comes") {
        PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE leftover (n int)"));
        a.close();
        Conn direct = Conn::must(direct_conninfo());
        bool gone = false;
        for (int i = 0; i < 40 && !gone; ++i) {
            gone = scalar(direct, "SELECT count(*) FROM pg_class WHERE relname = 'leftover' AND "
                                  "relpersistence = 't'") == "0";
            if (!gone) std::this_thread::sleep_for(25ms);
        }
        CHECK(gone);
    }
}

TEST_CASE("listen_mode = tether: LISTEN keeps receiving across transactions; UNLISTEN * untethers") {
    // The default (multiplex) never tethers a listener: test_listen.cpp.
    Pgtether pooler(two_backends({{"listen_mode", "tether"}}));
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("LISTEN jobs"));
    for (int i = 0; i < 5; ++i) {
        PGT_REQUIRE_OK(b.exec("NOTIFY jobs, 'job " + std::to_string(i) + "'"));
        PGT_REQUIRE_OK(a.exec("SELECT 1"));  // a later transaction of the listener
        PGnotify* notify = nullptr;
        for (int wait = 0; wait < 40 && !notify; ++wait) {
            PQconsumeInput(a.raw());
            notify = PQnotifies(a.raw());
            if (!notify) std::this_thread::sleep_for(25ms);
        }
        REQUIRE_MESSAGE(notify != nullptr, "notification " << i << " did not arrive");
        CHECK(std::string(notify->relname) == "jobs");
        CHECK(std::string(notify->extra) == "job " + std::to_string(i));
        PQfreemem(notify);
    }
    CHECK(second_transaction_waits(pooler.conninfo()));
    PGT_REQUIRE_OK(a.exec("UNLISTEN *"));
    CHECK(two_transactions_fit(pooler.conninfo()));
}

TEST_CASE("a WITH HOLD cursor is fetched across transactions; CLOSE untethers") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("DECLARE c CURSOR WITH HOLD FOR SELECT generate_series(1, 10) AS n"));
    for (int i = 0; i < 5; ++i) {
        auto r = a.exec("FETCH 2 FROM c");
        PGT_REQUIRE_OK(r);
        REQUIRE(r.rows.size() == 2);
        CHECK(r.value(0, 0) == std::to_string(2 * i + 1));
    }
    CHECK(second_transaction_waits(pooler.conninfo()));
    PGT_REQUIRE_OK(a.exec("CLOSE c"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    // A cursor without HOLD dies with its transaction and never tethers.
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("DECLARE d CURSOR FOR SELECT 1"));
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    CHECK(two_transactions_fit(pooler.conninfo()));
}

TEST_CASE("SQL-level PREPARE tethers until DEALLOCATE") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("PREPARE twice(int) AS SELECT $1 * 2"));
    for (int i = 0; i < 5; ++i) CHECK(scalar(a, "EXECUTE twice(" + std::to_string(i) + ")") == std::to_string(2 * i));
    CHECK(second_transaction_waits(pooler.conninfo()));
    PGT_REQUIRE_OK(a.exec("DEALLOCATE twice"));
    CHECK(two_transactions_fit(pooler.conninfo()));
}

TEST_CASE("LOAD tethers for good and the backend is closed when its client leaves") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("LOAD 'auto_explain'"));
    int pid = std::stoi(scalar(a, "SELECT pg_backend_pid()"));
    CHECK(second_transaction_waits(pooler.conninfo()));
    a.close();
    Conn direct = Conn::must(direct_conninfo());
    bool closed = false;
    for (int i = 0; i < 40 && !closed; ++i) {
        closed = scalar(direct, "SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                                    std::to_string(pid)) == "0";
        if (!closed) std::this_thread::sleep_for(25ms);
    }
    CHECK(closed);
}

TEST_CASE("session_state_* = ignore behaves like PgBouncer") {
    Pgtether pooler(two_backends({{"session_state_temp_tables", "ignore"}}));
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE not_tracked (n int)"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    PGT_REQUIRE_OK(a.exec("DISCARD TEMP"));
}

TEST_CASE("settings are replayed, never tethered: 20 clients on 2 backends see only their own") {
    Pgtether pooler(two_backends());
    constexpr int kClients = 20;
    std::vector<Conn> clients;
    for (int i = 0; i < kClients; ++i) clients.push_back(Conn::must(pooler.conninfo()));
    const char* datestyles[] = {"ISO, MDY", "German, DMY", "SQL, DMY", "Postgres, MDY"};
    auto expected_search_path = [](int i) { return "tenant_" + std::to_string(i) + ", public"; };
    for (int i = 0; i < kClients; ++i) {
        Conn& c = clients[static_cast<std::size_t>(i)];
        if (i % 2 == 0) {  // half the clients change their settings
            PGT_REQUIRE_OK(c.exec(std::string("SET DateStyle = '") + datestyles[i % 4] + "'"));
            PGT_REQUIRE_OK(c.exec("SET search_path = tenant_" + std::to_string(i) + ", public"));
            PGT_REQUIRE_OK(c.exec("SET statement_timeout = '" + std::to_string(i + 1) + "s'"));
            PGT_REQUIRE_OK(c.exec("SET application_name = 'client" + std::to_string(i) + "'"));
            PGT_REQUIRE_OK(c.exec("SELECT set_config('myapp.tenant', 'tenant" + std::to_string(i) +
                                  "', false)"));
        }
    }
    CHECK(two_transactions_fit(pooler.conninfo()));  // settings never tether
    for (int round = 0; round < 10; ++round) {
        for (int i = 0; i < kClients; ++i) {
            Conn& c = clients[static_cast<std::size_t>(i)];
            auto r = c.exec("SELECT current_setting('DateStyle'), current_setting('search_path'), "
                            "current_setting('statement_timeout'), "
                            "current_setting('application_name'), "
                            "current_setting('myapp.tenant', true)");
            PGT_REQUIRE_OK(r);
            if (i % 2 == 0) {
                CHECK(r.value(0, 0) == datestyles[i % 4]);
                CHECK(r.value(0, 1) == expected_search_path(i));
                CHECK(r.value(0, 2) == std::to_string(i + 1) + "s");
                CHECK(r.value(0, 3) == "client" + std::to_string(i));
                CHECK(r.value(0, 4) == "tenant" + std::to_string(i));
            } else {
                CHECK(r.value(0, 0) == "ISO, MDY");
                CHECK(r.value(0, 1) == "\"$user\", public");
                CHECK(r.value(0, 2) == "0");
                CHECK(r.value(0, 3) == "");
                bool unset = r.is_null(0, 4) || r.value(0, 4).empty();
                CHECK(unset);
            }
        }
    }
    SUBCASE("RESET ALL") {
        Conn& c = clients[0];
        PGT_REQUIRE_OK(c.exec("RESET ALL"));
        for (int round = 0; round < 4; ++round) {
            CHECK(scalar(c, "SHOW search_path") == "\"$user\", public");
            CHECK(scalar(c, "SHOW statement_timeout") == "0");
            CHECK(scalar(c, "SHOW DateStyle") == "ISO, MDY");
            PGT_REQUIRE_OK(clients[2].exec("SELECT 1"));  // keep the other backend busy too
        }
    }
    SUBCASE("a SET inside a rolled-back transaction is undone") {
        Conn& c = clients[1];
        PGT_REQUIRE_OK(c.exec("BEGIN"));
        PGT_REQUIRE_OK(c.exec("SET search_path = rolled_back"));
        PGT_REQUIRE_OK(c.exec("SET LOCAL work_mem = '9MB'"));
        PGT_REQUIRE_OK(c.exec("ROLLBACK"));
        for (int round = 0; round < 4; ++round) {
            CHECK(scalar(c, "SHOW search_path") == "\"$user\", public");
            PGT_REQUIRE_OK(clients[0].exec("SELECT 1"));
        }
        // A committed SET stays; SET LOCAL never outlives its transaction.
        PGT_REQUIRE_OK(c.exec("BEGIN"));
        PGT_REQUIRE_OK(c.exec("SET search_path = committed, public"));
        PGT_REQUIRE_OK(c.exec("SET LOCAL work_mem = '9MB'"));
        PGT_REQUIRE_OK(c.exec("COMMIT"));
        for (int round = 0; round < 4; ++round) {
            CHECK(scalar(c, "SHOW search_path") == "committed, public");
            CHECK(scalar(c, "SHOW work_mem") == "4MB");
            PGT_REQUIRE_OK(clients[0].exec("SELECT 1"));
        }
    }
}

TEST_CASE("settings affinity: a client keeps the backend with its settings, others get another") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    // Two backends exist once two transactions have run at the same time.
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(b.exec("BEGIN"));
    REQUIRE(scalar(a, "SELECT pg_backend_pid()") != scalar(b, "SELECT pg_backend_pid()"));
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    PGT_REQUIRE_OK(b.exec("COMMIT"));

    PGT_REQUIRE_OK(a.exec("SET search_path = pg_catalog, public"));
    const std::string with_settings = scalar(a, "SELECT pg_backend_pid()");
    const std::string default_path = direct_scalar("SHOW search_path");
    for (int i = 0; i < 5; ++i) {
        // The most recently used backend is a's; b, which has no settings, gets the other one
        // (without affinity it would get a's and pay a RESET, and a would pay a set_config next).
        CHECK(scalar(b, "SELECT pg_backend_pid()") != with_settings);
        CHECK(scalar(b, "SHOW search_path") == default_path);
        CHECK(scalar(a, "SELECT pg_backend_pid()") == with_settings);
        CHECK(scalar(a, "SHOW search_path") == "pg_catalog, public");
    }
}

TEST_CASE("pgjdbc-style start-up parameters are accepted and honoured on every backend") {
    PoolerConfig config = two_backends({{"min_pool_size", "2"}, {"server_round_robin", "1"}});
    Pgtether pooler(config);
    Conn c = Conn::must(pooler.conninfo(
        "", "", "", "options='-c statement_timeout=5s -c search_path=app,public' "
                    "application_name=jdbc_like"));
    std::this_thread::sleep_for(300ms);  // min_pool_size warms the second backend up
    // extra_float_digits the way pgjdbc sends it: a plain start-up parameter.
    REQUIRE(PQstatus(c.raw()) == CONNECTION_OK);
    std::set<std::string> backends;
    for (int i = 0; i < 8; ++i) {
        auto r = c.exec("SELECT current_setting('statement_timeout'), "
                        "current_setting('search_path'), current_setting('application_name'), "
                        "pg_backend_pid()");
        PGT_REQUIRE_OK(r);
        CHECK(r.value(0, 0) == "5s");
        CHECK(r.value(0, 1) == "app,public");  // as PostgreSQL shows it for this option
        CHECK(r.value(0, 2) == "jdbc_like");
        backends.insert(r.value(0, 3));
    }
    CHECK(backends.size() == 2);
    // The statement_timeout is really in force.
    PGT_CHECK_SQLSTATE(c.exec("SET statement_timeout = '100ms'; SELECT pg_sleep(1)"), "57014");

    // pgjdbc sends extra_float_digits as a start-up parameter of its own (libpq cannot):
    // speak the protocol directly.
    const TestEnv& env = TestEnv::get();
    RawConn raw(pooler.host(), pooler.port());
    REQUIRE(raw.send(wire::startup({{"user", env.superuser},
                                    {"database", env.database},
                                    {"extra_float_digits", "3"},
                                    {"DateStyle", "ISO"}})));
    auto greeting = raw.read_until_ready_or_error();
    bool ready = !greeting.empty() && greeting.back().type == 'Z';
    REQUIRE_MESSAGE(ready, wire::describe(greeting));
    for (int i = 0; i < 4; ++i) {
        REQUIRE(raw.send(wire::query("SHOW extra_float_digits")));
        auto replies = raw.read_until_ready_or_error();
        bool found = false;
        for (const auto& m : replies) {
            if (m.type == 'D') found = m.body.find("3") != std::string::npos;
        }
        CHECK_MESSAGE(found, wire::describe(replies));
    }
}

TEST_CASE("the admin console and the metrics name every tether's reasons") {
    PoolerConfig config = two_backends({{"metrics_listen_port", "0"}, {"listen_mode", "tether"}});
    config.settings["admin_users"] = TestEnv::get().superuser;
    Pgtether pooler(config);
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE reasons (n int)"));
    PGT_REQUIRE_OK(a.exec("LISTEN reasons_channel"));
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(1300)"));
    Conn admin = Conn::must(pooler.conninfo("", "pgtether"));
    // The probe runs after the client already has its reply: wait for it.
    std::string reasons;
    bool complete = eventually([&] {
        auto locks = admin.exec("SHOW LOCKS");
        if (!locks.ok() || locks.rows.size() != 1) return false;
        auto column = std::find(locks.columns.begin(), locks.columns.end(), "tether_reasons");
        if (column == locks.columns.end()) return false;
        reasons = locks.rows[0][static_cast<std::size_t>(column - locks.columns.begin())]
                      .value_or("");
        return reasons.find("advisory locks") != std::string::npos;
    });
    INFO(reasons);
    CHECK(complete);
    CHECK(reasons.find("advisory locks 1300 exclusive") != std::string::npos);
    CHECK(reasons.find("temp tables 1: reasons") != std::string::npos);
    CHECK(reasons.find("listen 1: reasons_channel") != std::string::npos);
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_unlock_all(); UNLISTEN *; DROP TABLE reasons"));
    CHECK(two_transactions_fit(pooler.conninfo()));
}

namespace {

// Parse (when `text` is given), Bind, Execute and Sync of statement `name` on a raw connection;
// the replies up to ReadyForQuery, which must come without an error.
void run_extended(RawConn& raw, const std::string& name, const std::string& text = {}) {
    std::string batch;
    if (!text.empty()) batch += wire::message('P', wire::cstr(name) + wire::cstr(text) + wire::i16(0));
    batch += wire::message('B', wire::cstr("") + wire::cstr(name) + wire::i16(0) + wire::i16(0) +
                                    wire::i16(0)) +
             wire::message('E', wire::cstr("") + wire::i32(0)) + wire::sync();
    REQUIRE(raw.send(batch));
    auto replies = raw.read_until_ready_or_error();
    REQUIRE_MESSAGE((!replies.empty() && replies.back().type == 'Z'), wire::describe(replies));
}

// The one value a simple query returns on a raw connection.
std::string raw_scalar(RawConn& raw, const std::string& sql) {
    REQUIRE(raw.send(wire::query(sql)));
    auto replies = raw.read_until_ready_or_error();
    if (auto value = wire::first_value(replies)) return *value;
    FAIL("no row for " << sql << ": " << wire::describe(replies));
    return {};
}

}  // namespace

TEST_CASE("a Bind of the unnamed statement in a later transaction replays its settings' effects") {
    // One backend: every client below meets the statements and settings the others left on it
    // (one worker: with two, a client on the other worker gets the backend lent, i.e. a new one).
    Pgtether pooler(
        pool_config("transaction", 1, {{"query_wait_timeout", "20"}, {"workers", "1"}}));
    const TestEnv& env = TestEnv::get();
    const std::string default_work_mem = direct_scalar("SHOW work_mem");
    REQUIRE(default_work_mem != "7MB");

    SUBCASE("the client's own unnamed statement, bound again after a RESET") {
        RawConn a(pooler.host(), pooler.port());
        REQUIRE(a.startup(env.superuser, env.database).back().type == 'Z');
        run_extended(a, "", "SET work_mem = '7MB'");
        run_extended(a, "reset_it", "RESET work_mem");
        // No Parse: the backend runs its unnamed statement, the SET, once more.
        run_extended(a, "");
        Conn other = Conn::must(pooler.conninfo());
        CHECK(other.exec("SHOW work_mem").value() == default_work_mem);
        // And the client that set it keeps it, as on a direct connection.
        CHECK(raw_scalar(a, "SHOW work_mem") == "7MB");
    }
    SUBCASE("another client's unnamed statement") {
        RawConn a(pooler.host(), pooler.port());
        REQUIRE(a.startup(env.superuser, env.database).back().type == 'Z');
        // Parsed, never executed by this client. (Not a custom setting: the probe of one is a
        // simple query, which would destroy the unnamed statement.)
        REQUIRE(a.send(wire::message('P', wire::cstr("") +
                                               wire::cstr("SELECT set_config('statement_timeout', "
                                                          "'77s', false)") +
                                               wire::i16(0)) +
                       wire::sync()));
        auto parsed = a.read_until_ready_or_error();
        REQUIRE_MESSAGE((!parsed.empty() && parsed.back().type == 'Z'), wire::describe(parsed));
        // Client b binds the backend's unnamed statement (pooled, it is a's): its session now
        // has the setting, and nobody else may see it.
        RawConn b(pooler.host(), pooler.port());
        REQUIRE(b.startup(env.superuser, env.database).back().type == 'Z');
        run_extended(b, "");
        Conn other = Conn::must(pooler.conninfo());
        CHECK(other.exec("SHOW statement_timeout").value() == "0");
        CHECK(raw_scalar(b, "SHOW statement_timeout") == "77s");
    }
}

TEST_CASE("an unnamed statement the backend skipped after an error is not taken for the one it runs") {
    // The backend keeps its old unnamed statement (a try-lock) when an error makes it skip the
    // Parse of a new one (an unlock): a later Bind of "" runs the try-lock. Taken for the unlock,
    // it would end the tether while the backend holds the lock twice.
    Pgtether pooler(pool_config("transaction", 1, {{"query_wait_timeout", "20"}}));
    const TestEnv& env = TestEnv::get();
    const std::string key = "7700777";
    RawConn a(pooler.host(), pooler.port());
    REQUIRE(a.startup(env.superuser, env.database).back().type == 'Z');
    REQUIRE(a.send(wire::message('P', wire::cstr("") +
                                           wire::cstr("SELECT pg_try_advisory_lock(" + key + ")") +
                                           wire::i16(0)) +
                   wire::sync()));
    REQUIRE(a.read_until_ready_or_error().back().type == 'Z');
    REQUIRE(a.send(wire::message('P', wire::cstr("broken") + wire::cstr("SELEC 1") + wire::i16(0)) +
                   wire::message('P', wire::cstr("") +
                                          wire::cstr("SELECT pg_advisory_unlock(" + key + ")") +
                                          wire::i16(0)) +
                   wire::sync()));
    auto skipped = a.read_until_ready_or_error();
    REQUIRE(wire::first_error_sqlstate(skipped) == "42601");
    REQUIRE(a.read_until_ready_or_error().back().type == 'Z');  // after the error, the Sync's
    run_extended(a, "take", "SELECT pg_advisory_lock(" + key + ")");
    run_extended(a, "");  // the backend runs the try-lock: the lock is held twice now
    Conn other = Conn::must(pooler.conninfo());
    auto held = other.exec("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                           "pid = pg_backend_pid()");
    PGT_REQUIRE_OK(held);
    CHECK(held.value() == "0");
    // The client still has its lock, twice, as on a direct connection.
    CHECK(raw_scalar(a, "SELECT pg_advisory_unlock(" + key + ")") == "t");
    CHECK(raw_scalar(a, "SELECT pg_advisory_unlock(" + key + ")") == "t");
    CHECK(raw_scalar(a, "SELECT pg_advisory_unlock(" + key + ")") == "f");
}

TEST_CASE("settings replayed for a client that leaves during the replay are not handed on") {
    // The replay (a parameter sync) completes after its client is gone: the backend then has that
    // client's settings, and the next client's replay must undo them.
    Pgtether pooler(pool_config("transaction", 1, {{"query_wait_timeout", "20"}}));
    const TestEnv& env = TestEnv::get();
    RawConn a(pooler.host(), pooler.port());
    REQUIRE(a.startup(env.superuser, env.database).back().type == 'Z');
    REQUIRE(a.send(wire::query("SET app.left_early = 'dirty'")));
    REQUIRE(a.read_until_ready_or_error().back().type == 'Z');
    {
        // Another client takes the one backend: its replay resets a's setting there.
        Conn b = Conn::must(pooler.conninfo());
        auto r = b.exec("SELECT coalesce(current_setting('app.left_early', true), '')");
        PGT_REQUIRE_OK(r);
        REQUIRE(r.value() == "");
    }
    // a asks again (its setting is replayed first) and is gone before the replay's answer.
    REQUIRE(a.send(wire::query("SELECT 1")));
    a.shutdown_write();
    Conn c = Conn::must(pooler.conninfo());
    auto seen = c.exec("SELECT coalesce(current_setting('app.left_early', true), '')");
    PGT_REQUIRE_OK(seen);
    CHECK(seen.value() == "");
}
