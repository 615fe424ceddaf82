// SHOW STATS averages (core/stats.hpp), PgBouncer 1.18's arithmetic.
#include <doctest/doctest.h>

#include "core/stats.hpp"
#include "core/stats_history.hpp"

using namespace pgtether;

TEST_CASE("latency buckets: le is inclusive, past the largest bound is +Inf") {
    const std::size_t inf = kLatencyBucketBoundsUs.size();
    const struct {
        std::uint64_t micros;
        std::size_t bucket;
    } rows[] = {
        {0, 0},          {1, 0},           {100, 0},          {101, 1},
        {250, 1},        {251, 2},         {999, 3},          {1'000, 3},
        {1'001, 4},      {9'999, 6},       {10'000, 6},       {1'000'000, 12},
        {1'000'001, 13}, {60'000'000, 17}, {60'000'001, inf}, {~std::uint64_t{0}, inf},
    };
    for (const auto& row : rows) {
        CAPTURE(row.micros);
        CHECK(latency_bucket(row.micros) == row.bucket);
    }
    // Bounds strictly increase, so every observation has one bucket.
    for (std::size_t i = 1; i < kLatencyBucketBoundsUs.size(); ++i)
        CHECK(kLatencyBucketBoundsUs[i - 1] < kLatencyBucketBoundsUs[i]);
}

TEST_CASE("latency histogram: per-bucket counts, cumulative as Prometheus wants, sums") {
    LatencyHistogram h;
    for (std::uint64_t micros : {50u, 100u, 700u, 700u, 30'000u, 90'000'000u}) h.record(micros);
    CHECK(h.count() == 6);
    CHECK(h.sum_us == 50 + 100 + 700 + 700 + 30'000 + 90'000'000);
    CHECK(h.counts[0] == 2);                           // <= 100 us
    CHECK(h.counts[3] == 2);                           // <= 1 ms
    CHECK(h.counts[8] == 1);                           // <= 50 ms
    CHECK(h.counts[kLatencyBucketBoundsUs.size()] == 1);  // +Inf only
    CHECK(h.cumulative(0) == 2);
    CHECK(h.cumulative(1) == 2);
    CHECK(h.cumulative(3) == 4);
    CHECK(h.cumulative(8) == 5);
    CHECK(h.cumulative(kLatencyBucketBoundsUs.size() - 1) == 5);  // le="60"
    CHECK(h.cumulative(kLatencyBucketBoundsUs.size()) == 6);      // le="+Inf"
    // Never decreasing.
    for (std::size_t i = 1; i <= kLatencyBucketBoundsUs.size(); ++i)
        CHECK(h.cumulative(i - 1) <= h.cumulative(i));

    // Pools and workers add up bucket by bucket; record_* keeps the totals in step.
    PoolStats a;
    PoolStats b;
    a.record_query_time(700);
    b.record_query_time(30'000);
    b.record_wait_time(2'000);
    b.record_xact_time(40'000);
    a += b;
    CHECK(a.query_time_us == 30'700);
    CHECK(a.query_times.count() == 2);
    CHECK(a.query_times.sum_us == a.query_time_us);
    CHECK(a.query_times.cumulative(3) == 1);
    CHECK(a.wait_times.counts[4] == 1);
    CHECK(a.wait_time_us == 2'000);
    CHECK(a.xact_times.count() == 1);
    CHECK(a.xact_time_us == 40'000);
}

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
