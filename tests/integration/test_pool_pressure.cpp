// Pools under pressure and over time: query_wait_timeout, max_client_conn (53300), the reserve
// pool after reserve_pool_timeout, min_pool_size warm-up, server_idle_timeout and server_lifetime
// recycling, and server_check_query after server_check_delay. The server side is observed in
// pg_stat_activity; every test case uses a role of its own, so backends opened by tests running
// in parallel never count.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

PoolerConfig for_role(const std::string& role, std::map<std::string, std::string> settings) {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "1"}};
    for (auto& [k, v] : settings) config.settings[k] = v;
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    config.extra_args = {"-v"};
    return config;
}

// Holds an open transaction (and so a backend) until destroyed.
struct Holder {
    explicit Holder(const std::string& conninfo) : conn(Conn::must(conninfo)) {
        conn.exec_ok("BEGIN");
        pid = scalar(conn, "SELECT pg_backend_pid()");
    }
    ~Holder() {
        if (conn.ok()) conn.exec("ROLLBACK");
    }
    Conn conn;
    std::string pid;
};

}  // namespace

TEST_CASE("query_wait_timeout: a client waiting too long for a backend gets a clear error") {
    const std::string role = private_role("pgt_pressure_wait");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"query_wait_timeout", "1"}}));
    Holder holder(pooler.conninfo(role));
    Conn waiter = Conn::must(pooler.conninfo(role));
    auto started = std::chrono::steady_clock::now();
    Result r = first_error(waiter.exec_all("SELECT 'never'"));
    auto waited = std::chrono::steady_clock::now() - started;
    CHECK(r.is_error());
    CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
    CHECK(r.sqlstate == "08P01");  // PgBouncer's code for pooler errors
    CHECK(waited >= 900ms);        // it did wait first
    // The holder was not disturbed and only one backend was ever used.
    CHECK(scalar(holder.conn, "SELECT 'holder fine'") == "holder fine");
    CHECK(backends_of(role) == 1);
}

TEST_CASE("max_client_conn: one client too many gets 53300; a free slot is usable again") {
    const std::string role = private_role("pgt_pressure_maxconn");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"max_client_conn", "3"}}));
    std::vector<Conn> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(Conn::must(pooler.conninfo(role)));
    for (int attempt = 0; attempt < 3; ++attempt) {
        Conn extra(pooler.conninfo(role));
        REQUIRE_FALSE(extra.ok());
        CHECK_MESSAGE(extra.error().find("no more connections allowed") != std::string::npos,
                      extra.error());
    }
    // The error carries SQLSTATE 53300 (too_many_connections); read it off the wire.
    {
        PGconn* raw = PQconnectStart(pooler.conninfo(role).c_str());
        PQsetErrorVerbosity(raw, PQERRORS_VERBOSE);
        while (PQconnectPoll(raw) != PGRES_POLLING_FAILED && PQstatus(raw) != CONNECTION_OK) {
            std::this_thread::sleep_for(5ms);
        }
        std::string error = PQerrorMessage(raw);
        PQfinish(raw);
        CHECK_MESSAGE(error.find("53300") != std::string::npos, error);
    }
    for (auto& c : clients) CHECK(scalar(c, "SELECT 1") == "1");
    clients.pop_back();  // closes one
    CHECK(eventually([&] { return Conn(pooler.conninfo(role)).ok(); }));
    // The place of a client that has just said goodbye is free at once, as in PgBouncer (its
    // handle going a moment later must not refuse the next one: PgBouncer 1.24's
    // test_max_client_conn). With one worker its Terminate is read before the next start-up
    // packet; with two the next client may reach the other worker first, which then finds the
    // place free within a moment (counted again at the start-up packet), not strictly at once.
    const bool one_loop = workers_in_this_run() == 1;
    int refused = 0;
    for (int i = 0; i < 30; ++i) {
        Conn next(pooler.conninfo(role));
        if (!next.ok()) {
            ++refused;
            MESSAGE("refused: " << next.error());
            if (!one_loop) CHECK(eventually([&] { return Conn(pooler.conninfo(role)).ok(); }, 1s));
            continue;
        }
        CHECK(scalar(next, "SELECT 1") == "1");
        next.close();  // Terminate, then the next connection right away
    }
    if (one_loop) CHECK(refused == 0);
}

TEST_CASE("max_client_conn does not keep an operator from the console, as in PgBouncer") {
    // PgBouncer's decide_startup_pool: "don't limit admin db". A full pooler is exactly when
    // SHOW POOLS is needed; the console's authentication still decides who gets in.
    const std::string role = private_role("pgt_pressure_console");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"max_client_conn", "2"}, {"workers", "1"}}));
    std::vector<Conn> clients;
    for (int i = 0; i < 2; ++i) {
        // The harness's readiness checks (a TCP and a Unix-socket connection that close at once)
        // count until pgtether has read their end: on a loaded machine that may come later.
        REQUIRE(eventually([&] {
            Conn conn(pooler.conninfo(role));
            if (!conn.ok()) return false;
            clients.push_back(std::move(conn));
            return true;
        }));
    }
    Conn extra(pooler.conninfo(role));
    REQUIRE_FALSE(extra.ok());
    CHECK_MESSAGE(extra.error().find("no more connections allowed (max_client_conn)") !=
                      std::string::npos,
                  extra.error());
    for (const std::string database : {"pgbouncer", "pgtether"}) {
        Conn admin = console(pooler, TestEnv::get().superuser, database);
        REQUIRE_MESSAGE(admin.ok(), admin.error());
        auto pools = admin.exec("SHOW POOLS");
        PGT_REQUIRE_OK(pools);
        auto pool = find_row(pools, "user", role);
        REQUIRE(pool.has_value());
        CHECK(cell_int(*pool, "cl_active") == 2);
    }
    // A client of another database is still refused while the console is in.
    Conn admin = console(pooler, TestEnv::get().superuser, "pgbouncer");
    REQUIRE(admin.ok());
    Conn another(pooler.conninfo(role));
    CHECK_FALSE(another.ok());
}

TEST_CASE("reserve pool: after reserve_pool_timeout a waiting client gets an extra backend") {
    const std::string role = private_role("pgt_pressure_reserve");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"reserve_pool_size", "1"},
                                    {"reserve_pool_timeout", "1"},
                                    {"query_wait_timeout", "2.5"}}));
    Holder first(pooler.conninfo(role));
    CHECK(backends_of(role) == 1);

    Conn second = Conn::must(pooler.conninfo(role));
    auto started = std::chrono::steady_clock::now();
    PGT_REQUIRE_OK(second.exec("BEGIN"));
    auto waited = std::chrono::steady_clock::now() - started;
    std::string second_pid = scalar(second, "SELECT pg_backend_pid()");
    CHECK(waited >= 900ms);  // not before reserve_pool_timeout
    CHECK(second_pid != first.pid);
    CHECK(backends_of(role) == 2);

    // The reserve is exhausted: a third client waits until query_wait_timeout.
    Conn third = Conn::must(pooler.conninfo(role));
    Result r = first_error(third.exec_all("SELECT 1"));
    CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
    CHECK(backends_of(role) == 2);
    PGT_CHECK_OK(second.exec("COMMIT"));
}

TEST_CASE("min_pool_size of a forced-user entry: warm before any client, as in PgBouncer") {
    // PgBouncer's janitor opens the pool of a database entry with a forced user and a
    // min_pool_size from the start; an entry without a forced user waits for its first client
    // (its pool's user is not known before).
    const std::string forced = private_role("pgt_pressure_forced");
    const std::string other = private_role("pgt_pressure_unforced");
    REQUIRE(settled(forced));
    REQUIRE(settled(other));
    const TestEnv& env = TestEnv::get();
    const std::string server =
        "host=" + env.pg_host + " port=" + std::to_string(env.pg_port) + " dbname=" + env.database;
    PoolerConfig config = for_role(forced, {{"default_pool_size", "5"}});
    config.databases = {"warm = " + server + " user=" + forced + " min_pool_size=2",
                        "cold = " + server + " min_pool_size=2"};
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {env.superuser, ""}, {forced, ""}, {other, ""}};
    Pgtether pooler(config);
    CHECK(eventually([&] { return backends_of(forced) == 2; }, 5s));
    std::this_thread::sleep_for(500ms);
    CHECK(backends_of(other) == 0);
    // The other entry warms once a client has used it.
    Conn conn = Conn::must(pooler.conninfo(other, "cold"));
    CHECK(scalar(conn, "SELECT current_user") == other);
    CHECK(eventually([&] { return backends_of(other) == 2; }, 5s));
}

TEST_CASE("min_pool_size: backends are opened ahead of demand and kept") {
    const std::string role = private_role("pgt_pressure_min");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"default_pool_size", "5"},
                                    {"min_pool_size", "3"},
                                    {"server_idle_timeout", "1"}}));
    Conn conn = Conn::must(pooler.conninfo(role));
    CHECK(scalar(conn, "SELECT 1") == "1");
    // The pool fills up to min_pool_size although one client only ever used one backend.
    CHECK(eventually([&] { return backends_of(role) == 3; }, 5s));
    // server_idle_timeout does not shrink it below min_pool_size.
    std::this_thread::sleep_for(2s);
    CHECK(backends_of(role) == 3);
    // A backend that dies is replaced.
    auto pids = backend_pids_of(role);
    REQUIRE(!pids.empty());
    direct_scalar("SELECT pg_terminate_backend(" + std::to_string(pids.front()) + ")");
    CHECK(eventually(
        [&] {
            auto now = backend_pids_of(role);
            return now.size() == 3 &&
                   std::find(now.begin(), now.end(), pids.front()) == now.end();
        },
        5s));
    CHECK(scalar(conn, "SELECT 'still served'") == "still served");
}

TEST_CASE("server_idle_timeout closes backends idle for longer") {
    const std::string role = private_role("pgt_pressure_idle");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"default_pool_size", "3"},
                                    {"server_idle_timeout", "1"},
                                    {"server_check_delay", "0.3"}}));
    {
        // Three backends at once.
        Holder a(pooler.conninfo(role));
        Holder b(pooler.conninfo(role));
        Holder c(pooler.conninfo(role));
        CHECK(backends_of(role) == 3);
    }
    // Idle in the pool now; gone after server_idle_timeout, although the leak sweep visits idle
    // backends every server_check_delay meanwhile (a visit is not use).
    CHECK(eventually([&] { return backends_of(role) == 0; }, 5s));
    Conn conn = Conn::must(pooler.conninfo(role));
    CHECK(scalar(conn, "SELECT 'reopened'") == "reopened");
}

TEST_CASE("server_lifetime retires old backends once released") {
    const std::string role = private_role("pgt_pressure_lifetime");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"server_lifetime", "1"}}));
    Conn conn = Conn::must(pooler.conninfo(role));
    std::string first = scalar(conn, "SELECT pg_backend_pid()");
    // A transaction running past the lifetime is not interrupted.
    PGT_REQUIRE_OK(conn.exec("BEGIN"));
    std::this_thread::sleep_for(1200ms);
    CHECK(scalar(conn, "SELECT pg_backend_pid()") == first);
    PGT_REQUIRE_OK(conn.exec("COMMIT"));
    // Released past its lifetime, the backend is closed; the next transaction gets a new one.
    CHECK(eventually([&] {
        auto pids = backend_pids_of(role);
        return std::find(pids.begin(), pids.end(), std::stoi(first)) == pids.end();
    }));
    std::string second = scalar(conn, "SELECT pg_backend_pid()");
    CHECK(second != first);
    // An idle one is retired by the janitor too, without waiting for a client.
    CHECK(eventually([&] { return backends_of(role) == 0; }, 5s));
}

TEST_CASE("server_lifetime per database (1.24), and 0: every backend is used once") {
    const std::string role = private_role("pgt_pressure_lifetime_db");
    REQUIRE(settled(role));
    const TestEnv& env = TestEnv::get();
    const std::string target = "host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
                               " dbname=" + env.database;
    auto pid_after_pause = [&](Pgtether& pooler, const std::string& database) {
        Conn conn = Conn::must(pooler.conninfo(role, database));
        const std::string first = scalar(conn, "SELECT pg_backend_pid()");
        std::this_thread::sleep_for(1200ms);
        const std::string second = scalar(conn, "SELECT pg_backend_pid()");
        return std::make_pair(first, second);
    };
    SUBCASE("an entry's value wins over the global one; 0 there means the global one") {
        PoolerConfig config = for_role(role, {});  // server_lifetime = 3600
        config.databases = {"short = " + target + " server_lifetime=1",
                            "global = " + target + " server_lifetime=0"};
        Pgtether pooler(config);
        auto [short_first, short_second] = pid_after_pause(pooler, "short");
        CHECK(short_second != short_first);
        auto [global_first, global_second] = pid_after_pause(pooler, "global");
        CHECK(global_second == global_first);
    }
    SUBCASE("a global server_lifetime of 0: closed at every release, as in PgBouncer") {
        PoolerConfig config = for_role(role, {{"server_lifetime", "0"}});
        config.databases = {"once = " + target};
        Pgtether pooler(config);
        Conn conn = Conn::must(pooler.conninfo(role, "once"));
        std::set<std::string> pids;
        for (int i = 0; i < 3; ++i) pids.insert(scalar(conn, "SELECT pg_backend_pid()"));
        CHECK(pids.size() == 3);
        CHECK(pooler.wait_for_log("server_lifetime"));
    }
}

TEST_CASE("server_check_query runs before reusing a backend idle longer than server_check_delay") {
    const std::string role = private_role("pgt_pressure_check");
    REQUIRE(settled(role));
    {
        Conn admin = Conn::must(direct_conninfo());
        admin.exec_ok("DROP SEQUENCE IF EXISTS pgt_check_seq");
        admin.exec_ok("CREATE SEQUENCE pgt_check_seq");
        admin.exec_ok("GRANT ALL ON SEQUENCE pgt_check_seq TO " + role);
    }
    // The check query has a side effect we can count: how often it ran.
    Pgtether pooler(for_role(role, {{"server_check_query", "SELECT nextval('pgt_check_seq')"},
                                    {"server_check_delay", "1"}}));
    auto checks = [] {
        return std::stoi(direct_scalar(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM pgt_check_seq"));
    };
    Conn conn = Conn::must(pooler.conninfo(role));
    CHECK(scalar(conn, "SELECT 1") == "1");
    CHECK(checks() == 0);  // a fresh backend needs no check
    for (int i = 0; i < 5; ++i) CHECK(scalar(conn, "SELECT 1") == "1");
    CHECK(checks() == 0);  // reused at once: no check
    std::this_thread::sleep_for(1300ms);
    std::string pid = scalar(conn, "SELECT pg_backend_pid()");
    CHECK(checks() == 1);  // idle for longer than server_check_delay: checked first
    CHECK(scalar(conn, "SELECT pg_backend_pid()") == pid);
    CHECK(checks() == 1);
    Conn(direct_conninfo()).exec("DROP SEQUENCE pgt_check_seq");
}

TEST_CASE("a failing server_check_query replaces the backend; the client is served") {
    const std::string role = private_role("pgt_pressure_badcheck");
    REQUIRE(settled(role));
    Pgtether pooler(for_role(role, {{"server_check_query", "SELECT no_such_function()"},
                                    {"server_check_delay", "0.5"}}));
    Conn conn = Conn::must(pooler.conninfo(role));
    std::string first = scalar(conn, "SELECT pg_backend_pid()");
    std::this_thread::sleep_for(800ms);
    // The check fails, the backend is closed, the client quietly gets a new one.
    std::string second = scalar(conn, "SELECT pg_backend_pid()");
    CHECK(second != first);
    CHECK(eventually([&] { return backends_of(role) == 1; }));
}

TEST_CASE("max_db_connections and max_user_connections cap backends across pools") {
    const TestEnv& env = TestEnv::get();
    const std::string role = private_role("pgt_pressure_caps");
    REQUIRE(settled(role));
    const std::string other_role = private_role("pgt_pressure_caps2");
    REQUIRE(settled(other_role));
    PoolerConfig config = for_role(role, {{"default_pool_size", "5"},
                                          {"query_wait_timeout", "1"}});
    const std::string target =
        "host=" + env.pg_host + " port=" + std::to_string(env.pg_port) + " dbname=" + env.database;
    // Two database names for the same PostgreSQL database: one capped at 1 backend in total.
    config.databases = {"capped = " + target + " max_db_connections=1", "open = " + target};
    config.users = {other_role + " = max_user_connections=1"};
    config.userlist->emplace_back(other_role, "");
    Pgtether pooler(config);

    SUBCASE("max_db_connections") {
        // Two users, so two pools, on one database name capped at one backend in total. The
        // first pool's backend sits idle; the second pool needs one: the idle one is closed to
        // make room (PgBouncer evicts too) rather than the second pool waiting forever.
        Conn idle_user = Conn::must(pooler.conninfo(other_role, "capped"));
        CHECK(scalar(idle_user, "SELECT 1") == "1");
        Holder holder(pooler.conninfo(role, "capped"));
        // Closed by pgtether; its backend exits once it reads the end (later, when loaded).
        CHECK(eventually([&] { return backends_of(other_role) == 0; }));
        CHECK(backends_of(role) == 1);
        // Now the cap is held by a busy backend: the other pool waits and times out.
        Result r = first_error(idle_user.exec_all("SELECT 1"));
        CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
        // The uncapped name is not affected.
        Holder open_a(pooler.conninfo(role, "open"));
        Holder open_b(pooler.conninfo(role, "open"));
        CHECK(open_a.pid != open_b.pid);
    }
    SUBCASE("max_user_connections") {
        // One user, two database names (two pools), capped at one backend in total.
        Conn idle_db = Conn::must(pooler.conninfo(other_role, "capped"));
        CHECK(scalar(idle_db, "SELECT 1") == "1");
        Holder holder(pooler.conninfo(other_role, "open"));
        CHECK(backends_of(other_role) == 1);
        Result r = first_error(idle_db.exec_all("SELECT 1"));
        CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
        CHECK(backends_of(other_role) == 1);
        // Another user is not affected.
        Holder mine(pooler.conninfo(role, "open"));
        CHECK(scalar(mine.conn, "SELECT current_user") == role);
    }
}
