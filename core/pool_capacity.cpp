#include "core/pool_capacity.hpp"

#include <algorithm>

namespace pgtether {

PoolSizes resolve_pool_sizes(const Config& config, const DatabaseConfig& database, PoolMode mode,
                             const UserConfig* user) {
    PoolSizes sizes;
    const std::optional<int> no_value;
    sizes.pool_size = (user ? user->pool_size : no_value)
                          .value_or(database.pool_size.value_or(config.default_pool_size));
    sizes.min_pool_size = database.min_pool_size.value_or(config.min_pool_size);
    sizes.reserve_pool_size =
        (user ? user->reserve_pool_size : no_value)
            .value_or(database.reserve_pool_size.value_or(config.reserve_pool_size));
    int tether_reserve = database.tether_reserve_size.value_or(config.tether_reserve_size);
    if (tether_reserve < 0) tether_reserve = sizes.pool_size;
    // In session mode every client keeps its server whether it holds a lock or not: a lock
    // holder takes nothing from the others, so it gets nothing on top of the pool either.
    sizes.tether_reserve_size = mode == PoolMode::Session ? 0 : tether_reserve;
    sizes.max_db_connections = database.max_db_connections.value_or(config.max_db_connections);
    sizes.max_user_connections =
        (user ? user->max_user_connections : no_value).value_or(config.max_user_connections);
    return sizes;
}

int pool_server_limit(const PoolSizes& sizes, int tethered, bool use_reserve) {
    return sizes.pool_size + (use_reserve ? sizes.reserve_pool_size : 0) +
           std::clamp(tethered, 0, sizes.tether_reserve_size);
}

LaunchVerdict launch_verdict(const PoolSizes& sizes, const ServerCounts& counts, bool use_reserve) {
    if (counts.pool >= pool_server_limit(sizes, counts.tethered, use_reserve)) {
        // Would the pool have room if every tethered server were covered by the allowance? Then
        // the clients that hold nothing have fewer than pool_size (+ reserve) servers: lock
        // holders beyond tether_reserve_size are eating into the pool.
        int untethered = counts.pool - counts.tethered;
        int share = sizes.pool_size + (use_reserve ? sizes.reserve_pool_size : 0);
        return counts.tethered > sizes.tether_reserve_size && untethered < share
                   ? LaunchVerdict::TetherReserveExhausted
                   : LaunchVerdict::PoolFull;
    }
    if (sizes.max_db_connections > 0 && counts.database >= sizes.max_db_connections) {
        return LaunchVerdict::DatabaseFull;
    }
    if (sizes.max_user_connections > 0 && counts.user >= sizes.max_user_connections) {
        return LaunchVerdict::UserFull;
    }
    return LaunchVerdict::Launch;
}

Surplus server_surplus(const PoolSizes& sizes, int servers, int tethered) {
    if (servers > pool_server_limit(sizes, sizes.tether_reserve_size, true)) {
        return Surplus::PoolSizeReduced;
    }
    if (servers > pool_server_limit(sizes, tethered, true)) return Surplus::TetherReserveUnused;
    return Surplus::None;
}

bool lent_server_covers(std::uint64_t lent_for_ms) { return lent_for_ms < kLentServerGraceMs; }

std::size_t uncovered_waiting(const WaitingCover& cover) {
    const std::size_t covered = cover.connecting + cover.idle + cover.lent;
    return cover.waiting > covered ? cover.waiting - covered : 0;
}

}  // namespace pgtether
