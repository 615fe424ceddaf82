// The janitor: every timeout pgtether enforces, checked on one timer of the worker's loop
// (every janitor::kIntervalMs): Worker::janitor (the tick, and the shutdown modes; in
// proxy/daemon/worker.cpp) runs Client::janitor for every client and Pool::janitor for every
// pool, both in proxy/pool/janitor.cpp; their constants are here. No other code closes a connection for
// taking too long. (docs/architecture.md, "Pools"; docs/configuration.md for the
// settings.) The client timeouts query_wait_timeout, client_idle_timeout, query_timeout,
// idle_transaction_timeout and transaction_timeout are the client's pool's (Pool::timeouts: a [databases] or
// [users] entry may set its own).
//
//   what                         counted from                       checked in
//   client_login_timeout         the client's connect               Client::janitor
//   auth lookup (server_connect_timeout)  entering AuthLookup       Client::janitor
//   query_wait_timeout           queueing for a server              Client::janitor
//   client_idle_timeout          the client's last request          Client::janitor
//   query_timeout                the first request of a busy spell  Client::janitor
//   idle_transaction_timeout     the backend's last answer          Client::janitor
//   transaction_timeout          the transaction's first request    Client::janitor
//   tethered_idle_timeout        the tethered client's last request Client::janitor
//   tether_probe_delay           (the idle tether probe's moment)   Client::janitor
//   closing linger (kLingerMs)   the client's close                 Client::janitor
//   server_connect_timeout       connect, then TLS and login        Pool::janitor
//   clean-up (kCleanupTimeoutMs) connect_query, reset, scrub, sweep, waiting for cancels;
//                                pgtether's query for a departed client   Pool::janitor
//   server_lifetime, server_idle_timeout, the tether surplus (kTetherSurplusIdleMs),
//   server_check_delay (Idle -> Used, the leak sweep, the role check of servers that do not
//   report their role), reserve_pool_timeout                            Pool::janitor
//   shutdown grace (kShutdownGraceMs)   SIGINT/SIGTERM, SHUTDOWN     Worker::janitor
//   auth_query connections, lock discovery, PAUSE/WAIT_CLOSE    their own ticks, called from
//                                                                Worker::janitor
#pragma once

#include <cstdint>

#include "core/config.hpp"

namespace pgtether::janitor {

// How often timeouts are checked: fine enough for second-granularity settings.
inline constexpr std::uint64_t kIntervalMs = 100;
// How long a shutdown lets running transactions finish before closing everything.
inline constexpr std::uint64_t kShutdownGraceMs = 10'000;
// How long a closing client may linger (flushing its last error) before the socket is cut.
inline constexpr std::uint64_t kLingerMs = 2000;
// How long a server may spend cleaning up (draining, rolling back, unlocking, resetting) before
// it is closed instead.
inline constexpr std::uint64_t kCleanupTimeoutMs = 10'000;
// How long a server beyond the pool's current limit (opened for the tether allowance while
// clients were tethered) may stay idle before it is closed. Long enough that a busy pool whose
// lock holders come and go keeps its servers instead of closing and reopening one per tether;
// short enough that the pool is back to pool_size soon after the tethers end.
inline constexpr std::uint64_t kTetherSurplusIdleMs = 1'000;

}  // namespace pgtether::janitor
