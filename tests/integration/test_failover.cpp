// A primary and a streaming standby (private servers on their own ports, the standby made with
// pg_basebackup) behind one host list: target_session_attrs routes by role, a host that goes
// away is skipped, and when the primary dies and the standby is promoted, writers are writing to
// the new primary within seconds, with no acknowledged commit lost, and a lock holder is told
// that its lock died with the old primary (core/host_choice.hpp, core/server_loss.hpp).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/netns.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/private_postgres.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using Clock = std::chrono::steady_clock;

namespace {

std::string direct(const PrivatePostgres& pg) {
    return "host=" + pg.env().pg_host + " port=" + std::to_string(pg.port()) +
           " user=postgres dbname=" + pg.env().database + " sslmode=disable gssencmode=disable";
}

// A [databases] entry over both servers: `first` listed first.
std::string entry(const std::string& name, const PrivatePostgres& first,
                  const PrivatePostgres& second, const std::string& attrs,
                  const std::string& extra = "") {
    return name + " = host=127.0.0.1,127.0.0.1 port=" + std::to_string(first.port()) + "," +
           std::to_string(second.port()) + " dbname=" + first.env().database +
           " target_session_attrs=" + attrs + (extra.empty() ? "" : " " + extra);
}

PoolerConfig failover_config(std::vector<std::string> databases) {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "4"},
                       {"server_login_retry", "2"},
                       {"server_host_backoff", "0.5"},
                       {"query_wait_timeout", "30"}};
    config.databases = std::move(databases);
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
    config.extra_args = {"-v"};
    return config;
}

// Whether each of `n` transactions of a client of `db` ran on a server in recovery: "t" or "f"
// for all of them, "mixed" otherwise.
std::string recovery_of(const Pgtether& pooler, const std::string& db, int n = 6) {
    std::set<std::string> seen;
    std::vector<Conn> conns;
    for (int i = 0; i < n; ++i) conns.push_back(Conn::must(pooler.conninfo("postgres", db)));
    for (auto& conn : conns) seen.insert(scalar(conn, "SELECT pg_is_in_recovery()"));
    if (seen.size() != 1) return "mixed";
    return *seen.begin();
}

}  // namespace

TEST_CASE("target_session_attrs: writes on the primary, reads on the standby, fallback") {
    PrivatePostgres primary;
    PrivatePostgres standby(PrivatePostgres::StandbyOf{primary});
    Pgtether pooler(failover_config({
                        entry("rw_standby_first", standby, primary, "read-write"),
                        entry("rw_primary_first", primary, standby, "read-write"),
                        entry("primary", standby, primary, "primary"),
                        entry("standby", primary, standby, "standby"),
                        entry("read_only", primary, standby, "read-only"),
                        entry("prefer", primary, standby, "prefer-standby"),
                        entry("prefer_disable", primary, standby, "prefer-standby",
                              "load_balance_hosts=disable"),
                        entry("any_disable", primary, standby, "any",
                              "load_balance_hosts=disable"),
                    }),
                    10s, primary.env());
    CHECK(recovery_of(pooler, "rw_standby_first") == "f");
    CHECK(recovery_of(pooler, "rw_primary_first") == "f");
    CHECK(recovery_of(pooler, "primary") == "f");
    CHECK(recovery_of(pooler, "standby") == "t");
    CHECK(recovery_of(pooler, "read_only") == "t");
    CHECK(recovery_of(pooler, "prefer") == "t");
    CHECK(recovery_of(pooler, "prefer_disable") == "t");
    // disable: the first host that works, every time (libpq's order), not round robin.
    CHECK(recovery_of(pooler, "any_disable") == "f");

    // A write through the read-write entry commits on the primary and is seen on the standby.
    Conn writer = Conn::must(pooler.conninfo("postgres", "rw_standby_first"));
    PGT_REQUIRE_OK(writer.exec("CREATE TABLE IF NOT EXISTS routed (n int)"));
    PGT_REQUIRE_OK(writer.exec("INSERT INTO routed VALUES (1)"));
    Conn reader = Conn::must(pooler.conninfo("postgres", "standby"));
    CHECK(eventually([&] {
        Result r = reader.exec("SELECT count(*) FROM routed");  // 42P01 until replayed
        return r.ok() && r.value() == "1";
    }));

    // SHOW HOSTS: each host's role as the pool saw it.
    Conn admin = console(pooler);
    Result hosts = admin.exec("SHOW HOSTS");
    PGT_REQUIRE_OK(hosts);
    bool saw_standby = false, saw_primary = false;
    for (const auto& row : named_rows(hosts)) {
        if (cell(row, "database") != "rw_standby_first") continue;
        const std::string role = cell(row, "role");
        saw_standby = saw_standby || role == "standby";
        saw_primary = saw_primary || role == "primary";
    }
    CHECK(saw_standby);
    CHECK(saw_primary);

    // The standby goes away: prefer-standby falls back to the primary; writes are unaffected.
    standby.crash();
    CHECK(eventually(
        [&] {
            try {
                return recovery_of(pooler, "prefer", 2) == "f";
            } catch (const std::exception&) {
                return false;  // a client that still had a server on the standby
            }
        },
        10s));
    auto started = Clock::now();
    CHECK(recovery_of(pooler, "rw_standby_first") == "f");
    CHECK(Clock::now() - started < 5s);
    CHECK(pooler.wait_for_log("skipped for 500 ms"));
    CHECK(pooler.running());
}

TEST_CASE("failover: the primary dies, the standby is promoted, writers carry on") {
    PrivatePostgres primary;
    PrivatePostgres standby(PrivatePostgres::StandbyOf{primary});
    {
        // Synchronous replication: a commit acknowledged by the primary is on the standby too,
        // so "no acknowledged commit lost" is pgtether's promise to keep, not luck.
        Conn setup = Conn::must(direct(primary));
        PGT_REQUIRE_OK(setup.exec("CREATE TABLE writes (writer int, n int)"));
        PGT_REQUIRE_OK(setup.exec("ALTER SYSTEM SET synchronous_standby_names = '*'"));
        PGT_REQUIRE_OK(setup.exec("ALTER SYSTEM SET synchronous_commit = 'remote_apply'"));
        PGT_REQUIRE_OK(setup.exec("SELECT pg_reload_conf()"));
        REQUIRE(eventually([&] {
            return scalar(setup, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = "
                                 "'sync'") == "1";
        }));
    }
    Pgtether pooler(failover_config({entry("app", primary, standby, "read-write")}), 10s,
                    primary.env());

    constexpr int kWriters = 8;
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::vector<std::pair<int, int>> acknowledged;  // (writer, n) whose COMMIT succeeded
    std::vector<Clock::time_point> commit_times;
    std::vector<std::string> errors;
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
        writers.emplace_back([&, w] {
            std::optional<Conn> conn;
            for (int n = 0; !stop; ++n) {
                if (!conn || PQstatus(conn->raw()) != CONNECTION_OK) {
                    conn.emplace(pooler.conninfo("postgres", "app"));
                    if (!conn->ok()) {
                        std::this_thread::sleep_for(50ms);
                        continue;
                    }
                }
                Result r = conn->exec("INSERT INTO writes VALUES (" + std::to_string(w) + ", " +
                                      std::to_string(n) + ") RETURNING pg_is_in_recovery()");
                std::lock_guard lock(mutex);
                if (r.ok()) {
                    acknowledged.emplace_back(w, n);
                    commit_times.push_back(Clock::now());
                    if (r.value() != "f") errors.push_back("acknowledged in recovery");
                } else if (errors.size() < 50) {
                    errors.push_back(r.describe());
                }
            }
        });
    }
    // A lock holder on the primary.
    Conn holder = Conn::must(pooler.conninfo("postgres", "app"));
    PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_lock(77)"));

    std::this_thread::sleep_for(2s);
    primary.crash();
    std::this_thread::sleep_for(1s);
    standby.promote();
    const auto promoted = Clock::now();

    // The lock holder learns that its lock is gone, and takes it again on the new primary.
    Result told = first_error(holder.exec_all("SELECT 1"));
    CHECK_MESSAGE(told.sqlstate == "08006", told.describe());
    CHECK_MESSAGE(told.message.find("this session's state (advisory locks 77") !=
                      std::string::npos,
                  told.describe());
    Conn again = Conn::must(pooler.conninfo("postgres", "app"));
    PGT_CHECK_OK(again.exec("SELECT pg_advisory_lock(77)"));
    CHECK(scalar(again, "SELECT pg_is_in_recovery()") == "f");

    std::this_thread::sleep_for(20s);  // clean service on the new primary
    stop = true;
    for (auto& t : writers) t.join();

    std::lock_guard lock(mutex);
    std::optional<Clock::time_point> first_after;
    int after_promotion = 0;
    for (const auto& at : commit_times) {
        if (at < promoted) continue;
        ++after_promotion;
        if (!first_after || at < *first_after) first_after = at;
    }
    if (!first_after) MESSAGE(pooler.log());
    REQUIRE(first_after.has_value());
    const auto delay =
        std::chrono::duration_cast<std::chrono::milliseconds>(*first_after - promoted);
    MESSAGE("first commit " << delay.count() << " ms after the promotion; " << after_promotion
                            << " commits since, " << acknowledged.size() << " in all");
    CHECK(delay < 5s);
    CHECK(after_promotion > 100);
    for (const auto& e : errors) CHECK_MESSAGE(e != "acknowledged in recovery", e);

    // Every acknowledged commit is on the new primary.
    Conn check = Conn::must(direct(standby));
    PGT_REQUIRE_OK(check.exec("CREATE TEMP TABLE acked (writer int, n int)"));
    std::string values;
    for (const auto& [w, n] : acknowledged) {
        if (!values.empty()) values += ",";
        values += "(" + std::to_string(w) + "," + std::to_string(n) + ")";
    }
    PGT_REQUIRE_OK(check.exec("INSERT INTO acked VALUES " + values));
    CHECK(scalar(check, "SELECT count(*) FROM acked a WHERE NOT EXISTS (SELECT 1 FROM writes w "
                        "WHERE w.writer = a.writer AND w.n = a.n)") == "0");
    CHECK(pooler.running());
}

TEST_CASE("a host one pool found down is skipped by the others, on every worker") {
    // The shared PostgreSQL behind a list whose first host refuses: each pool (here: each user)
    // used to pay a refused connection of its own to learn that (docs/deployment.md).
    const TestEnv& env = TestEnv::get();
    const std::string other = private_role("pgt_failover_news");
    REQUIRE(settled(other));
    const int dead = free_port();
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"server_host_backoff", "60"}};
    config.databases = {"news = host=127.0.0.1,127.0.0.1 port=" + std::to_string(dead) + "," +
                        std::to_string(env.pg_port) + " dbname=" + env.database +
                        " load_balance_hosts=disable"};
    config.userlist =
        std::vector<std::pair<std::string, std::string>>{{env.superuser, ""}, {other, ""}};
    config.extra_args = {"-v"};
    Pgtether pooler(config);
    auto skipped_lines = [&] {
        const std::string log = pooler.log();
        int n = 0;
        for (std::size_t at = log.find("skipped for 60000 ms"); at != std::string::npos;
             at = log.find("skipped for 60000 ms", at + 1)) {
            ++n;
        }
        return n;
    };
    Conn first = Conn::must(pooler.conninfo(env.superuser, "news"));
    CHECK(scalar(first, "SELECT 1") == "1");
    REQUIRE(pooler.wait_for_log("skipped for 60000 ms"));
    // The news reaches the other worker through its mailbox: a moment.
    std::this_thread::sleep_for(300ms);
    // A pool created afterwards, on either worker, goes to the second host at once.
    Conn second = Conn::must(pooler.conninfo(other, "news"));
    CHECK(scalar(second, "SELECT 1") == "1");
    CHECK(skipped_lines() == 1);
    Conn admin = console(pooler);
    bool seen = false;
    for (const auto& row : named_rows(admin.exec("SHOW HOSTS"))) {
        if (cell(row, "user") != other || cell_int(row, "port") != dead) continue;
        seen = true;
        CHECK(cell(row, "state") == "backoff (unreachable)");
    }
    CHECK(seen);
}

TEST_CASE("servers that do not report their role (PostgreSQL 13-) are asked: at login, and since") {
    // PostgreSQL 13 and older send no in_hot_standby: the same primary and standby, each behind
    // a relay that takes that ParameterStatus out, stand for them.
    PrivatePostgres primary;
    PrivatePostgres standby(PrivatePostgres::StandbyOf{primary});
    auto socket_of = [](const PrivatePostgres& pg) {
        return pg.env().pg_socket_dir + "/.s.PGSQL." + std::to_string(pg.port());
    };
    TcpRelay old_primary(socket_of(primary), TcpRelay::HideParameter{"in_hot_standby"});
    TcpRelay old_standby(socket_of(standby), TcpRelay::HideParameter{"in_hot_standby"});
    const std::string database = primary.env().database;
    {
        Conn through = Conn::must("host=127.0.0.1 port=" + std::to_string(old_standby.port()) +
                                  " user=postgres dbname=" + database +
                                  " sslmode=disable gssencmode=disable");
        REQUIRE(PQparameterStatus(through.raw(), "in_hot_standby") == nullptr);
        REQUIRE(scalar(through, "SELECT pg_is_in_recovery()") == "t");
    }
    auto old_entry = [&](const std::string& name, const TcpRelay& first, const TcpRelay& second,
                         const std::string& attrs) {
        return name + " = host=127.0.0.1,127.0.0.1 port=" + std::to_string(first.port()) + "," +
               std::to_string(second.port()) + " dbname=" + database +
               " target_session_attrs=" + attrs;
    };
    PoolerConfig config = failover_config({
        old_entry("rw", old_standby, old_primary, "read-write"),
        old_entry("sb", old_primary, old_standby, "standby"),
        old_entry("ro", old_primary, old_standby, "read-only"),
    });
    config.settings["server_tls_sslmode"] = "disable";  // the relays read messages
    config.settings["server_check_delay"] = "1";
    Pgtether pooler(config, 10s, primary.env());
    // Without the question every such server would count as a writable primary.
    CHECK(recovery_of(pooler, "rw") == "f");
    CHECK(recovery_of(pooler, "sb") == "t");
    CHECK(recovery_of(pooler, "ro") == "t");
    CHECK(pooler.wait_for_log("it is a standby, target_session_attrs = read-write"));

    // The standby is promoted: no ParameterStatus says so, the periodic check does. The standby
    // pool's servers there are closed, the host is a primary in SHOW HOSTS.
    standby.promote();
    CHECK(pooler.wait_for_log("changed role: now primary", 10s));
    Conn admin = console(pooler);
    auto sb_servers = [&] {
        int n = 0;
        for (const auto& row : named_rows(admin.exec("SHOW SERVERS"))) {
            if (cell(row, "database") == "sb") ++n;
        }
        return n;
    };
    CHECK(eventually([&] { return sb_servers() == 0; }, 10s));
    bool promoted_seen = false;
    for (const auto& row : named_rows(admin.exec("SHOW HOSTS"))) {
        if (cell(row, "database") != "sb" || cell_int(row, "port") != old_standby.port()) continue;
        promoted_seen = true;
        CHECK(cell(row, "role") == "primary");
    }
    CHECK(promoted_seen);
    // SHOW DATABASES' port is an int4 (PgBouncer's): a port list shows the first host's.
    for (const auto& row : named_rows(admin.exec("SHOW DATABASES"))) {
        if (cell(row, "name") == "rw") CHECK(cell_int(row, "port") == old_standby.port());
    }
    // Writes carry on on the old primary through the read-write entry.
    Conn writer = Conn::must(pooler.conninfo("postgres", "rw"));
    PGT_CHECK_OK(writer.exec("CREATE TABLE IF NOT EXISTS old_servers (n int)"));
    CHECK(pooler.running());
}
