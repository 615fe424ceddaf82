// Logging set-up: spdlog sinks for stderr and the config's logfile.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace pgtether {

struct LogOptions {
    int verbose = 0;         // -v count plus the config's `verbose`
    bool quiet = false;      // no stderr sink
    std::string logfile;     // empty: none
};

// Replaces the default logger. Throws spdlog::spdlog_ex when the logfile cannot be opened.
void setup_logging(const LogOptions& options);

}  // namespace pgtether
