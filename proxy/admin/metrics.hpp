// What the metrics endpoint exposes: the numbers of SHOW POOLS, SHOW STATS and SHOW LOCKS as
// metric families (docs/admin.md lists them).
#pragma once

#include <string>

#include "core/metrics_text.hpp"

namespace pgtether {

class AdminContext;

// The process's metrics: with several workers, every worker's summed (core/metrics_merge.hpp).
[[nodiscard]] std::string collect_metrics(AdminContext& worker, MetricsFormat format);

}  // namespace pgtether
