// Lock holders never starve the pool (issue 11, part 3): each tethered backend lets a pool open
// one more backend, up to tether_reserve_size (docs/advisory-locks.md, "Lock holders and the
// pool"). Both sides of the bound, through real libpq clients against the real PostgreSQL: below
// it a client without a lock is answered at once; at it the client waits as in PgBouncer, and the
// exhaustion is logged and counted (SHOW POOLS, metrics). The server side is read from
// pg_stat_activity; every test case uses a role of its own, so backends of tests running in
// parallel never count.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

// pool_mode = transaction, default_pool_size = 2, `role` in the userlist, then `settings`.
PoolerConfig pool_of_two(const std::string& role, std::map<std::string, std::string> settings) {
    PoolerConfig config = pool_config("transaction", 2, settings);
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    return config;
}

// A client that took a session advisory lock through the pooler, and so is tethered.
Conn lock_holder(const Pgtether& pooler, const std::string& role, int key) {
    Conn conn = Conn::must(pooler.conninfo(role));
    conn.exec_ok("SELECT pg_advisory_lock(" + std::to_string(key) + ")");
    return conn;
}

// A client holding a transaction open (and so a backend) until it rolls back or is destroyed.
Conn in_transaction(const Pgtether& pooler, const std::string& role) {
    Conn conn = Conn::must(pooler.conninfo(role));
    conn.exec_ok("BEGIN");
    conn.exec_ok("SELECT 1");
    return conn;
}

// The pool's SHOW POOLS row (the test database, `role`).
NamedRow pool_row(const Pgtether& pooler, const std::string& role) {
    Conn admin = console(pooler);
    Result pools = admin.exec("SHOW POOLS");
    REQUIRE_MESSAGE(pools.ok(), pools.describe());
    for (const auto& row : named_rows(pools)) {
        if (cell(row, "database") == TestEnv::get().database && cell(row, "user") == role) {
            return row;
        }
    }
    FAIL("no SHOW POOLS row for " << role);
    return {};
}

// The value of an unlabelled-by-state per-pool sample in the metrics text, or -1 when missing.
double pool_metric(const std::string& body, const std::string& name, const std::string& role) {
    const std::string prefix =
        name + "{database=\"" + TestEnv::get().database + "\",user=\"" + role + "\"} ";
    auto at = body.find("\n" + prefix);
    if (at == std::string::npos) return -1;
    return std::stod(body.substr(at + 1 + prefix.size()));
}

}  // namespace

TEST_CASE("default allowance: two lock holders in a pool of two leave the pool to the others") {
    const std::string role = private_role("pgt_treserve_default");
    REQUIRE(settled(role));
    // The default tether_reserve_size (-1: as many as the pool's size, here 2). A wait would last
    // query_wait_timeout (30 s); the test allows 5 s for an answer that must not wait at all.
    Pgtether pooler(pool_of_two(role, {{"query_wait_timeout", "30"}}));
    Conn a = lock_holder(pooler, role, 7101);
    Conn b = lock_holder(pooler, role, 7102);
    // The probe that tethers runs after the client has its answer.
    REQUIRE(eventually([&] { return cell(pool_row(pooler, role), "sv_tethered") == "2"; }));

    // A client without a lock is answered at once...
    Conn c = Conn::must(pooler.conninfo(role));
    send_query(c, "SELECT 'not starved'");
    auto answer = wait_result(c, 5s);
    REQUIRE_MESSAGE(answer.has_value(), "the third client waited for a backend");
    CHECK(answer->value() == "not starved");

    // ...and the clients without a lock have the whole pool: two open transactions at once.
    c.exec_ok("BEGIN");
    c.exec_ok("SELECT 1");
    Conn d = Conn::must(pooler.conninfo(role));
    send_query(d, "BEGIN; SELECT 'second'");
    answer = wait_result(d, 5s);
    REQUIRE_MESSAGE(answer.has_value(), "the second transaction waited for a backend");
    CHECK(answer->value() == "second");
    CHECK(backends_of(role) == 4);  // pool_size + tether_reserve_size, never more

    // A third one is one too many for a pool of two: it waits as in any pool, and that is not
    // the allowance's fault (no more lock holders than it covers).
    Conn e = Conn::must(pooler.conninfo(role));
    send_query(e, "SELECT 'third'");
    CHECK_FALSE(wait_result(e, 1500ms).has_value());
    CHECK(backends_of(role) == 4);
    c.exec_ok("ROLLBACK");
    answer = wait_result(e, 10s);
    REQUIRE(answer.has_value());
    CHECK(answer->value() == "third");
    d.exec_ok("ROLLBACK");
    auto row = pool_row(pooler, role);
    CHECK(cell(row, "tether_reserve_exhausted") == "0");
    CHECK(cell(row, "cl_tethered") == "2");
    CHECK(backends_of(role) <= 4);

    // The locks are still exclusive: the other clients cannot take them.
    CHECK(scalar(c, "SELECT pg_try_advisory_lock(7101)") == "f");

    // When the tethers end, the surplus backends close once idle: back to pool_size.
    CHECK(scalar(a, "SELECT pg_advisory_unlock(7101)") == "t");
    CHECK(scalar(b, "SELECT pg_advisory_unlock(7102)") == "t");
    CHECK(eventually([&] { return backends_of(role) <= 2; }, 15s));
    CHECK_MESSAGE(pooler.wait_for_log("beyond pool_size and the tether allowance in use"),
                  pooler.log());
    CHECK(scalar(c, "SELECT 'still served'") == "still served");
    CHECK(pooler.log().find(") exhausted") == std::string::npos);
}

TEST_CASE("a client waiting in a full pool gets a backend when another one becomes tethered") {
    const std::string role = private_role("pgt_treserve_widen");
    REQUIRE(settled(role));
    Pgtether pooler(pool_of_two(role, {{"query_wait_timeout", "30"}}));
    Conn a = in_transaction(pooler, role);
    Conn b = in_transaction(pooler, role);
    Conn c = Conn::must(pooler.conninfo(role));
    send_query(c, "SELECT 'widened'");
    CHECK_FALSE(wait_result(c, 1500ms).has_value());  // a full pool of two, nobody tethered
    // a takes a session lock and ends its transaction: it stays on its backend, tethered, and
    // the pool may open one more backend, which goes to c (b still holds the other).
    a.exec_ok("SELECT pg_advisory_lock(7501)");
    a.exec_ok("COMMIT");
    auto answer = wait_result(c, 5s);
    REQUIRE_MESSAGE(answer.has_value(), "the waiting client did not get the allowance's backend");
    CHECK(answer->value() == "widened");
    CHECK(backends_of(role) == 3);
    b.exec_ok("ROLLBACK");
    CHECK(scalar(a, "SELECT pg_advisory_unlock(7501)") == "t");
}

TEST_CASE("the allowance used up: a client without a lock waits as before; logged and counted") {
    const std::string role = private_role("pgt_treserve_exhausted");
    REQUIRE(settled(role));
    // Three lock holders, an allowance of one: the pool is down to one backend of its own... and
    // that one is tethered too. query_wait_timeout bounds the wait.
    std::unique_ptr<Pgtether> started;
    int metrics_port = 0;
    for (int attempt = 1; !started; ++attempt) {
        metrics_port = free_port();
        auto pooler = std::make_unique<Pgtether>(
            pool_of_two(role, {{"tether_reserve_size", "1"},
                               {"query_wait_timeout", "2"},
                               {"metrics_listen_port", std::to_string(metrics_port)}}));
        if (pooler->wait_for_log("metrics on http://") && pooler->running()) {
            started = std::move(pooler);
        } else {
            REQUIRE_MESSAGE(attempt < 3, pooler->log());
        }
    }
    Pgtether& pooler = *started;

    Conn a = lock_holder(pooler, role, 7201);
    Conn b = lock_holder(pooler, role, 7202);
    // Two lock holders, allowance one: pool_size + 1 backends, one of them for the others.
    Conn plain = Conn::must(pooler.conninfo(role));
    CHECK(scalar(plain, "SELECT 'one left'") == "one left");
    Conn c = lock_holder(pooler, role, 7203);
    CHECK(backends_of(role) == 3);
    CHECK(eventually([&] { return cell(pool_row(pooler, role), "sv_tethered") == "3"; }));

    // Every backend the pool may have is tethered: the plain client waits, as in PgBouncer.
    auto started_at = std::chrono::steady_clock::now();
    Result r = first_error(plain.exec_all("SELECT 'never'"));
    auto waited = std::chrono::steady_clock::now() - started_at;
    CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
    CHECK(waited >= 1500ms);
    CHECK(backends_of(role) == 3);  // pool_size + tether_reserve_size, never more
    CHECK(pooler.wait_for_log(
        "tether_reserve_size (1) exhausted: 3 tethered servers leave 0 of pool_size 2"));
    // One wait, one occurrence. (With two workers c may have waited a moment too, on the worker
    // without plain's idle backend until it was lent over: another occurrence, counted.)
    const int first = std::stoi(cell(pool_row(pooler, role), "tether_reserve_exhausted"));
    if (workers_in_this_run() == 1) CHECK(first == 1);
    CHECK(first >= 1);
    CHECK(pool_metric(http_get("127.0.0.1", metrics_port, "/metrics").body,
                      "pgtether_tether_reserve_exhausted_total", role) == first);

    // Another wait is another occurrence. When a lock holder lets go, its backend serves the
    // waiting client.
    Conn waiter = Conn::must(pooler.conninfo(role));
    send_query(waiter, "SELECT 'served after an unlock'");
    CHECK_FALSE(wait_result(waiter, 700ms).has_value());
    CHECK(scalar(a, "SELECT pg_advisory_unlock(7201)") == "t");
    auto answer = wait_result(waiter, 10s);
    REQUIRE(answer.has_value());
    CHECK(answer->value() == "served after an unlock");
    // One more occurrence; with two workers the waiter's worker may count its wait again while a
    // slot is lent over from the other (as c's above), so at least one more there.
    const int second = std::stoi(cell(pool_row(pooler, role), "tether_reserve_exhausted"));
    if (workers_in_this_run() == 1) CHECK(second == first + 1);
    CHECK(second >= first + 1);
    CHECK(pool_metric(http_get("127.0.0.1", metrics_port, "/metrics").body,
                      "pgtether_tether_reserve_exhausted_total", role) == second);
    CHECK(backends_of(role) <= 3);
    CHECK(scalar(c, "SELECT pg_advisory_unlock(7203)") == "t");
    CHECK(scalar(b, "SELECT pg_advisory_unlock(7202)") == "t");
}

TEST_CASE("max_db_connections stays a hard cap for the allowance") {
    const std::string role = private_role("pgt_treserve_capped");
    REQUIRE(settled(role));
    Pgtether pooler(pool_of_two(role, {{"max_db_connections", "3"}, {"query_wait_timeout", "30"}}));
    Conn a = lock_holder(pooler, role, 7301);
    Conn b = lock_holder(pooler, role, 7302);
    REQUIRE(eventually([&] { return cell(pool_row(pooler, role), "sv_tethered") == "2"; }));
    // The allowance would give the others two backends; the database cap leaves them one.
    Conn c = in_transaction(pooler, role);
    Conn d = Conn::must(pooler.conninfo(role));
    send_query(d, "SELECT 'capped'");
    CHECK_FALSE(wait_result(d, 1500ms).has_value());
    CHECK(backends_of(role) == 3);
    c.exec_ok("ROLLBACK");
    auto answer = wait_result(d, 10s);
    REQUIRE(answer.has_value());
    CHECK(answer->value() == "capped");
    // Not the allowance's doing: nothing is counted.
    CHECK(cell(pool_row(pooler, role), "tether_reserve_exhausted") == "0");
    CHECK(backends_of(role) <= 3);
}

TEST_CASE("tether_reserve_size = 0: tethered backends count against the pool, as before") {
    const std::string role = private_role("pgt_treserve_zero");
    REQUIRE(settled(role));
    Pgtether pooler(pool_of_two(
        role, {{"tether_reserve_size", "0"}, {"query_wait_timeout", "30"}, {"stats_period", "1"}}));
    Conn a = lock_holder(pooler, role, 7401);
    REQUIRE(eventually([&] { return cell(pool_row(pooler, role), "sv_tethered") == "1"; }));
    Conn c = in_transaction(pooler, role);
    Conn d = Conn::must(pooler.conninfo(role));
    send_query(d, "SELECT 'after the other'");
    CHECK_FALSE(wait_result(d, 1500ms).has_value());
    CHECK(backends_of(role) == 2);
    CHECK(pooler.wait_for_log(
        "tether_reserve_size (0) exhausted: 1 tethered servers leave 1 of pool_size 2"));
    c.exec_ok("ROLLBACK");
    auto answer = wait_result(d, 10s);
    REQUIRE(answer.has_value());
    CHECK(answer->value() == "after the other");
    CHECK(cell(pool_row(pooler, role), "tether_reserve_exhausted") == "1");
    // The stats_period summary counts it too.
    CHECK(pooler.wait_for_log("0 leaks found, 1 times tether_reserve_size exhausted"));
}
