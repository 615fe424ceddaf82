// What pgtether's connections to PostgreSQL -- pooled servers, side connections (auth_query,
// lock discovery), cancel forwarders -- need of the worker that runs them, and nothing more
// (docs/architecture.md, "Layer rules"): the loop (a LoopContext), the configuration in force
// with its TLS contexts, the worker's counters and whether it is shutting down, and a few
// services named one by one below. A Worker
// is one (it derives from it); server/ reaches the worker through this alone, so a connection to
// PostgreSQL does not depend on the daemon that runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/config.hpp"
#include "core/stats.hpp"
#include "proxy/net/loop_context.hpp"

namespace pgtether {

class CancelForwarder;
class PeerCancels;
class Server;
struct SecuritySetup;

class ServerContext : public LoopContext {
public:
    ServerContext(std::size_t read_buffer, std::shared_ptr<const Config> config,
                  std::shared_ptr<const SecuritySetup> security)
        : LoopContext(read_buffer), config_(std::move(config)), security_(std::move(security)) {}

    // The configuration in force and the TLS contexts and HBA rules built from it (read on every
    // path, so kept here rather than behind a virtual call).
    [[nodiscard]] const Config& config() const { return *config_; }
    [[nodiscard]] const SecuritySetup& security() const { return *security_; }
    [[nodiscard]] const std::shared_ptr<const SecuritySetup>& security_ptr() const {
        return security_;
    }
    // Worker-wide counters (the per-pool ones live in Pool).
    [[nodiscard]] WorkerStats& stats() { return stats_; }

    // How a shutdown waits (docs/admin.md, SHUTDOWN).
    enum class ShutdownMode {
        Graceful,        // SHUTDOWN: running transactions get 10 s
        WaitForServers,  // SIGINT, SHUTDOWN WAIT_FOR_SERVERS: as Graceful, without the bound
        WaitForClients,  // SIGTERM, SHUTDOWN WAIT_FOR_CLIENTS: serve the clients until the last
                         // has left
        Immediate,       // SIGQUIT: every client closed (57P01) at once, then exit
    };
    // Shutting down and closing clients and pools (not while SHUTDOWN WAIT_FOR_CLIENTS drains:
    // then the pools serve the connected clients as usual): nothing new is started.
    [[nodiscard]] bool shutting_down() const {
        return shutting_down_ && shutdown_mode_ != ShutdownMode::WaitForClients;
    }
    // SHUTDOWN WAIT_FOR_SERVERS (SIGINT): no transaction starts; the process goes once no server
    // is in use. Asked whenever a client wants a server, so a plain member, not a virtual call.
    [[nodiscard]] bool waiting_for_servers() const {
        return shutting_down_ && shutdown_mode_ == ShutdownMode::WaitForServers;
    }
    // SHUTDOWN WAIT_FOR_CLIENTS: no new clients, the connected ones are served until they leave.
    [[nodiscard]] bool draining() const {
        return shutting_down_ && shutdown_mode_ == ShutdownMode::WaitForClients;
    }

    // Ids of clients and servers, unique in the process.
    [[nodiscard]] virtual std::uint64_t next_id() = 0;
    // The workers of the process (a peer's cancel requests are shared out among them).
    [[nodiscard]] virtual std::size_t worker_count() const = 0;

    // The registry of live servers (SHOW SERVERS, the janitor): a server links itself in when it
    // is created and out when it is destroyed.
    virtual void register_server(Server& server) = 0;
    virtual void unregister_server(Server& server) = 0;

    // Cancel a query on a backend: opens a short connection to its postmaster.
    virtual void forward_cancel(Server& server) = 0;
    // A server is being destroyed: cancel forwarders must not report to it.
    virtual void forget_cancel_target(Server& server) = 0;
    // The registry of cancel requests being forwarded, and the queue of those to peers.
    virtual void register_cancel(CancelForwarder& forwarder) = 0;
    virtual void unregister_cancel(CancelForwarder& forwarder) = 0;
    virtual void for_each_cancel(const std::function<void(const CancelForwarder&)>& fn) const = 0;
    [[nodiscard]] virtual PeerCancels& peer_cancels() = 0;

    // A backend reported a statement that changed the catalog of `database` in a way that may
    // add or drop lock wrappers: the tether's trigger is looked at again.
    virtual void on_catalog_change(const std::string& database) = 0;

protected:
    ~ServerContext() = default;
    // The worker's shutdown, as begin_shutdown sets it (read by the accessors above).
    bool shutting_down_ = false;
    ShutdownMode shutdown_mode_ = ShutdownMode::Graceful;
    // A reload: the new configuration and what was built from it, for connections from now on.
    void set_config(std::shared_ptr<const Config> config,
                    std::shared_ptr<const SecuritySetup> security) {
        config_ = std::move(config);
        security_ = std::move(security);
    }

private:
    std::shared_ptr<const Config> config_;
    std::shared_ptr<const SecuritySetup> security_;
    WorkerStats stats_;
};

}  // namespace pgtether
