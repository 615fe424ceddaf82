// pgtether's version line: the first line of `pgtether --version` and the admin console's SHOW
// VERSION are this same text, as PgBouncer's are (its test suite and tools compare them). The
// PgBouncer version named is the one whose console, settings and suite pgtether follows: tools
// that read it (exporters choosing SHOW columns) get the columns they expect.
#pragma once

#include <string>

namespace pgtether {

inline std::string version_line() {
    return std::string("pgtether ") + PGTETHER_VERSION + " (PgBouncer 1.24.1 compatible)";
}

}  // namespace pgtether
