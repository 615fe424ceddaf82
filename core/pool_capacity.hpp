// How many servers a pool may open, and why it may not open another one: the arithmetic of
// pool_size, reserve_pool_size, the tether allowance (tether_reserve_size) and the database and
// user caps, as pure functions (docs/advisory-locks.md, "Lock holders and the pool").
//
// A tethered client keeps its server for as long as it holds session state, so without an
// allowance two lock holders in a pool of two leave nothing for anyone else. Every tethered
// server therefore lets the pool open one more server, up to tether_reserve_size: clients that
// hold nothing keep pool_size servers (plus the reserve pool) for themselves until more clients
// are tethered than the allowance covers. max_db_connections and max_user_connections stay hard
// caps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/config.hpp"

namespace pgtether {

// A pool's sizes, resolved from its [databases] entry and the [pgbouncer] defaults.
struct PoolSizes {
    int pool_size = 0;
    int min_pool_size = 0;
    int reserve_pool_size = 0;
    int tether_reserve_size = 0;   // extra servers for tethered clients; 0 in session mode
    int max_db_connections = 0;    // 0 = unlimited
    int max_user_connections = 0;  // 0 = unlimited

    bool operator==(const PoolSizes&) const = default;
};

// The per-database values over the global ones, and the pool user's [users] entry (`user`, may
// be null) over both for pool_size and reserve_pool_size, as PgBouncer 1.23/1.24 resolve them
// (pool_pool_size, pool_res_pool_size). tether_reserve_size < 0 (the default) means "as many as
// pool_size"; in session mode it is 0, since every client keeps its server anyway. The user's
// max_user_connections comes from `user` too.
[[nodiscard]] PoolSizes resolve_pool_sizes(const Config& config, const DatabaseConfig& database,
                                           PoolMode mode, const UserConfig* user);

// The most servers a pool may have open while `tethered` of them are linked to tethered
// clients: pool_size, plus reserve_pool_size when `use_reserve`, plus one per tethered server up
// to tether_reserve_size.
[[nodiscard]] int pool_server_limit(const PoolSizes& sizes, int tethered, bool use_reserve);

struct ServerCounts {
    int pool = 0;      // the pool's open servers, those still connecting included
    int tethered = 0;  // of them, linked to a tethered client
    int database = 0;  // open servers of every pool of the same database
    int user = 0;      // open servers of every pool of the same server user
};

// Whether a pool may open one more server, and if not, which limit stops it (checked in this
// order).
enum class LaunchVerdict {
    Launch,
    PoolFull,                // at pool_server_limit: clients wait for a server to come back
    TetherReserveExhausted,  // the same, but only because more servers are tethered than
                             // tether_reserve_size covers: the others have fewer than their share
    DatabaseFull,            // max_db_connections
    UserFull,                // max_user_connections
};

[[nodiscard]] LaunchVerdict launch_verdict(const PoolSizes& sizes, const ServerCounts& counts,
                                           bool use_reserve);

// Whether a pool with `servers` open servers, `tethered` of them tethered, has one too many.
enum class Surplus {
    None,
    PoolSizeReduced,      // above what the sizes allow at all (a reload or SET lowered them)
    TetherReserveUnused,  // above the limit only because tethers that justified it have ended
};

[[nodiscard]] Surplus server_surplus(const PoolSizes& sizes, int servers, int tethered);

// Who will serve the clients waiting for a server, so that the pool opens a new one only for the
// rest: the idle servers, those still connecting, and those lent to pgtether's own short query on
// an idle backend (a leak sweep, a catalog or role check). A lent server comes back within
// milliseconds, and a client that met a new backend meanwhile could tell it is not on a direct
// connection (a second backend pid, settings replayed); one away longer than
// kLentServerGraceMs (a slow or silent backend) no longer counts, and a server is opened.
struct WaitingCover {
    std::size_t waiting = 0;
    std::size_t connecting = 0;
    std::size_t idle = 0;
    std::size_t lent = 0;  // lent for less than kLentServerGraceMs
};
inline constexpr std::uint64_t kLentServerGraceMs = 1000;

[[nodiscard]] bool lent_server_covers(std::uint64_t lent_for_ms);
[[nodiscard]] std::size_t uncovered_waiting(const WaitingCover& cover);

}  // namespace pgtether
