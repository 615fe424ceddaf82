// Counters kept per pool and per worker. Plain integers updated on the owning worker's thread; the
// admin console and the metrics endpoint read them (and, with several workers, would sum them).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace pgtether {

// Upper bounds of the latency histograms' buckets, in microseconds, from 100 us to a minute: the
// Prometheus `le` values of the metrics endpoint's *_seconds histograms. An observation lands in
// the first bucket whose bound it does not exceed (`le` is inclusive), else in the +Inf bucket.
inline constexpr std::array<std::uint64_t, 18> kLatencyBucketBoundsUs = {
    100,     250,     500,     1'000,     2'500,     5'000,      10'000,     25'000,     50'000,
    100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000, 30'000'000, 60'000'000};

// How many observations fell in each bucket, and their sum: what a Prometheus histogram exposes.
struct LatencyHistogram {
    // Per bucket, not cumulative; the last one counts what exceeds every bound (+Inf).
    std::array<std::uint64_t, kLatencyBucketBoundsUs.size() + 1> counts{};
    std::uint64_t sum_us = 0;

    inline void record(std::uint64_t micros);
    // Observations <= kLatencyBucketBoundsUs[i]; i == kLatencyBucketBoundsUs.size() is +Inf,
    // which is count().
    [[nodiscard]] std::uint64_t cumulative(std::size_t i) const;
    [[nodiscard]] std::uint64_t count() const { return cumulative(counts.size() - 1); }
    LatencyHistogram& operator+=(const LatencyHistogram& other);
};

// The bucket an observation of `micros` belongs to (an index into LatencyHistogram::counts).
// Inline, with record(): three observations per transaction.
[[nodiscard]] inline std::size_t latency_bucket(std::uint64_t micros) {
    // The first bound not below the observation: le is inclusive.
    return static_cast<std::size_t>(
        std::lower_bound(kLatencyBucketBoundsUs.begin(), kLatencyBucketBoundsUs.end(), micros) -
        kLatencyBucketBoundsUs.begin());
}

inline void LatencyHistogram::record(std::uint64_t micros) {
    counts[latency_bucket(micros)]++;
    sum_us += micros;
}

struct PoolStats {
    // Cumulative traffic, as PgBouncer's SHOW STATS reports it.
    std::uint64_t xact_count = 0;      // transactions (a backend back at 'I' after a request)
    std::uint64_t query_count = 0;     // ReadyForQuery messages forwarded to clients
    std::uint64_t bytes_received = 0;  // from clients
    std::uint64_t bytes_sent = 0;      // to clients
    std::uint64_t xact_time_us = 0;    // first request of a transaction to its end
    std::uint64_t query_time_us = 0;   // request sent to a quiet backend until it is quiet again
    std::uint64_t wait_time_us = 0;    // time clients spent waiting for a server
    // Servers handed to clients (waits that ended): PgBouncer 1.23's server_assignment_count.
    std::uint64_t server_assignment_count = 0;
    // Prepared-statement translation (PgBouncer 1.21's counters; 0 without translation): named
    // Parse messages of clients, Parse messages pgtether sent to backends for them (a client's
    // own, or a statement prepared on a backend that lacked it), Binds of such statements.
    std::uint64_t client_parse_count = 0;
    std::uint64_t server_parse_count = 0;
    std::uint64_t bind_count = 0;
    // The tether (docs/advisory-locks.md).
    std::uint64_t tether_events = 0;    // a client became tethered
    std::uint64_t untether_events = 0;  // a tethered client released its last lock
    std::uint64_t probes = 0;           // pg_locks probes run at transaction ends
    // Lock-relevant transaction ends decided by exact accounting alone (no advisory-lock probe).
    std::uint64_t ledger_decisions = 0;
    std::uint64_t scrubs = 0;          // backends cleaned after a tethered/dirty client left
    std::uint64_t scrub_failures = 0;  // backends closed because cleaning failed
    std::uint64_t leaks_found = 0;     // idle pooled backends found holding advisory locks
    // Times clients had to wait because more clients were tethered than tether_reserve_size
    // covers (once per occurrence, core/pool_capacity.hpp).
    std::uint64_t tether_reserve_exhausted = 0;
    // The distributions behind query_time_us, xact_time_us and wait_time_us (the metrics
    // endpoint's histograms); the record_* functions below keep both in step.
    LatencyHistogram query_times;
    LatencyHistogram xact_times;
    LatencyHistogram wait_times;

    // A query (request to quiet backend), a transaction, or a client's wait for a server
    // that ended after `micros`.
    void record_query_time(std::uint64_t micros) {
        query_time_us += micros;
        query_times.record(micros);
    }
    void record_xact_time(std::uint64_t micros) {
        xact_time_us += micros;
        xact_times.record(micros);
    }
    void record_wait_time(std::uint64_t micros) {
        wait_time_us += micros;
        wait_times.record(micros);
    }

    PoolStats& operator+=(const PoolStats& other);
};

struct WorkerStats {
    std::uint64_t clients_accepted = 0;
    std::uint64_t clients_refused = 0;
    // accept() failed for want of file descriptors (EMFILE, ENFILE; each pause of a listener).
    std::uint64_t accept_fd_exhausted = 0;
    std::uint64_t servers_opened = 0;
    std::uint64_t login_failures = 0;
    std::uint64_t admin_queries = 0;  // commands run on the admin console
};

// SHOW STATS' avg_ columns, PgBouncer's definitions (src/stats.c): rates per second over a
// stats_period, mean transaction and query durations, and wait time per second.
struct StatsAverages {
    std::uint64_t server_assignment_count = 0;  // per second
    std::uint64_t xact_count = 0;      // transactions per second
    std::uint64_t query_count = 0;     // queries per second
    std::uint64_t bytes_received = 0;  // bytes per second from clients
    std::uint64_t bytes_sent = 0;      // bytes per second to clients
    std::uint64_t xact_time_us = 0;    // mean transaction duration
    std::uint64_t query_time_us = 0;   // mean query duration
    std::uint64_t wait_time_us = 0;    // microseconds of client waiting per second
    std::uint64_t client_parse_count = 0;  // per second, and the next two
    std::uint64_t server_parse_count = 0;
    std::uint64_t bind_count = 0;
};

// Averages between two snapshots taken `period_us` apart (`older` before `newer`).
StatsAverages compute_averages(const PoolStats& newer, const PoolStats& older,
                               std::uint64_t period_us);

}  // namespace pgtether
