#include "proxy/daemon/config_check.hpp"

#include <exception>

#include <spdlog/sinks/stdout_sinks.h>

#include "core/config.hpp"
#include "proxy/net/log.hpp"
#include "core/config_diff.hpp"
#include "proxy/daemon/reload.hpp"

namespace pgtether {

namespace {

void print_errors(const ConfigCheck& check, std::FILE* err) {
    for (const auto& error : check.errors)
        std::fprintf(err, "%s\n", error.what());
}

}  // namespace

int run_config_check(const std::string& path, const std::string& running_path, std::FILE* out,
                     std::FILE* err) {
    // What loading logs (a missing auth_file) is a warning of the check, on stderr.
    auto logger = spdlog::stderr_logger_mt("pgtether-check");
    logger->set_pattern("%v");
    spdlog::set_default_logger(logger);

    ConfigCheck check = check_config(path);
    print_errors(check, err);
    bool valid = check.errors.empty();
    if (valid) {
        // The rest of a start-up's checks: auth_file, auth_type, TLS files, auth_hba_file.
        try {
            (void)load_configuration(path);
        } catch (const std::exception& e) {
            std::fprintf(err, "%s\n", e.what());
            valid = false;
        }
    }
    if (!valid) {
        const std::size_t count = check.errors.empty() ? 1 : check.errors.size();
        std::fprintf(err, "pgtether: %s: %zu problem%s, the configuration is not valid\n",
                     path.c_str(), count, count == 1 ? "" : "s");
        return 1;
    }
    for (const auto& warning : configuration_warnings(*check.config)) {
        std::fprintf(err, "%s\n", warning.c_str());
    }
    std::fprintf(out, "pgtether: %s: the configuration is valid\n", path.c_str());
    if (running_path.empty()) return 0;

    ConfigCheck running = check_config(running_path);
    if (!running.errors.empty()) {
        print_errors(running, err);
        std::fprintf(err, "pgtether: %s: cannot compare with it: it is not valid\n",
                     running_path.c_str());
        return 1;
    }
    const auto changes = diff_configs(*running.config, *check.config);
    if (changes.empty()) {
        std::fprintf(out, "a RELOAD from %s would change nothing\n", running_path.c_str());
        return 0;
    }
    std::fprintf(out, "a RELOAD from %s would change:\n", running_path.c_str());
    for (const auto& change : changes)
        std::fprintf(out, "  %s\n", change.describe().c_str());
    return 0;
}

}  // namespace pgtether
