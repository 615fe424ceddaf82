// SHOW STATS averages (core/stats.hpp), PgBouncer 1.18's arithmetic.
#include <doctest/doctest.h>

#include "core/stats.hpp"
#include "core/stats_history.hpp"

using namespace pgtether;

TEST_CASE("averages are rates per second and mean durations over the period") {
    PoolStats older;
    older.xact_count = 10;
    older.query_count = 20;
    older.bytes_received = 1000;
    older.bytes_sent = 5000;
    older.xact_time_us = 4000;
    older.query_time_us = 3000;
    older.wait_time_us = 100;
    PoolStats newer = older;
    newer.xact_count += 30;         // 30 transactions in 2 s
    newer.query_count += 50;        // 50 queries
    newer.bytes_received += 800;    // 400 B/s
    newer.bytes_sent += 3000;       // 1500 B/s
    newer.xact_time_us += 60'000;   // 2000 us per transaction
    newer.query_time_us += 25'000;  // 500 us per query
    newer.wait_time_us += 10'000;   // 5000 us of waiting per second
    auto avg = compute_averages(newer, older, 2'000'000);
    CHECK(avg.xact_count == 15);
    CHECK(avg.query_count == 25);
    CHECK(avg.bytes_received == 400);
    CHECK(avg.bytes_sent == 1500);
    CHECK(avg.xact_time_us == 2000);
    CHECK(avg.query_time_us == 500);
    CHECK(avg.wait_time_us == 5000);
}

TEST_CASE("averages of an idle period or an empty period are zero") {
    PoolStats s;
    s.xact_count = 5;
    s.xact_time_us = 100;
    auto idle = compute_averages(s, s, 1'000'000);
    CHECK(idle.xact_count == 0);
    CHECK(idle.xact_time_us == 0);  // no transaction: no mean (not a division by zero)
    auto none = compute_averages(s, PoolStats{}, 0);
    CHECK(none.xact_count == 0);
    // A snapshot older than the other (a pool that appeared later) never goes negative.
    auto clamped = compute_averages(PoolStats{}, s, 1'000'000);
    CHECK(clamped.xact_count == 0);
}

TEST_CASE("pool stats add up per database") {
    PoolStats a;
    a.query_count = 3;
    a.scrubs = 1;
    PoolStats b;
    b.query_count = 4;
    b.leaks_found = 2;
    b.tether_reserve_exhausted = 3;
    a += b;
    CHECK(a.query_count == 7);
    CHECK(a.scrubs == 1);
    CHECK(a.leaks_found == 2);
    CHECK(a.tether_reserve_exhausted == 3);
}

TEST_CASE("stats history: averages over the last complete period, of the pools selected") {
    struct FakePool {
        bool selected;
    };
    const FakePool a{true};
    const FakePool b{false};
    StatsHistory<FakePool> history(1'000'000);
    // Before the first tick there is no complete period: nothing to average.
    CHECK(history.averages([](const FakePool&) { return true; }).xact_count == 0);

    PoolStats a_first;
    a_first.xact_count = 100;
    PoolStats b_first;
    b_first.xact_count = 1000;
    history.tick({{&a, a_first}, {&b, b_first}}, 2'000'000);
    // The first tick compares against nothing recorded (zero counters) over 1 s.
    CHECK(history.averages([](const FakePool& p) { return p.selected; }).xact_count == 100);

    PoolStats a_second = a_first;
    a_second.xact_count += 40;  // 40 transactions in 2 s
    PoolStats b_second = b_first;
    b_second.xact_count += 400;
    history.tick({{&a, a_second}, {&b, b_second}}, 4'000'000);
    CHECK(history.averages([](const FakePool& p) { return p.selected; }).xact_count == 20);
    CHECK(history.averages([](const FakePool&) { return true; }).xact_count == 220);
    CHECK(history.averages([](const FakePool&) { return false; }).xact_count == 0);
}
