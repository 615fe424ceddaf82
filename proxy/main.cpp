// pgtether: entry point. Loads the configuration, sets up logging, the pidfile and signals, and
// runs the worker. Configuration errors are the only exceptions; they end here with exit code 1.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include "proxy/auth_file.hpp"
#include "proxy/cancel_registry.hpp"
#include "proxy/command_line.hpp"
#include "proxy/config.hpp"
#include "proxy/daemon.hpp"
#include "proxy/logging.hpp"
#include "proxy/pool_control.hpp"
#include "proxy/reload.hpp"
#include "proxy/version.hpp"
#include "proxy/worker.hpp"

namespace {

struct Signals {
    uv_signal_t interrupt{};
    uv_signal_t terminate{};
    uv_signal_t hangup{};
    uv_signal_t pause{};
    uv_signal_t resume{};
    pgtether::Worker* worker = nullptr;
    pgtether::ConfigReloader* reloader = nullptr;
};

void on_shutdown_signal(uv_signal_t* handle, int signum) {
    auto* signals = static_cast<Signals*>(handle->data);
    spdlog::info("got signal {}: shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
    signals->worker->begin_shutdown();
}

// PgBouncer's SIGUSR1 / SIGUSR2: PAUSE / RESUME of every database, as on the console (without a
// console to report back to; the log shows it).
void on_pause_signal(uv_signal_t* handle, int signum) {
    auto* signals = static_cast<Signals*>(handle->data);
    auto& control = signals->worker->pool_control();
    if (signum == SIGUSR1) {
        spdlog::info("got SIGUSR1: pausing every database");
        if (!control.paused_all()) control.pause(std::nullopt);
    } else {
        spdlog::info("got SIGUSR2: resuming");
        if (!control.resume(std::nullopt)) spdlog::info("SIGUSR2: nothing was paused");
    }
}

void on_reload_signal(uv_signal_t* handle, int) {
    // The same path as the admin console's RELOAD.
    auto* signals = static_cast<Signals*>(handle->data);
    (void)signals->reloader->reload(*signals->worker, "got SIGHUP");
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
        // The first line is SHOW VERSION's; then the libraries, as PgBouncer lists its own.
        std::printf("%s\nlibuv %s\ntls: %s\n", pgtether::version_line().c_str(),
                    uv_version_string(), OpenSSL_version(OPENSSL_VERSION));
        return 0;
    }

    pgtether::LoadedConfig loaded;
    Signals signals;
    pgtether::ConfigReloader reloader(cl.config_file, cl.verbose, cl.quiet || cl.daemonize);
    try {
        loaded = pgtether::load_configuration(cl.config_file);
        const auto& config = *loaded.config;
        if (cl.daemonize && config.pidfile.empty()) {
            throw std::runtime_error("-d needs a pidfile in the configuration");
        }
        pgtether::setup_logging(
            pgtether::log_options_for(config, reloader.command_line_verbose(), reloader.quiet()));
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
        worker.set_reloader(&reloader);
        signals.worker = &worker;
        signals.reloader = &reloader;
        uv_signal_init(worker.loop(), &signals.interrupt);
        uv_signal_init(worker.loop(), &signals.terminate);
        uv_signal_init(worker.loop(), &signals.hangup);
        uv_signal_init(worker.loop(), &signals.pause);
        uv_signal_init(worker.loop(), &signals.resume);
        signals.interrupt.data = signals.terminate.data = signals.hangup.data = &signals;
        signals.pause.data = signals.resume.data = &signals;
        uv_signal_start(&signals.interrupt, on_shutdown_signal, SIGINT);
        uv_signal_start(&signals.terminate, on_shutdown_signal, SIGTERM);
        uv_signal_start(&signals.hangup, on_reload_signal, SIGHUP);
        uv_signal_start(&signals.pause, on_pause_signal, SIGUSR1);
        uv_signal_start(&signals.resume, on_pause_signal, SIGUSR2);
        worker.set_on_stopped([&signals]() {
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.interrupt), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.terminate), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.hangup), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.pause), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&signals.resume), nullptr);
        });
        // Listen only once the signals are handled: a SIGHUP that arrives as soon as the port
        // accepts connections must reload, not kill the process (SIGHUP's default action).
        worker.start();
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
