// Merging the metrics expositions of several workers (`workers = N`) into the process's one:
// samples with the same name and labels are added up (counters, connection gauges), or the
// largest taken where adding makes no sense (pgtether_info, the paused flags, the longest wait,
// the size of a database's lock trigger, which every worker shares, the configured limits and
// the process's descriptor counts, and what each worker's pool knows of a host). Pure text in, text out: the
// format is the one core/metrics_text.hpp writes (Prometheus 0.0.4 or OpenMetrics 1.0).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgtether {

// Whether samples of family `name` are combined by taking the largest rather than the sum.
[[nodiscard]] bool metrics_family_takes_max(std::string_view name);

// The families in the order they first appear, each with its samples in the order they first
// appear; values are integers or exact decimals with at most six fractional digits.
[[nodiscard]] std::string merge_metrics_texts(const std::vector<std::string>& texts);

}  // namespace pgtether
