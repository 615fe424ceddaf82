// Counters kept per pool and per worker. Plain integers updated on the owning worker's thread; the
// admin console and metrics (later) sum them across workers.
#pragma once

#include <cstdint>

namespace pgtether {

struct PoolStats {
    // Cumulative traffic, as PgBouncer's SHOW STATS reports it.
    std::uint64_t xact_count = 0;
    std::uint64_t query_count = 0;
    std::uint64_t bytes_received = 0;  // from clients
    std::uint64_t bytes_sent = 0;      // to clients
    std::uint64_t xact_time_us = 0;
    std::uint64_t query_time_us = 0;
    std::uint64_t wait_time_us = 0;  // time clients spent waiting for a server
    // The tether (docs/advisory-locks.md).
    std::uint64_t tether_events = 0;    // a client became tethered
    std::uint64_t untether_events = 0;  // a tethered client released its last lock
    std::uint64_t probes = 0;           // pg_locks probes run at transaction ends
    std::uint64_t scrubs = 0;           // backends cleaned after a tethered/dirty client left
    std::uint64_t scrub_failures = 0;   // backends closed because cleaning failed
    std::uint64_t leaks_found = 0;      // idle pooled backends found holding advisory locks
};

struct WorkerStats {
    std::uint64_t clients_accepted = 0;
    std::uint64_t clients_refused = 0;
    std::uint64_t servers_opened = 0;
    std::uint64_t login_failures = 0;
};

}  // namespace pgtether
