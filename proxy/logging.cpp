#include "proxy/logging.hpp"

#include <memory>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace pgtether {

void setup_logging(const LogOptions& options) {
    std::vector<spdlog::sink_ptr> sinks;
    if (!options.quiet) sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    if (!options.logfile.empty()) {
        sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.logfile));
    }
    auto logger = std::make_shared<spdlog::logger>("pgtether", sinks.begin(), sinks.end());
    // PgBouncer-like lines: timestamp, pid, level, message.
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %z [%P] %^%l%$ %v");
    switch (options.verbose) {
        case 0: logger->set_level(spdlog::level::info); break;
        case 1: logger->set_level(spdlog::level::debug); break;
        default: logger->set_level(spdlog::level::trace); break;
    }
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(std::move(logger));
}

}  // namespace pgtether
