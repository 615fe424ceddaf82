// GET /readyz on the metrics endpoint: what the process knows right now, gathered from every
// worker, put to core/readiness.hpp's decision (docs/admin.md, "Health endpoints").
#pragma once

#include "core/readiness.hpp"

namespace pgtether {

class AdminContext;

// `worker` is the one serving the request (worker 0, which owns the metrics endpoint).
[[nodiscard]] Readiness check_readiness(AdminContext& worker);

}  // namespace pgtether
