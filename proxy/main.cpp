// pgtether: entry point. Loads the configuration, sets up logging, the pidfile and signals, and
// runs the worker. Configuration errors are the only exceptions; they end here with exit code 1.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <uv.h>

#include "proxy/auth_file.hpp"
#include "proxy/cancel_registry.hpp"
#include "proxy/command_line.hpp"
#include "proxy/config.hpp"
#include "proxy/daemon.hpp"
#include "proxy/logging.hpp"
#include "proxy/security.hpp"
#include "proxy/worker.hpp"

namespace {

using pgtether::AuthFile;
using pgtether::Config;

struct Loaded {
    std::shared_ptr<const Config> config;
    std::shared_ptr<const AuthFile> auth_file;
    std::shared_ptr<const pgtether::SecuritySetup> security;
};

// Loads the config and its auth_file; throws ConfigError or std::runtime_error.
Loaded load_everything(const std::string& path) {
    Loaded loaded;
    loaded.config = pgtether::load_config(path);
    const auto& config = *loaded.config;
    if (config.auth_type == pgtether::AuthType::Pam) {
        throw pgtether::ConfigError(config.config_file, 0, "auth_type",
                                    "auth_type = pam is not supported by pgtether");
    }
    if (!config.auth_file.empty()) {
        loaded.auth_file = std::make_shared<const AuthFile>(pgtether::load_auth_file(config.auth_file));
    } else {
        // Password methods need secrets: from auth_file, or from auth_query through auth_user
        // (which may also be set per database). cert, hba and the trusting methods do not.
        bool any_auth_user = !config.auth_user.empty();
        for (const auto& db : config.databases) {
            any_auth_user = any_auth_user || !db.auth_user.empty();
        }
        if (config.fallback_database) {
            any_auth_user = any_auth_user || !config.fallback_database->auth_user.empty();
        }
        switch (config.auth_type) {
            case pgtether::AuthType::Plain:
            case pgtether::AuthType::Md5:
            case pgtether::AuthType::ScramSha256:
                if (!any_auth_user) {
                    throw pgtether::ConfigError(config.config_file, 0, "auth_file",
                                                std::string("auth_type = ") +
                                                    pgtether::to_string(config.auth_type) +
                                                    " needs an auth_file or an auth_user");
                }
                break;
            default:
                break;
        }
        loaded.auth_file = std::make_shared<const AuthFile>();
    }
    loaded.security = pgtether::load_security(config);
    return loaded;
}

struct Signals {
    uv_signal_t interrupt{};
    uv_signal_t terminate{};
    uv_signal_t hangup{};
    pgtether::Worker* worker = nullptr;
    std::string config_path;
    pgtether::LogOptions log_options;
};

void on_shutdown_signal(uv_signal_t* handle, int signum) {
    auto* signals = static_cast<Signals*>(handle->data);
    spdlog::info("got signal {}: shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
    signals->worker->begin_shutdown();
}

void on_reload_signal(uv_signal_t* handle, int) {
    auto* signals = static_cast<Signals*>(handle->data);
    spdlog::info("got SIGHUP: reloading {}", signals->config_path);
    try {
        auto loaded = load_everything(signals->config_path);
        for (const auto& note : loaded.config->unsupported_keys) spdlog::warn("{}", note);
        signals->worker->apply_config(loaded.config, loaded.auth_file, loaded.security);
        spdlog::info("configuration reloaded");
    } catch (const std::exception& e) {
        spdlog::error("reload failed, keeping the running configuration: {}", e.what());
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    auto parsed = pgtether::parse_command_line(args);
    if (auto* error = std::get_if<pgtether::CommandLineError>(&parsed)) {
        std::fprintf(stderr, "pgtether: %s\n%s", error->message.c_str(),
                     pgtether::usage_text(argv[0]).c_str());
        return 1;
    }
    const auto& cl = std::get<pgtether::CommandLine>(parsed);
    if (cl.show_help) {
        std::fputs(pgtether::usage_text(argv[0]).c_str(), stdout);
        return 0;
    }
    if (cl.show_version) {
        std::printf("pgtether %s\n", PGTETHER_VERSION);
        return 0;
    }

    Loaded loaded;
    Signals signals;
    try {
        loaded = load_everything(cl.config_file);
        const auto& config = *loaded.config;
        if (cl.daemonize && config.pidfile.empty()) {
            throw std::runtime_error("-d needs a pidfile in the configuration");
        }
        signals.config_path = cl.config_file;
        signals.log_options = {cl.verbose + config.verbose, cl.quiet || cl.daemonize,
                               config.logfile};
        pgtether::setup_logging(signals.log_options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pgtether: %s\n", e.what());
        return 1;
    }
    const auto& config = *loaded.config;
    for (const auto& note : config.unsupported_keys) spdlog::warn("{}", note);

    // A peer that closes while we write must not kill the process: libuv reports EPIPE instead.
    signal(SIGPIPE, SIG_IGN);

    pgtether::CancelRegistry cancels;
    try {
        if (cl.daemonize) pgtether::daemonize();
        if (!config.pidfile.empty()) pgtether::write_pidfile(config.pidfile);
        pgtether::Worker worker(loaded.config, loaded.auth_file, cancels, loaded.security);
        worker.start();
        signals.worker = &worker;
        uv_signal_init(worker.loop(), &signals.interrupt);
        uv_signal_init(worker.loop(), &signals.terminate);
        uv_signal_init(worker.loop(), &signals.hangup);
        signals.interrupt.data = signals.terminate.data = signals.hangup.data = &signals;
        uv_signal_start(&signals.interrupt, on_shutdown_signal, SIGINT);
        uv_signal_start(&signals.terminate, on_shutdown_signal, SIGTERM);
        uv_signal_start(&signals.hangup, on_reload_signal, SIGHUP);
        worker.set_on_stopped([&signals]() {
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.interrupt), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.terminate), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.hangup), nullptr);
        });
        spdlog::info("pgtether {} started (pid {})", PGTETHER_VERSION, getpid());
        worker.run();
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        pgtether::remove_pidfile(config.pidfile);
        return 1;
    }
    pgtether::remove_pidfile(config.pidfile);
    return 0;
}
