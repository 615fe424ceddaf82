// What the metrics endpoint exposes: the numbers of SHOW POOLS, SHOW STATS and SHOW LOCKS as
// metric families (docs/admin.md lists them).
#pragma once

#include <string>

#include "proxy/metrics_text.hpp"

namespace pgtether {

class Worker;

[[nodiscard]] std::string collect_metrics(Worker& worker, MetricsFormat format);

}  // namespace pgtether
