// Snapshots of every pool's counters at the last two stats_period ticks, from which SHOW STATS'
// averages are computed: PgBouncer updates its averages once per stats_period too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "core/stats.hpp"

namespace pgtether {

// Keyed by the objects whose counters they are (proxy/ passes its Pool): core/ only compares
// their addresses and hands them to the caller's filter.
template <typename Pool>
class StatsHistory {
  public:
    explicit StatsHistory(std::uint64_t start_us) : newer_us_(start_us), older_us_(start_us) {}

    // A stats_period ended: what was newest becomes the baseline.
    void tick(const std::map<const Pool*, PoolStats>& current, std::uint64_t now_us) {
        older_ = std::move(newer_);
        older_us_ = newer_us_;
        newer_ = current;
        newer_us_ = now_us;
    }

    // A pool that is gone (an idle auto-database dropped): its figures leave the averages.
    void forget(const Pool* pool) {
        newer_.erase(pool);
        older_.erase(pool);
    }

    // Averages over the last complete period, of the pools `which` selects.
    [[nodiscard]] StatsAverages averages(const std::function<bool(const Pool&)>& which) const {
        PoolStats newer;
        PoolStats older;
        for (const auto& [pool, stats] : newer_) {
            if (which(*pool)) newer += stats;
        }
        for (const auto& [pool, stats] : older_) {
            if (which(*pool)) older += stats;
        }
        return compute_averages(newer, older, newer_us_ - older_us_);
    }

  private:
    std::map<const Pool*, PoolStats> newer_;
    std::map<const Pool*, PoolStats> older_;
    std::uint64_t newer_us_;
    std::uint64_t older_us_;
};

}  // namespace pgtether
