#include "core/stats.hpp"

#include <algorithm>

namespace pgtether {

std::uint64_t LatencyHistogram::cumulative(std::size_t i) const {
    std::uint64_t total = 0;
    for (std::size_t b = 0; b <= i && b < counts.size(); ++b) total += counts[b];
    return total;
}

LatencyHistogram& LatencyHistogram::operator+=(const LatencyHistogram& other) {
    for (std::size_t b = 0; b < counts.size(); ++b) counts[b] += other.counts[b];
    sum_us += other.sum_us;
    return *this;
}

PoolStats& PoolStats::operator+=(const PoolStats& other) {
    xact_count += other.xact_count;
    query_count += other.query_count;
    bytes_received += other.bytes_received;
    bytes_sent += other.bytes_sent;
    xact_time_us += other.xact_time_us;
    query_time_us += other.query_time_us;
    wait_time_us += other.wait_time_us;
    server_assignment_count += other.server_assignment_count;
    client_parse_count += other.client_parse_count;
    server_parse_count += other.server_parse_count;
    bind_count += other.bind_count;
    tether_events += other.tether_events;
    untether_events += other.untether_events;
    probes += other.probes;
    ledger_decisions += other.ledger_decisions;
    scrubs += other.scrubs;
    scrub_failures += other.scrub_failures;
    leaks_found += other.leaks_found;
    tether_reserve_exhausted += other.tether_reserve_exhausted;
    query_times += other.query_times;
    xact_times += other.xact_times;
    wait_times += other.wait_times;
    return *this;
}

StatsAverages compute_averages(const PoolStats& newer, const PoolStats& older,
                               std::uint64_t period_us) {
    StatsAverages avg;
    if (period_us == 0) return avg;
    // Counters only grow, but a pool's first snapshot may be newer than the other's: clamp.
    auto delta = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; };
    auto per_second = [&](std::uint64_t d) { return d * 1'000'000 / period_us; };
    auto xacts = delta(newer.xact_count, older.xact_count);
    auto queries = delta(newer.query_count, older.query_count);
    avg.xact_count = per_second(xacts);
    avg.query_count = per_second(queries);
    avg.bytes_received = per_second(delta(newer.bytes_received, older.bytes_received));
    avg.bytes_sent = per_second(delta(newer.bytes_sent, older.bytes_sent));
    if (xacts > 0) avg.xact_time_us = delta(newer.xact_time_us, older.xact_time_us) / xacts;
    if (queries > 0) avg.query_time_us = delta(newer.query_time_us, older.query_time_us) / queries;
    avg.wait_time_us = per_second(delta(newer.wait_time_us, older.wait_time_us));
    avg.server_assignment_count =
        per_second(delta(newer.server_assignment_count, older.server_assignment_count));
    avg.client_parse_count = per_second(delta(newer.client_parse_count, older.client_parse_count));
    avg.server_parse_count = per_second(delta(newer.server_parse_count, older.server_parse_count));
    avg.bind_count = per_second(delta(newer.bind_count, older.bind_count));
    return avg;
}

}  // namespace pgtether
