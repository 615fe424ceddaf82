// pgtether's version line: the first line of `pgtether --version` and the admin console's SHOW
// VERSION are this same text, as PgBouncer's are (its test suite and tools compare them).
#pragma once

#include <string>

namespace pgtether {

inline std::string version_line() {
    return std::string("pgtether ") + PGTETHER_VERSION + " (PgBouncer 1.18.0 compatible)";
}

}  // namespace pgtether
