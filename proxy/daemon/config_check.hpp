// pgtether --check CONFIG.ini [RUNNING.ini] (like nginx -t): loads the configuration as a start
// would -- the ini and its %includes with every problem listed, then the auth_file, TLS files
// and auth_hba_file -- prints what is wrong, and with RUNNING.ini what a RELOAD from that
// configuration would change (core/config_diff.hpp). Starts nothing (docs/admin.md, "Checking a
// configuration").
#pragma once

#include <cstdio>
#include <string>

namespace pgtether {

// Writes problems and warnings to `err`, the verdict and the changes to `out`. Returns the exit
// status: 0 when `path` is valid (and RUNNING.ini, when given, loads), 1 otherwise.
[[nodiscard]] int run_config_check(const std::string& path, const std::string& running_path,
                                   std::FILE* out, std::FILE* err);

}  // namespace pgtether
