// The tether (issue "session-level advisory locks stay correct under transaction pooling"), driven
// through pgtether by real libpq clients against a real PostgreSQL, with a pool of two backends.
//
// How a test sees whether a client is tethered: the pool has two backends and no tether allowance
// (tether_reserve_size = 0). A tethered client keeps one, so two other clients cannot both open a
// transaction at once — the second one waits. An
// untethered client keeps none, so both can. The lock state itself is read from pg_locks on a
// direct connection.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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

PoolerConfig two_backends(std::map<std::string, std::string> extra = {}) {
    extra.emplace("query_wait_timeout", "20");
    // No allowance on top of the pool, so that a tethered client visibly takes one of the two
    // backends (test_tether_reserve.cpp tests the allowance).
    extra.emplace("tether_reserve_size", "0");
    return pool_config("transaction", 2, extra);
}

int backend_pid(Conn& conn) {
    auto r = conn.exec("SELECT pg_backend_pid()");
    REQUIRE_MESSAGE(r.ok(), r.describe());
    return std::stoi(r.value());
}

// Session-level advisory locks on `key` (bigint form) held by anyone, seen directly.
int locks_held(long long key) {
    Conn direct = Conn::must(direct_conninfo());
    auto r = direct.exec(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND "
        "((classid::bigint << 32) | objid::bigint) = " + std::to_string(key));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    return std::stoi(r.value());
}

// Polls until no lock on `key` is held; false after `timeout`.
bool lock_released_within(long long key, std::chrono::milliseconds timeout) {
    return eventually([&] { return locks_held(key) == 0; }, timeout);
}

}  // namespace

TEST_CASE("a lock holder keeps its backend across transactions; others cannot take the lock") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    Conn other = Conn::must(pooler.conninfo());

    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(101)"));
    int pid = backend_pid(a);
    for (int i = 0; i < 10; ++i) {
        // Other traffic on the pool must never land on the tethered backend.
        CHECK(backend_pid(other) != pid);
        CHECK(backend_pid(a) == pid);
    }
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(101)") == "f");
    CHECK(second_transaction_waits(pooler.conninfo()));
    CHECK(scalar(a, "SELECT pg_advisory_unlock(101)") == "t");
    CHECK(locks_held(101) == 0);
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(pooler.wait_for_log("tethered to backend"));
    CHECK(pooler.wait_for_log("untethered from backend"));
}

TEST_CASE("stacked locks need as many unlocks; unlock_all releases everything") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    for (int i = 0; i < 3; ++i) PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(7)"));
    CHECK(scalar(a, "SELECT pg_advisory_unlock(7)") == "t");
    CHECK(scalar(a, "SELECT pg_advisory_unlock(7)") == "t");
    CHECK(second_transaction_waits(pooler.conninfo()));
    CHECK(scalar(a, "SELECT pg_advisory_unlock(7)") == "t");
    CHECK(two_transactions_fit(pooler.conninfo()));

    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(8), pg_advisory_lock(9), pg_advisory_lock(8)"));
    CHECK(second_transaction_waits(pooler.conninfo()));
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_unlock_all()"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(locks_held(8) == 0);
    CHECK(locks_held(9) == 0);
}

TEST_CASE("failed try-locks and transaction-level locks never tether") {
    Pgtether pooler(two_backends());
    Conn holder = Conn::must(pooler.conninfo());
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_lock(55)"));
    CHECK(scalar(a, "SELECT pg_try_advisory_lock(55)") == "f");
    CHECK(scalar(a, "SELECT pg_try_advisory_lock_shared(55)") == "f");
    // `holder` keeps one backend; `a` must have given the other back: a third client gets it.
    Conn c = Conn::must(pooler.conninfo());
    send_query(c, "BEGIN; SELECT 1");
    CHECK(wait_result(c, 2s).has_value());
    PGT_CHECK_OK(c.exec("ROLLBACK"));
    PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_unlock(55)"));

    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_xact_lock(56), pg_try_advisory_xact_lock(57)"));
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(locks_held(56) == 0);
}

TEST_CASE("a failed try-lock with an output column name is counted exactly: no tether, no probe") {
    // graphile-migrate and node-pg-migrate name the column (`AS locked`, `AS "lockObtained"`);
    // the statement still says everything, so the loser is never tethered and never probed.
    Pgtether pooler(two_backends({{"tether_probe_delay", "0"}}));
    Conn holder = Conn::must(pooler.conninfo());
    Conn loser = Conn::must(pooler.conninfo());
    Conn admin = Conn::must(pooler.conninfo("", "pgbouncer"));
    auto probes = [&] {
        long long total = 0;
        for (const auto& row : named_rows(admin.exec("SHOW STATS_TOTALS"))) {
            total += cell_int(row, "probe_count");
        }
        return total;
    };
    PGT_REQUIRE_OK(holder.exec_params("SELECT pg_try_advisory_lock($1) AS locked", {"5501"}));
    const long long before = probes();
    for (int i = 0; i < 5; ++i) {
        auto r = loser.exec_params("SELECT pg_try_advisory_lock($1) AS locked", {"5501"});
        PGT_REQUIRE_OK(r);
        CHECK(r.columns == std::vector<std::string>{"locked"});
        CHECK(r.value() == "f");
        auto q = loser.exec("select pg_try_advisory_lock(5501) as \"lockObtained\"");
        PGT_REQUIRE_OK(q);
        CHECK(q.value() == "f");
    }
    CHECK(probes() == before);
    // `holder` keeps one backend, `loser` gave its back: a third client fits beside it.
    Conn c = Conn::must(pooler.conninfo());
    send_query(c, "BEGIN; SELECT 1");
    CHECK(wait_result(c, 2s).has_value());
    PGT_CHECK_OK(c.exec("ROLLBACK"));
    CHECK(scalar(holder, "SELECT pg_advisory_unlock(5501) AS released") == "t");
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(probes() == before);
}

TEST_CASE("a session lock survives ROLLBACK, so the client stays tethered") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(10)"));
    PGT_REQUIRE_OK(a.exec("ROLLBACK"));
    CHECK(scalar(b, "SELECT pg_try_advisory_lock(10)") == "f");
    CHECK(second_transaction_waits(pooler.conninfo()));
    // An unlock in a failed transaction is effective too (it is not transactional either).
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    CHECK(scalar(a, "SELECT pg_advisory_unlock(10)") == "t");
    PGT_CHECK_SQLSTATE(a.exec("SELECT 1/0"), "22012");
    PGT_REQUIRE_OK(a.exec("ROLLBACK"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(scalar(b, "SELECT pg_try_advisory_lock(10)") == "t");
    PGT_REQUIRE_OK(b.exec("SELECT pg_advisory_unlock(10)"));
}

TEST_CASE("shared and exclusive locks, bigint and two-int keys, behave as on direct connections") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    Conn c = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock_shared(20)"));
    CHECK(scalar(b, "SELECT pg_try_advisory_lock_shared(20)") == "t");
    // Both holders are tethered now: the pool of two is full, the third client waits for them.
    send_query(c, "SELECT pg_try_advisory_lock(20)");
    CHECK_FALSE(wait_result(c, 500ms).has_value());
    CHECK(scalar(a, "SELECT pg_advisory_unlock_shared(20)") == "t");
    auto exclusive = wait_result(c, 5s);
    REQUIRE(exclusive.has_value());
    CHECK(exclusive->value() == "f");  // b still shares it
    CHECK(scalar(b, "SELECT pg_advisory_unlock_shared(20)") == "t");
    CHECK(scalar(c, "SELECT pg_try_advisory_lock(20)") == "t");
    CHECK(scalar(c, "SELECT pg_advisory_unlock(20)") == "t");

    // (int, int) keys live in their own key space.
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(1, 2)"));
    CHECK(scalar(b, "SELECT pg_try_advisory_lock(1, 2)") == "f");
    CHECK(scalar(b, "SELECT pg_try_advisory_lock((1::bigint << 32) | 2)") == "t");
    CHECK(scalar(a, "SELECT pg_advisory_unlock(1, 2)") == "t");
    CHECK(scalar(b, "SELECT pg_advisory_unlock((1::bigint << 32) | 2)") == "t");
    CHECK(two_transactions_fit(pooler.conninfo()));
}

TEST_CASE("lock calls are caught in every form a client can send them") {
    Pgtether pooler(two_backends());
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    auto check_tethered_then_release = [&](long long key, const char* form) {
        INFO(form);
        CHECK(scalar(b, "SELECT pg_try_advisory_lock(" + std::to_string(key) + ")") == "f");
        CHECK(second_transaction_waits(pooler.conninfo()));
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_unlock_all()"));
        CHECK(two_transactions_fit(pooler.conninfo()));
    };

    SUBCASE("extended protocol, unnamed statement") {
        PGT_REQUIRE_OK(a.exec_params("SELECT pg_advisory_lock($1)", {"301"}));
        check_tethered_then_release(301, "unnamed");
    }
    SUBCASE("named statement") {
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(a.prepare("take", "SELECT pg_advisory_lock($1::bigint)"));
        PGT_REQUIRE_OK(a.exec_prepared("take", {"302"}));
        PGT_REQUIRE_OK(a.exec("COMMIT"));
        check_tethered_then_release(302, "named, same transaction");
    }
    SUBCASE("pipeline mode") {
        REQUIRE(PQenterPipelineMode(a.raw()) == 1);
        REQUIRE(PQsendQueryParams(a.raw(), "SELECT 1", 0, nullptr, nullptr, nullptr, nullptr, 0));
        REQUIRE(PQsendQueryParams(a.raw(), "SELECT pg_advisory_lock(304)", 0, nullptr, nullptr,
                                  nullptr, nullptr, 0));
        REQUIRE(PQpipelineSync(a.raw()) == 1);
        int results = 0;
        bool synced = false;
        while (!synced) {
            PGresult* res = PQgetResult(a.raw());
            if (!res) continue;
            if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) synced = true;
            else CHECK(PQresultStatus(res) == PGRES_TUPLES_OK);
            ++results;
            PQclear(res);
        }
        REQUIRE(PQexitPipelineMode(a.raw()) == 1);
        check_tethered_then_release(304, "pipeline");
    }
    SUBCASE("multi-statement string, schema-qualified, upper case, quoted") {
        PGT_REQUIRE_OK(a.exec("SELECT 1; SELECT PG_CATALOG.PG_ADVISORY_LOCK(305); SELECT 2"));
        check_tethered_then_release(305, "multi-statement upper case");
        PGT_REQUIRE_OK(a.exec("SELECT \"pg_catalog\".\"pg_advisory_lock\"(306)"));
        check_tethered_then_release(306, "quoted identifiers");
    }
    SUBCASE("DO block") {
        PGT_REQUIRE_OK(a.exec("DO $body$ BEGIN PERFORM pg_advisory_lock(307); END $body$"));
        check_tethered_then_release(307, "DO");
        PGT_REQUIRE_OK(
            a.exec("DO $$ BEGIN EXECUTE 'SELECT pg_advisory_lock(' || 308 || ')'; END $$"));
        check_tethered_then_release(308, "dynamic SQL in DO");
    }
    SUBCASE("many keys at once") {
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(k) FROM generate_series(310, 314) AS k"));
        for (int k = 310; k <= 314; ++k) CHECK(locks_held(k) == 1);
        check_tethered_then_release(312, "many keys");
        for (int k = 310; k <= 314; ++k) CHECK(locks_held(k) == 0);
    }
    SUBCASE("mentions in comments and string literals do not tether") {
        PGT_REQUIRE_OK(a.exec("SELECT 1 -- pg_advisory_lock(320)"));
        PGT_REQUIRE_OK(a.exec("SELECT /* pg_advisory_lock(321) */ 1"));
        PGT_REQUIRE_OK(a.exec("SELECT 'pg_advisory_lock(322)'"));
        CHECK(two_transactions_fit(pooler.conninfo()));
    }
}

TEST_CASE("a tethered client that leaves is scrubbed: its locks are released and the backend reused") {
    // This pooler's backends carry an application_name of their own, so the count below is not
    // disturbed by other integration tests running in parallel against the same server.
    const TestEnv& env = TestEnv::get();
    PoolerConfig config = two_backends();
    config.databases = {"* = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
                        " application_name=tether_scrub_test"};
    Pgtether pooler(config);
    Conn probe = Conn::must(direct_conninfo());
    auto backend_count = [&]() {
        return std::stoi(scalar(probe,
                                "SELECT count(*) FROM pg_stat_activity WHERE "
                                "backend_type = 'client backend' AND "
                                "application_name = 'tether_scrub_test' AND "
                                "pid <> pg_backend_pid() AND datname = current_database()"));
    };

    SUBCASE("Terminate") {
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(400)"));
        a.close();
        CHECK(lock_released_within(400, 1s));
    }
    SUBCASE("socket closed without Terminate") {
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(401)"));
        ::shutdown(PQsocket(a.raw()), SHUT_RDWR);
        CHECK(lock_released_within(401, 1s));
    }
    SUBCASE("connection reset mid-transaction") {
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(402)"));
        PGT_REQUIRE_OK(a.exec("CREATE TEMP TABLE scrub_me (x int)"));
        linger hard{1, 0};  // close with RST
        setsockopt(PQsocket(a.raw()), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        ::close(PQsocket(a.raw()));
        CHECK(lock_released_within(402, 1s));
    }
    SUBCASE("killed while waiting for a lock held elsewhere") {
        Conn holder = Conn::must(direct_conninfo());
        PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_lock(403)"));
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(404)"));
        send_query(a, "SELECT pg_advisory_lock(403)");
        CHECK_FALSE(wait_result(a, 300ms).has_value());
        ::shutdown(PQsocket(a.raw()), SHUT_RDWR);
        CHECK(lock_released_within(404, 2s));
        PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_unlock(403)"));
    }
    SUBCASE("mid-COPY") {
        Conn setup = Conn::must(direct_conninfo());
        PGT_REQUIRE_OK(setup.exec("CREATE TABLE IF NOT EXISTS tether_copy (x int)"));
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(405)"));
        auto copy = a.exec("COPY tether_copy FROM STDIN");
        REQUIRE(copy.status == PGRES_COPY_IN);
        REQUIRE(PQputCopyData(a.raw(), "1\n2\n", 4) == 1);
        REQUIRE(PQflush(a.raw()) == 0);
        ::shutdown(PQsocket(a.raw()), SHUT_RDWR);
        CHECK(lock_released_within(405, 1s));
        CHECK(scalar(setup, "SELECT count(*) FROM tether_copy") == "0");
    }
    // After any of these the pool still works with at most its two backends: the scrubbed one
    // was cleaned and reused, not closed and replaced.
    CHECK(two_transactions_fit(pooler.conninfo()));
    // With two workers a lend closes a server and opens another: the closed backend exits when
    // it reads the end, later on a loaded machine.
    CHECK(eventually([&] { return backend_count() <= 2; }));
    CHECK(backend_count() >= 1);  // the filter does see this pooler's backends
    CHECK(pooler.log().find("scrub failed") == std::string::npos);
    // No server was closed (with two workers a lend closes one: see workers_in_this_run).
    if (workers_in_this_run() == 1) CHECK(pooler.log().find(") backend pid ") == std::string::npos);
}

TEST_CASE("a backend whose clean-up fails is closed, never reused") {
    Conn admin = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(admin.exec(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tether_limited') THEN "
        "CREATE ROLE tether_limited LOGIN; END IF; END $$"));
    PGT_REQUIRE_OK(admin.exec("GRANT CONNECT ON DATABASE pgtether_test TO tether_limited"));
    // Without SELECT on pg_locks the scrub cannot verify that the backend is clean. (Only this
    // role is affected: the other tests connect as a superuser.)
    PGT_REQUIRE_OK(exec_privilege_change(admin, "REVOKE SELECT ON pg_catalog.pg_locks FROM PUBLIC"));
    struct Restore {
        Conn& admin;
        ~Restore() { exec_privilege_change(admin, "GRANT SELECT ON pg_catalog.pg_locks TO PUBLIC"); }
    } restore{admin};

    PoolerConfig config = two_backends();
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"tether_limited", ""},
                                                                        {"postgres", ""}};
    Pgtether pooler(config);
    Conn a = Conn::must(pooler.conninfo("tether_limited"));
    int pid = backend_pid(a);
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(500)"));
    a.close();
    // The backend is closed instead: its session ends and PostgreSQL drops the lock with it.
    // (The probe at the end of the lock's transaction failed too: the client stayed tethered.)
    CHECK(lock_released_within(500, 2s));
    CHECK(pooler.wait_for_log("scrub failed"));
    // The backend process leaves pg_stat_activity a moment after its session's locks are gone.
    CHECK(eventually([&] {
        return scalar(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                                 std::to_string(pid)) == "0";
    }));
}

TEST_CASE("tethered backends count against the pool: others queue, then time out") {
    Pgtether pooler(two_backends({{"query_wait_timeout", "1"}}));
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    Conn c = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(600)"));
    PGT_REQUIRE_OK(b.exec("SELECT pg_advisory_lock(601)"));
    auto started = std::chrono::steady_clock::now();
    auto r = c.exec("SELECT 1");
    auto waited = std::chrono::steady_clock::now() - started;
    // A FATAL error followed by the connection closing: libpq reports both in the error message.
    CHECK(r.is_error());
    CHECK_MESSAGE(c.error().find("FATAL:  query_wait_timeout") != std::string::npos, c.error());
    CHECK(waited >= 900ms);
    // The holders are unaffected.
    CHECK(scalar(a, "SELECT pg_advisory_unlock(600)") == "t");
    CHECK(scalar(b, "SELECT pg_advisory_unlock(601)") == "t");
}

TEST_CASE("stress: lock, read, write, unlock through a pool of two keeps the counter exact") {
    Conn setup = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(setup.exec("DROP TABLE IF EXISTS tether_counter"));
    PGT_REQUIRE_OK(setup.exec("CREATE TABLE tether_counter (n int)"));
    PGT_REQUIRE_OK(setup.exec("INSERT INTO tether_counter VALUES (0)"));
    Pgtether pooler(two_backends());
    constexpr int kClients = 6;
    constexpr int kRounds = 25;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kClients; ++t) {
        threads.emplace_back([&]() {
            Conn conn(pooler.conninfo());
            if (!conn.ok()) {
                ++failures;
                return;
            }
            for (int i = 0; i < kRounds; ++i) {
                // Each step is its own transaction; only the advisory lock keeps them atomic.
                if (!conn.exec("SELECT pg_advisory_lock(700)").ok()) ++failures;
                auto read = conn.exec("SELECT n FROM tether_counter");
                if (!read.ok()) {
                    ++failures;
                    continue;
                }
                int n = std::stoi(read.value());
                if (!conn.exec("UPDATE tether_counter SET n = " + std::to_string(n + 1)).ok()) {
                    ++failures;
                }
                auto unlock = conn.exec("SELECT pg_advisory_unlock(700)");
                if (!unlock.ok() || unlock.value() != "t") ++failures;
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(failures == 0);
    CHECK(scalar(setup, "SELECT n FROM tether_counter") == std::to_string(kClients * kRounds));
    CHECK(locks_held(700) == 0);
}

TEST_CASE("advisory_lock_tracking = off behaves like PgBouncer: no tether") {
    Pgtether pooler(two_backends({{"advisory_lock_tracking", "off"}}));
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(800)"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    // The lock stayed behind on a pooled backend: the PgBouncer failure mode. (With two workers
    // the backend may have been lent to the other worker since, which closes it, lock and all.)
    if (workers_in_this_run() == 1) CHECK(locks_held(800) == 1);
    Conn direct = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(direct.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND "
        "objid = 800 AND objsubid = 1"));
}

TEST_CASE("locks taken inside functions: advisory_lock_functions and every_transaction") {
    Conn setup = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(setup.exec(
        "CREATE OR REPLACE FUNCTION take_job_lock(k bigint) RETURNS void LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_advisory_lock(k); END $$"));
    PGT_REQUIRE_OK(setup.exec(
        "CREATE OR REPLACE FUNCTION drop_job_lock(k bigint) RETURNS boolean LANGUAGE sql AS "
        "'SELECT pg_advisory_unlock(k)'"));

    SUBCASE("named in advisory_lock_functions") {
        Pgtether pooler(two_backends({{"advisory_lock_functions", "take_job_lock, drop_job_lock"}}));
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT take_job_lock(900)"));
        CHECK(second_transaction_waits(pooler.conninfo()));
        CHECK(scalar(a, "SELECT drop_job_lock(900)") == "t");
        CHECK(two_transactions_fit(pooler.conninfo()));
    }
    SUBCASE("every_transaction probes without any mention") {
        Pgtether pooler(two_backends({{"advisory_lock_tracking", "every_transaction"}}));
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT take_job_lock(901)"));
        CHECK(second_transaction_waits(pooler.conninfo()));
        CHECK(scalar(a, "SELECT drop_job_lock(901)") == "t");
        CHECK(two_transactions_fit(pooler.conninfo()));
    }
    SUBCASE("with neither (nor discovery), the leak sweep scrubs the lock left on an idle backend") {
        // Discovery would find take_job_lock (tests/integration/test_lock_discovery.cpp).
        bool whole = false;
        SUBCASE("the statement in the report has its literals redacted by default") {}
        SUBCASE("log_statement_text = 1 logs it whole") {
            whole = true;
        }
        // The sweep comes server_check_delay after the release: 2 s, so that the check that the
        // lock did leak (a new connection, slow on a loaded machine) comes before it.
        Pgtether pooler(two_backends({{"server_check_delay", "2"},
                                      {"advisory_lock_discovery", "off"},
                                      {"log_statement_text", whole ? "1" : "0"}}));
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT take_job_lock(902) /* 'pin-4711' */, 'secret-literal'"));
        CHECK(locks_held(902) == 1);  // invisible to the trigger: leaked on a pooled backend
        CHECK(lock_released_within(902, 6s));
        CHECK(pooler.wait_for_log("leaked session state"));
        if (whole) {
            CHECK(pooler.log().find("take_job_lock(902) /* 'pin-4711' */, 'secret-literal'") !=
                  std::string::npos);
        } else {
            CHECK(pooler.log().find("take_job_lock(?) /* 'pin-4711' */, ?)") != std::string::npos);
            CHECK(pooler.log().find("secret-literal") == std::string::npos);
            CHECK(pooler.log().find("take_job_lock(902)") == std::string::npos);
        }
        // The report names the client that left the lock (kept by the backend since the link).
        const TestEnv& env = TestEnv::get();
        CHECK(pooler.log().find("(last used by C-") != std::string::npos);
        CHECK(pooler.log().find(" " + env.database + "/" + env.superuser + "@127.0.0.1:") !=
              std::string::npos);
    }
}

TEST_CASE("tethered_idle_timeout disconnects an idle lock holder and releases its locks") {
    Pgtether pooler(two_backends({{"tethered_idle_timeout", "1"}}));
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(1000)"));
    std::this_thread::sleep_for(1500ms);
    auto r = a.exec("SELECT 1");
    CHECK(r.is_error());
    CHECK(lock_released_within(1000, 1s));
    CHECK(pooler.wait_for_log("tethered_idle_timeout"));
}

TEST_CASE("statement mode: a lock holder is tethered too") {
    Pgtether pooler(two_backends({{"pool_mode", "statement"}}));
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(1100)"));
    CHECK(scalar(b, "SELECT pg_try_advisory_lock(1100)") == "f");
    CHECK(scalar(a, "SELECT pg_advisory_unlock(1100)") == "t");
    CHECK(scalar(b, "SELECT pg_try_advisory_lock(1100)") == "t");
    CHECK(scalar(b, "SELECT pg_advisory_unlock(1100)") == "t");
}

TEST_CASE("a failed extended-protocol message: no probe until the client's Sync") {
    // After an error in an extended-protocol message (here a Flush with a body) the backend
    // discards everything up to the next Sync: a probe sent meanwhile is discarded too and its
    // Sync's ReadyForQuery comes back without rows, which must not be taken for "no locks".
    // With deferred probes, the probe of an idle tethered client is when it would happen.
    Pgtether pooler(pool_config("transaction", 1,
                                {{"query_wait_timeout", "20"},
                                 {"tether_probe_delay", "1"},
                                 {"tether_reserve_size", "0"}}));
    const TestEnv& env = TestEnv::get();
    const std::string key = "7700555";
    RawConn a(pooler.host(), pooler.port());
    REQUIRE(a.startup(env.superuser, env.database).back().type == 'Z');
    // A lock only a probe can count: the client stays tethered, its probe deferred.
    REQUIRE(a.send(wire::query("SELECT pg_advisory_lock(" + key + ") FROM (SELECT 1) AS once")));
    REQUIRE(a.read_until_ready_or_error().back().type == 'Z');
    REQUIRE(a.send(wire::message('H', "junk")));
    auto failed = a.read_until_ready_or_error();
    REQUIRE(wire::first_error_sqlstate(failed) == "08P01");
    // Another client waits for the one backend: the janitor would probe the idle tether now.
    Conn b = Conn::must(pooler.conninfo());
    send_query(b, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                  "pid = pg_backend_pid()");
    CHECK_FALSE(wait_result(b, 1500ms).has_value());
    // The client's session is as it left it: the Sync ends the error, the lock is still held;
    // unlocked, the client lets the backend go.
    REQUIRE(a.send(wire::sync()));
    REQUIRE(a.read_until_ready_or_error().back().type == 'Z');
    REQUIRE(a.send(wire::query("SELECT pg_advisory_unlock(" + key + ")")));
    auto unlocked = a.read_until_ready_or_error();
    bool released = false;
    for (const auto& m : unlocked) released = released || (m.type == 'D' && m.body.find('t') != std::string::npos);
    CHECK_MESSAGE(released, wire::describe(unlocked));
    auto held = wait_result(b, 10s);
    REQUIRE(held.has_value());
    CHECK(held->value() == "0");
}

TEST_CASE(
    "without statement translation, a Bind of a name the backend got from another client is "
    "probed") {
    // max_prepared_statements = 0: names go to the backends as the clients send them, so a
    // client's name may stand for another client's statement on the backend it meets. The
    // clients below are steered onto given backends, which needs them on one worker.
    Pgtether pooler(two_backends({{"max_prepared_statements", "0"}, {"workers", "1"}}));
    const std::string conninfo = pooler.conninfo();
    Conn a = Conn::must(conninfo);
    Conn b = Conn::must(conninfo);
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    const std::string a_backend = scalar(a, "SELECT pg_backend_pid()");
    // b gets the other backend and leaves a lock statement there under the name s1; a has a
    // harmless one of the same name on its own backend.
    PGT_REQUIRE_OK(b.prepare("s1", "SELECT pg_advisory_lock($1)"));
    PGT_REQUIRE_OK(a.prepare("s1", "SELECT $1::bigint"));
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    // c holds a's backend, so a's next transaction runs on the one with b's s1.
    PGT_REQUIRE_OK(b.exec("BEGIN"));  // b's own backend
    Conn c = Conn::must(conninfo);
    PGT_REQUIRE_OK(c.exec("BEGIN"));
    REQUIRE(scalar(c, "SELECT pg_backend_pid()") == a_backend);
    PGT_REQUIRE_OK(b.exec("ROLLBACK"));
    PGT_REQUIRE_OK(a.exec_prepared("s1", {"731040"}));
    PGT_REQUIRE_OK(c.exec("ROLLBACK"));
    // a now holds a session lock, whatever its own text said: tethered, as on a direct
    // connection the lock would stay with its session.
    CHECK(advisory_locks_held(731040) == 1);
    CHECK(second_transaction_waits(conninfo));
    CHECK(scalar(a, "SELECT pg_advisory_unlock(731040)") == "t");
    CHECK(advisory_locks_held(731040) == 0);
    CHECK(two_transactions_fit(conninfo));
}
