// Logging set-up: spdlog sinks for stderr, the config's logfile and syslog.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "proxy/net/log.hpp"

#include "core/root_files.hpp"

namespace pgtether {

struct Config;

struct LogOptions {
    int verbose = 0;         // -v count plus the config's `verbose`
    bool quiet = false;      // no stderr sink
    std::string logfile;     // empty: none
    bool json = false;       // log_format = json: one JSON object per line (core/log_line.hpp)
    bool syslog = false;     // also log to syslog
    std::string syslog_ident = "pgbouncer";
    std::string syslog_facility = "daemon";
    // Set while root, before switching to `user =`: the logfile is opened without following a
    // link, must be a regular file with one link that no third user can write, and is given to
    // this user on its descriptor (so that it can reopen it on reload).
    std::optional<FileOwner> owner;
};

// The options for `config`, given the command line's -v count and -q / -d.
LogOptions log_options_for(const Config& config, int command_line_verbose, bool quiet);

// Replaces the default logger. Called again on reload, which reopens the logfile (so logrotate
// can move it away and send SIGHUP) and applies new verbosity and syslog settings. Throws
// std::runtime_error naming the logfile when it cannot be opened (or, while root, is refused);
// the previous logger then stays. A logfile it creates gets mode 0640.
void setup_logging(const LogOptions& options);

// The LOG_* facility for a syslog_facility name (PgBouncer's names); nullopt if unknown.
std::optional<int> syslog_facility_code(const std::string& name);

}  // namespace pgtether
