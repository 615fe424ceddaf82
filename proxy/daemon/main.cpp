// pgtether: entry point. Loads the configuration, sets up logging, the pidfile and signals, and
// runs the workers (worker 0 on this thread, the others on threads of their own). Configuration
// errors are the only exceptions; they end here with exit code 1.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <openssl/crypto.h>
#include <uv.h>

#include "core/auth_file.hpp"
#include "core/command_line.hpp"
#include "core/config.hpp"
#include "proxy/admin/version.hpp"
#include "proxy/client/cancel_registry.hpp"
#include "proxy/client/login_work.hpp"
#include "proxy/daemon/config_check.hpp"
#include "proxy/daemon/daemon.hpp"
#include "proxy/daemon/logging.hpp"
#include "proxy/daemon/privileges.hpp"
#include "proxy/daemon/reload.hpp"
#include "proxy/daemon/systemd_notify.hpp"
#include "proxy/daemon/worker.hpp"
#include "proxy/daemon/worker_group.hpp"
#include "proxy/net/log.hpp"
#include "proxy/pool/pool_control.hpp"

namespace {

struct Signals {
    uv_timer_t status_timer{};  // systemd STATUS= updates
    uv_signal_t interrupt{};
    uv_signal_t terminate{};
    uv_signal_t quit{};
    uv_signal_t hangup{};
    uv_signal_t pause{};
    uv_signal_t resume{};
    // Sent by the last worker to stop: the signal handles close then, not before (a SIGTERM
    // while other workers still drain must not kill the process).
    uv_async_t all_stopped{};
    std::atomic<std::size_t> running{0};
    pgtether::Worker* worker = nullptr;  // worker 0: the signals are handled on its loop
    pgtether::ConfigReloader* reloader = nullptr;
    pgtether::SystemdNotifier* notifier = nullptr;
};

std::string status_line(pgtether::Worker& worker) {
    // Worker 0's servers and pools; the clients of every worker.
    return pgtether::notify_status_line(worker.group().clients(), worker.server_count(),
                                        worker.pools().size());
}

// Runs `fn` on every worker: on worker 0 (this loop) now, on the others from their mailboxes.
void for_every_worker(pgtether::Worker& first, const std::function<void(pgtether::Worker&)>& fn) {
    first.group().post_to_others(first, fn);
    fn(first);
}

void on_status_timer(uv_timer_t* handle) {
    auto* signals = static_cast<Signals*>(handle->data);
    signals->notifier->notify("STATUS=" + status_line(*signals->worker));
}

// PgBouncer 1.23+'s meanings (and its log words): SIGTERM waits for every client to disconnect
// (SHUTDOWN WAIT_FOR_CLIENTS: rolling restarts), SIGINT for every server connection to be
// released (SHUTDOWN WAIT_FOR_SERVERS), SIGQUIT exits at once; a second SIGTERM or SIGINT stops
// waiting. (PgBouncer 1.18 and pgtether before made SIGTERM a shutdown after 10 s at most.)
void on_shutdown_signal(uv_signal_t* handle, int signum) {
    using Mode = pgtether::Worker::ShutdownMode;
    auto* signals = static_cast<Signals*>(handle->data);
    const char* name = signum == SIGINT ? "SIGINT" : signum == SIGQUIT ? "SIGQUIT" : "SIGTERM";
    Mode mode = Mode::Immediate;
    if (signum == SIGQUIT) {
        spdlog::info("got SIGQUIT, fast exit");
    } else if (signals->worker->shutting_down() || signals->worker->draining()) {
        spdlog::info("got {} while shutting down, fast exit", name);
    } else if (signum == SIGTERM) {
        spdlog::info("got SIGTERM, shutting down, waiting for all clients disconnect");
        mode = Mode::WaitForClients;
    } else {
        spdlog::info("got SIGINT, shutting down, waiting for all servers connections to be "
                     "released");
        mode = Mode::WaitForServers;
    }
    signals->notifier->notify("STOPPING=1\nSTATUS=shutting down");
    for_every_worker(*signals->worker,
                     [mode](pgtether::Worker& worker) { worker.begin_shutdown(mode); });
}

// PgBouncer's SIGUSR1 / SIGUSR2: PAUSE / RESUME of every database, as on the console (without a
// console to report back to; the log shows it).
void on_pause_signal(uv_signal_t* handle, int signum) {
    auto* signals = static_cast<Signals*>(handle->data);
    auto& control = signals->worker->pool_control();
    if (signum == SIGUSR1) {
        spdlog::info("got SIGUSR1: pausing every database");
        for_every_worker(*signals->worker, [](pgtether::Worker& worker) {
            if (!worker.pool_control().paused_all()) worker.pool_control().pause(std::nullopt);
        });
    } else {
        if (signals->worker->shutting_down() || signals->worker->draining()) {
            spdlog::info("got SIGUSR2 while shutting down, ignoring");  // PgBouncer's words
            return;
        }
        spdlog::info("got SIGUSR2: resuming");
        if (!control.paused_all()) spdlog::info("SIGUSR2: nothing was paused");
        for_every_worker(*signals->worker, [](pgtether::Worker& worker) {
            (void)worker.pool_control().resume(std::nullopt);
        });
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
    if (cl.check) {
        return pgtether::run_config_check(cl.config_file, cl.running_file, stdout, stderr);
    }
    if (cl.show_version) {
        // The first line is SHOW VERSION's; then the libraries, as PgBouncer lists its own.
        std::printf("%s\nlibuv %s\ntls: %s\n", pgtether::version_line().c_str(),
                    uv_version_string(), OpenSSL_version(OPENSSL_VERSION));
        return 0;
    }

    // Start-up errors go to stderr and, once the configuration names one, to the logfile too
    // (with -d, stderr is gone a moment later). Until daemonizing, stderr is on unless -q.
    pgtether::LoadedConfig loaded;
    Signals signals;
    pgtether::ConfigReloader reloader(cl.config_file, cl.verbose, cl.quiet || cl.daemonize);
    bool logging_ready = false;
    auto start_up_error = [&](const std::string& message) {
        if (logging_ready) {
            spdlog::critical("{}", message);
            return 1;
        }
        std::fprintf(stderr, "pgtether: %s\n", message.c_str());
        // The configuration did not load, but the lines that did may name a logfile (and
        // log_format): the error goes there too, where an operator of a daemon looks
        // (docs/deployment.md). Not as root: the file's checks need the user it switches to.
        try {
            const auto partial = pgtether::check_config(cl.config_file).config;
            if (partial && !partial->logfile.empty() && geteuid() != 0) {
                pgtether::setup_logging(pgtether::log_options_for(*partial, 0, true));
                spdlog::critical("{}", message);
            }
        } catch (const std::exception&) {
            // No logfile to be had: stderr was all there is.
        }
        return 1;
    };
    // Root: switch to `user` (or -u) once the sockets are bound; without one, refuse to start.
    // The files root creates before that are handed to the user on their descriptors.
    std::string wanted_user;
    pgtether::PrivilegePlan privileges;
    std::optional<pgtether::FileOwner> owner;
    std::optional<gid_t> socket_group;  // unix_socket_group
    try {
        auto first_look = pgtether::load_config(cl.config_file);
        wanted_user = !cl.user.empty() ? cl.user : first_look->user;
        privileges =
            pgtether::plan_privileges(geteuid() == 0, wanted_user, pgtether::current_user_name());
        if (privileges.action == pgtether::PrivilegePlan::Action::Refuse) {
            return start_up_error(privileges.message);
        }
        if (privileges.action == pgtether::PrivilegePlan::Action::Switch) {
            owner = pgtether::lookup_user(wanted_user);
            pgtether::check_root_paths(*first_look, *owner);
        }
        auto log_options =
            pgtether::log_options_for(*first_look, reloader.command_line_verbose(), cl.quiet);
        log_options.owner = owner;
        pgtether::setup_logging(log_options);
        logging_ready = true;
        loaded = pgtether::load_configuration(cl.config_file);
        if (!loaded.config->unix_socket_group.empty() && !loaded.config->unix_socket_dir.empty()) {
            socket_group = pgtether::lookup_group(loaded.config->unix_socket_group);
        }
        if (cl.daemonize && loaded.config->pidfile.empty()) {
            throw std::runtime_error("-d needs a pidfile in the configuration");
        }
    } catch (const std::exception& e) {
        return start_up_error(e.what());
    }
    const auto& config = *loaded.config;
    for (const auto& warning : pgtether::configuration_warnings(config))
        spdlog::warn("{}", warning);

    pgtether::raise_fd_limit(config, loaded.auth_file ? loaded.auth_file->size() : 0);

    // A peer that closes while we write must not kill the process: libuv reports EPIPE instead.
    signal(SIGPIPE, SIG_IGN);

    // libuv's thread pool runs the logins' key derivations and PAM checks (at most
    // LoginWork::kMaxRunning per worker, proxy/client/login_work.hpp) and DNS lookups: sized so
    // that every worker's login work and a few lookups fit at once, unless the operator chose
    // UV_THREADPOOL_SIZE.
    // libuv reads it when the pool first starts, after this.
    if (std::getenv("UV_THREADPOOL_SIZE") == nullptr) {
        const std::size_t threads = std::max<std::size_t>(
            4,
            static_cast<std::size_t>(config.workers) * pgtether::LoginWork::kMaxRunning + 2);
        setenv("UV_THREADPOOL_SIZE", std::to_string(threads).c_str(), 1);
    }

    pgtether::WorkerGroup group(static_cast<std::size_t>(config.workers));
    pgtether::SystemdNotifier notifier;
    reloader.set_notifier(&notifier);
    signals.notifier = &notifier;
    try {
        if (cl.daemonize) pgtether::daemonize();
        if (!config.pidfile.empty()) pgtether::write_pidfile(config.pidfile, owner);
        std::vector<std::unique_ptr<pgtether::Worker>> workers;
        for (int i = 0; i < config.workers; ++i) {
            workers.push_back(std::make_unique<pgtether::Worker>(loaded.config, loaded.auth_file,
                                                                 group, loaded.security));
            workers.back()->set_reloader(&reloader);
        }
        pgtether::Worker& worker = *workers.front();
        signals.worker = &worker;
        signals.reloader = &reloader;
        uv_timer_init(worker.loop(), &signals.status_timer);
        signals.status_timer.data = &signals;
        uv_signal_init(worker.loop(), &signals.interrupt);
        uv_signal_init(worker.loop(), &signals.terminate);
        uv_signal_init(worker.loop(), &signals.quit);
        uv_signal_init(worker.loop(), &signals.hangup);
        uv_signal_init(worker.loop(), &signals.pause);
        uv_signal_init(worker.loop(), &signals.resume);
        signals.interrupt.data = signals.terminate.data = signals.hangup.data = &signals;
        signals.quit.data = &signals;
        signals.pause.data = signals.resume.data = &signals;
        uv_signal_start(&signals.interrupt, on_shutdown_signal, SIGINT);
        uv_signal_start(&signals.terminate, on_shutdown_signal, SIGTERM);
        uv_signal_start(&signals.quit, on_shutdown_signal, SIGQUIT);
        uv_signal_start(&signals.hangup, on_reload_signal, SIGHUP);
        uv_signal_start(&signals.pause, on_pause_signal, SIGUSR1);
        uv_signal_start(&signals.resume, on_pause_signal, SIGUSR2);
        uv_async_init(worker.loop(), &signals.all_stopped, [](uv_async_t* async) {
            auto* s = static_cast<Signals*>(async->data);
            s->worker->close_metrics_endpoint();
            uv_close(reinterpret_cast<uv_handle_t*>(&s->status_timer), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->interrupt), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->terminate), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->quit), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->hangup), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->pause), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->resume), nullptr);
            uv_close(reinterpret_cast<uv_handle_t*>(&s->all_stopped), nullptr);
        });
        signals.all_stopped.data = &signals;
        signals.running = workers.size();
        for (auto& each : workers) {
            each->set_on_stopped([&signals]() {
                if (--signals.running == 0) uv_async_send(&signals.all_stopped);
            });
        }
        // Listen only once the signals are handled: a SIGHUP that arrives as soon as the port
        // accepts connections must reload, not kill the process (SIGHUP's default action).
        for (auto& each : workers) each->start();
        if ((owner || socket_group) && !config.unix_socket_dir.empty()) {
            // The sockets are bound; the Unix socket goes to the user, so that it can remove it
            // at exit (the pidfile and the logfile were handed over when they were created), and
            // to unix_socket_group, as PgBouncer does (the mode is unix_socket_mode's from bind).
            std::string to_whom = owner ? "user \"" + owner->name + "\"" : std::string();
            if (socket_group) {
                to_whom += (to_whom.empty() ? "" : " and ") + std::string("group \"") +
                           config.unix_socket_group + "\"";
            }
            pgtether::give_unix_socket(
                config.unix_socket_dir + "/.s.PGSQL." + std::to_string(config.listen_port),
                owner ? owner->uid : static_cast<uid_t>(-1),
                socket_group ? *socket_group : owner ? owner->gid : static_cast<gid_t>(-1),
                to_whom);
        }
        if (owner) {
            pgtether::switch_user(*owner);
            spdlog::info("switched to user {}", owner->name);
        }
        if (workers.size() > 1) {
            spdlog::info("pgtether {} started (pid {}, {} workers)", PGTETHER_VERSION, getpid(),
                         workers.size());
        } else {
            spdlog::info("pgtether {} started (pid {})", PGTETHER_VERSION, getpid());
        }
        if (notifier.enabled()) {
            notifier.notify("READY=1\nSTATUS=" + status_line(worker));
            uv_timer_start(&signals.status_timer, on_status_timer, 10'000, 10'000);
        }
        std::vector<std::thread> threads;
        for (std::size_t i = 1; i < workers.size(); ++i) {
            threads.emplace_back([&each = *workers[i]]() { each.run(); });
        }
        worker.run();
        for (auto& thread : threads) thread.join();
    } catch (const std::exception& e) {
        spdlog::critical("{}", e.what());
        pgtether::remove_pidfile(config.pidfile);
        return 1;
    }
    pgtether::remove_pidfile(config.pidfile);
    return 0;
}
