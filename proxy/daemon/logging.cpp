#include "proxy/daemon/logging.hpp"

#include <syslog.h>

#include <memory>
#include <utility>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>

#include "core/config.hpp"

namespace pgtether {

LogOptions log_options_for(const Config& config, int command_line_verbose, bool quiet) {
    LogOptions options;
    options.verbose = command_line_verbose + config.verbose;
    options.quiet = quiet;
    options.logfile = config.logfile;
    options.syslog = config.syslog;
    options.syslog_ident = config.syslog_ident;
    options.syslog_facility = config.syslog_facility;
    return options;
}

std::optional<int> syslog_facility_code(const std::string& name) {
    static const std::pair<const char*, int> kFacilities[] = {
        {"auth", LOG_AUTH},     {"authpriv", LOG_AUTHPRIV}, {"daemon", LOG_DAEMON},
        {"user", LOG_USER},     {"local0", LOG_LOCAL0},     {"local1", LOG_LOCAL1},
        {"local2", LOG_LOCAL2}, {"local3", LOG_LOCAL3},     {"local4", LOG_LOCAL4},
        {"local5", LOG_LOCAL5}, {"local6", LOG_LOCAL6},     {"local7", LOG_LOCAL7},
    };
    for (const auto& [facility, code] : kFacilities) {
        if (name == facility) return code;
    }
    return std::nullopt;
}

namespace {

// One logger for the life of the process, whose sinks change on reload. With `workers` > 1 other
// threads log at any time, so the default logger is never replaced (a replaced one is freed under
// them) and its sinks never change in place: the dist_sink swaps them under its own mutex.
spdlog::sinks::dist_sink_mt& process_sinks() {
    static const std::shared_ptr<spdlog::sinks::dist_sink_mt> sinks = [] {
        auto dist = std::make_shared<spdlog::sinks::dist_sink_mt>();
        spdlog::set_default_logger(std::make_shared<spdlog::logger>("pgtether", dist));
        return dist;
    }();
    return *sinks;
}

}  // namespace

void setup_logging(const LogOptions& options) {
    // PgBouncer-like lines: timestamp, pid, level, message.
    constexpr const char* kPattern = "%Y-%m-%d %H:%M:%S.%e %z [%P] %^%l%$ %v";
    std::vector<spdlog::sink_ptr> sinks;
    if (!options.quiet) sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    if (!options.logfile.empty()) {
        // Opens (appends to) the file: a reload after logrotate moved it starts a new one.
        sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.logfile));
    }
    for (auto& sink : sinks) sink->set_pattern(kPattern);
    auto& dist = process_sinks();
    auto logger = spdlog::default_logger_raw();
    // PgBouncer's levels: verbose 0 logs LOG and above, 1 adds DEBUG, 2 and more add NOISE.
    switch (options.verbose) {
        case 0: logger->set_level(spdlog::level::info); break;
        case 1: logger->set_level(spdlog::level::debug); break;
        default: logger->set_level(spdlog::level::trace); break;
    }
    logger->flush_on(spdlog::level::info);
    // The previous sinks go first: a syslog sink's closelog() would otherwise undo the new
    // sink's openlog() and with it the ident.
    dist.set_sinks(std::move(sinks));
    if (options.syslog) {
        // syslog adds its own timestamp, host and "ident[pid]:"; the message carries the level
        // and the text, as PgBouncer's syslog lines do.
        auto sink = std::make_shared<spdlog::sinks::syslog_sink_mt>(
            options.syslog_ident, LOG_PID,
            syslog_facility_code(options.syslog_facility).value_or(LOG_DAEMON), true);
        sink->set_pattern("%l %v");
        dist.add_sink(std::move(sink));
    }
}

}  // namespace pgtether
