// What the admin console, SHOW, the metrics endpoint and /healthz need of their worker beyond
// what pools need (a PoolContext; docs/architecture.md, "Layer rules"): the configuration
// changes of RELOAD and SET, SHUTDOWN, the listening sockets (SHOW FDS), the stats history (SHOW
// STATS' averages), the counts of live connections, and the workers as the console reaches
// them -- every one for a SHOW or a command of the process, one for KILL_CLIENT. A Worker is one
// (it derives from it); admin/ reaches the worker through this alone, so the console builds and
// links below the daemon.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/stats_history.hpp"
#include "proxy/net/listener.hpp"
#include "proxy/pool/pool_context.hpp"

namespace pgtether {

class Pool;

class AdminContext : public PoolContext {
public:
    using PoolContext::PoolContext;

    // RELOAD: the configuration file read again and applied to every worker; SET: one setting
    // changed in the running configuration. nullopt when done, else why not (nothing changed).
    // SET's `notice` is what the console adds to a success. settings_changeable is false when
    // no configuration can be changed (a worker started without one, in tests).
    [[nodiscard]] virtual bool settings_changeable() const = 0;
    virtual std::optional<std::string> reload_config(std::string_view trigger) = 0;
    virtual std::optional<std::string> set_setting(std::string_view key, std::string_view value,
                                                   std::string& notice) = 0;
    // SHUTDOWN (and its modes) of this worker; the console asks every worker.
    virtual void begin_shutdown(ShutdownMode mode) = 0;

    // The listening sockets (SHOW FDS).
    [[nodiscard]] virtual const std::vector<std::unique_ptr<Listener>>& listeners() const = 0;
    // Snapshots at the last stats_period ticks, for SHOW STATS' averages.
    [[nodiscard]] virtual const StatsHistory<Pool>& stats_history() const = 0;
    // Live connections of this worker, and server connections of a database in the process.
    [[nodiscard]] virtual std::size_t client_count() const = 0;
    [[nodiscard]] virtual std::size_t server_count() const = 0;
    [[nodiscard]] virtual int database_server_count(const std::string& database) const = 0;

    // The workers, as the console reaches them (their threads: WorkerGroup). Runs `fn` on every
    // worker, this one first, and returns when all have run it; `fn` only reads.
    virtual void gather_all_workers(const std::function<void(AdminContext&)>& fn) = 0;
    // Queues `fn` on every other worker (run from their loops, in order).
    virtual void tell_other_workers(std::function<void(AdminContext&)> fn) = 0;
    // Queues `fn` on worker `index`; false when its loop has stopped (`fn` is not run).
    virtual bool tell_worker(std::size_t index, std::function<void(AdminContext&)> fn) = 0;

protected:
    ~AdminContext() = default;
};

}  // namespace pgtether
