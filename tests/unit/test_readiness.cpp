// GET /readyz's verdict (core/readiness.hpp): which states of the process, its databases and its
// pools' failed logins make pgtether not ready, and the reasons it names.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/readiness.hpp"

using namespace pgtether;

namespace {

PoolLoginRecord unreachable(const std::string& database, std::uint64_t since, std::uint64_t last,
                            const std::string& error = "connection refused") {
    PoolLoginRecord record;
    record.database = database;
    record.user = "app";
    record.failing_unreachable = true;
    record.failing_since_ms = since;
    record.last_failure_ms = last;
    record.error = error;
    return record;
}

std::string joined(const Readiness& r) {
    std::string out;
    for (const auto& p : r.problems)
        out += p + "|";
    return out;
}

}  // namespace

TEST_CASE("readiness: process states, table") {
    struct Row {
        const char* name;
        Lifecycle lifecycle;
        bool paused_all;
        bool ready;
        const char* problems;
    };
    const Row rows[] = {
        {"serving", Lifecycle::Serving, false, true, ""},
        {"PAUSE", Lifecycle::Serving, true, false, "paused (PAUSE): clients wait for RESUME|"},
        {"WAIT_FOR_CLIENTS", Lifecycle::Draining, false, false,
         "shutting down (WAIT_FOR_CLIENTS): no new clients, waiting for connected ones to leave|"},
        {"WAIT_FOR_SERVERS", Lifecycle::ShuttingDown, false, false,
         "shutting down: no new clients|"},
        {"paused and shutting down", Lifecycle::ShuttingDown, true, false,
         "shutting down: no new clients|paused (PAUSE): clients wait for RESUME|"},
    };
    for (const auto& row : rows) {
        CAPTURE(row.name);
        ReadinessInputs in;
        in.now_ms = 100'000;
        in.lifecycle = row.lifecycle;
        in.paused_all = row.paused_all;
        auto r = decide_readiness(in);
        CHECK(r.ready == row.ready);
        CHECK(joined(r) == row.problems);
    }
}

TEST_CASE("readiness: paused and disabled databases are named once each, sorted") {
    ReadinessInputs in;
    in.paused_databases = {"b", "a", "b"};
    in.disabled_databases = {"c"};
    auto r = decide_readiness(in);
    CHECK_FALSE(r.ready);
    CHECK(joined(r) ==
          "database \"a\" paused (PAUSE or KILL)|database \"b\" paused (PAUSE or KILL)|"
          "database \"c\" disabled (DISABLE)|");
}

TEST_CASE("readiness: an unreachable server counts for server_login_retry after its last failure") {
    struct Row {
        const char* name;
        std::uint64_t now;
        bool ready;
    };
    // Failing since 10 s, last failure at 20 s, server_login_retry 15 s.
    const Row rows[] = {
        {"at the failure", 20'000, false},
        {"a moment later", 20'001, false},
        {"just inside the memory", 34'999, false},
        {"forgotten after server_login_retry", 35'000, true},
        {"long after", 1'000'000, true},
        {"a record from another worker's later clock", 19'000, false},
    };
    for (const auto& row : rows) {
        CAPTURE(row.name);
        ReadinessInputs in;
        in.now_ms = row.now;
        in.failure_memory_ms = 15'000;
        in.pools = {unreachable("app", 10'000, 20'000)};
        auto r = decide_readiness(in);
        CHECK(r.ready == row.ready);
    }
    ReadinessInputs in;
    in.now_ms = 22'500;
    in.pools = {unreachable("app", 10'000, 20'000, "connect to 127.0.0.1:1:\nrefused")};
    auto r = decide_readiness(in);
    CHECK(joined(r) ==
          "database \"app\" unreachable: server logins failing for 12 s: connect to 127.0.0.1:1: "
          "refused|");
}

TEST_CASE("readiness: refused logins and healthy pools do not count; one line per database") {
    ReadinessInputs in;
    in.now_ms = 50'000;
    PoolLoginRecord refused =
        unreachable("refusing", 49'000, 49'500, "password authentication failed");
    refused.failing_unreachable = false;
    PoolLoginRecord healthy;
    healthy.database = "fine";
    in.pools = {refused, healthy};
    CHECK(decide_readiness(in).ready);

    // Two pools (users, or workers) of one database: the most recent failure speaks for it.
    in.pools = {unreachable("db2", 40'000, 45'000, "old"), unreachable("db1", 48'000, 49'000),
                unreachable("db2", 46'000, 49'900, "new")};
    auto r = decide_readiness(in);
    CHECK_FALSE(r.ready);
    CHECK(joined(r) ==
          "database \"db1\" unreachable: server logins failing for 2 s: connection refused|"
          "database \"db2\" unreachable: server logins failing for 4 s: new|");
}
