#include "proxy/daemon/worker.hpp"

#include <netdb.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>

#include "proxy/net/log.hpp"

#include "protocol/backend_messages.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/admin/admin_console.hpp"
#include "proxy/admin/metrics_server.hpp"
#include "proxy/client/cancel_registry.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/login_work.hpp"
#include "proxy/daemon/reload.hpp"
#include "proxy/daemon/worker_group.hpp"
#include "proxy/net/intrusive_list.hpp"
#include "proxy/net/listener.hpp"
#include "proxy/net/security.hpp"
#include "proxy/pool/janitor.hpp"
#include "proxy/pool/lock_catalog.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_control.hpp"
#include "proxy/server/auth_lookups.hpp"
#include "proxy/server/cancel_forwarder.hpp"
#include "proxy/server/peer_cancels.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

namespace {

// pkt_buf sizes the loop's shared receive buffer; tiny values would only multiply read calls.
std::size_t read_buffer_size(const Config& config) {
    constexpr int kMinReadBuffer = 1024;
    constexpr int kMaxReadBuffer = 16 * 1024 * 1024;
    return static_cast<std::size_t>(std::clamp(config.pkt_buf, kMinReadBuffer, kMaxReadBuffer));
}

TcpOptions tcp_options_of(const Config& config) {
    TcpOptions options;
    options.user_timeout = config.tcp_user_timeout;
    options.keepalive = config.tcp_keepalive;
    options.keepidle = config.tcp_keepidle;
    options.keepintvl = config.tcp_keepintvl;
    options.keepcnt = config.tcp_keepcnt;
    options.socket_buffer = config.tcp_socket_buffer;
    return options;
}

}  // namespace

struct Worker::Registry {
    IntrusiveList<Client, &Client::worker_hook_> clients;
    IntrusiveList<Server, &Server::worker_hook_> servers;
    IntrusiveList<CancelForwarder, &CancelForwarder::worker_hook_> cancels;
};

Worker::Worker(std::shared_ptr<const Config> config, std::shared_ptr<const AuthFile> auth_file,
               WorkerGroup& group, std::shared_ptr<const SecuritySetup> security)
    : AdminContext(read_buffer_size(*config), config,
                   security ? std::move(security) : load_security(*config), std::move(auth_file),
                   group.budget(), group.catalog_watches()),
      group_(group),
      registry_(std::make_unique<Registry>()),
      stats_history_(now_us()),
      auth_lookups_(std::make_unique<AuthLookups>(*this)),
      login_work_(std::make_unique<LoginWork>(loop())),
      peer_cancels_(std::make_unique<PeerCancels>(*this)) {
    control_ = std::make_unique<PoolControl>(*this);
    set_tcp_options(tcp_options_of(this->config()));
    uv_async_init(loop(), &mailbox_async_, on_mailbox);
    mailbox_async_.data = this;
    index_ = group_.add(*this);
    uv_timer_init(loop(), &janitor_timer_);
    janitor_timer_.data = this;
    uv_timer_init(loop(), &stats_timer_);
    stats_timer_.data = this;
    uv_check_init(loop(), &hand_off_check_);
    hand_off_check_.data = this;
    uv_idle_init(loop(), &hand_off_idle_);
    hand_off_idle_.data = this;
    lock_catalog_ = std::make_unique<LockCatalog>(*this);
}

Worker::~Worker() {
    if (!stopped_) close_for_exit();
    auth_lookups_.reset();
    lock_catalog_->shutdown();
    metrics_.reset();
    listeners_.clear();
    pools_.clear();
    // LoopContext closes the loop once the members holding handles are gone.
}

// ---------------------------------------------------------------------------------------------
// Start-up and the loop

void Worker::start() {
    const auto& config = this->config();
    const std::string port = std::to_string(config.listen_port);
    // Every worker listens on the TCP addresses itself. With so_reuseport each binds a socket of
    // its own and the kernel spreads new connections over them; without it worker 0 binds the
    // one socket per address and the others watch duplicates of it (SO_REUSEPORT only when the
    // operator asked: it also lets any other process of our uid bind the port and take a share
    // of the clients). The Unix socket and the metrics endpoint are worker 0's
    // (docs/architecture.md, "Workers").
    const bool first = index_ == 0;
    if (!first && !config.so_reuseport) {
        for (const auto& shared : group_.at(0).listeners()) {
            if (!shared->is_tcp()) continue;
            auto listener = std::make_unique<Listener>(*this, *this);
            listener->listen_shared(*shared);
            listeners_.push_back(std::move(listener));
        }
    }
    const std::vector<std::string> none;
    const auto& own_addresses = first || config.so_reuseport ? config.listen_addr : none;
    for (const auto& spec : own_addresses) {
        for (const auto& host : listen_hosts(spec)) {
            const AddrinfoList addresses = resolve_listen_address(host, port, "listen_addr");
            for (addrinfo* ai = addresses.get(); ai; ai = ai->ai_next) {
                auto listener = std::make_unique<Listener>(*this, *this);
                try {
                    listener->listen_tcp(ai->ai_addr, host + ":" + port, config.listen_backlog,
                                         config.so_reuseport);
                    listener->set_defer_accept(config.tcp_defer_accept);
                } catch (...) {
                    listener->close();
                    listeners_.push_back(std::move(listener));
                    throw;
                }
                if (first) spdlog::info("listening on {}:{}", host, port);
                listeners_.push_back(std::move(listener));
                if (spec != "*") break;  // the first address of a name is enough
            }
        }
    }
    if (first && !config.unix_socket_dir.empty()) {
        auto listener = std::make_unique<Listener>(*this, *this);
        std::string path = config.unix_socket_dir + "/.s.PGSQL." + port;
        listener->listen_unix(path, config.unix_socket_mode, config.listen_backlog);
        spdlog::info("listening on unix:{}", path);
        listeners_.push_back(std::move(listener));
    }
    if (first && config.metrics_listen_port != 0) {
        metrics_ = std::make_unique<MetricsServer>(*this);
        metrics_->listen(config.metrics_listen_addr, config.metrics_listen_port,
                         config.listen_backlog);
    }
    uv_timer_start(&janitor_timer_, on_janitor, janitor::kIntervalMs, janitor::kIntervalMs);
    restart_stats_timer();
}

void Worker::restart_stats_timer() {
    auto period = duration_ms(config().stats_period);
    if (period == stats_period_ms_) return;
    stats_period_ms_ = period;
    uv_timer_stop(&stats_timer_);
    if (period > 0) uv_timer_start(&stats_timer_, on_stats_timer, period, period);
}

// ---------------------------------------------------------------------------------------------
// The mailbox: what other workers ask of this one

bool Worker::post(std::function<void()> task, bool gathering) {
    {
        std::lock_guard lock(mailbox_mutex_);
        if (mailbox_closed_) return false;
        mailbox_.push_back({std::move(task), gathering});
    }
    uv_async_send(&mailbox_async_);
    return true;
}

void Worker::on_mailbox(uv_async_t* async) { static_cast<Worker*>(async->data)->serve_mailbox(); }

void Worker::serve_gathers() {
    std::vector<Task> gathering;
    {
        std::lock_guard lock(mailbox_mutex_);
        auto first = std::stable_partition(mailbox_.begin(), mailbox_.end(),
                                           [](const Task& task) { return !task.gathering; });
        std::move(first, mailbox_.end(), std::back_inserter(gathering));
        mailbox_.erase(first, mailbox_.end());
    }
    for (auto& task : gathering) task.run();
}

void Worker::serve_mailbox() {
    // In the order posted: a SHOW gathered after a command sees the command's effect.
    std::vector<Task> tasks;
    {
        std::lock_guard lock(mailbox_mutex_);
        tasks.swap(mailbox_);
    }
    for (auto& task : tasks) task.run();
}

void Worker::close_mailbox() {
    {
        std::lock_guard lock(mailbox_mutex_);
        mailbox_closed_ = true;
    }
    // Whoever posted these may be waiting for them (WorkerGroup::gather).
    serve_mailbox();
    uv_close(reinterpret_cast<uv_handle_t*>(&mailbox_async_), nullptr);
}

CancelRegistry& Worker::cancels() { return group_.cancels(); }

void Worker::post_to_other_workers(std::function<void(PoolContext&)> fn) {
    group_.post_to_others_as(*this, std::move(fn));
}

bool Worker::post_to_worker(std::size_t index, std::function<void(PoolContext&)> fn) {
    return group_.post_to_as(index, std::move(fn));
}

void Worker::gather_from_workers(const std::function<void(PoolContext&)>& fn) {
    group_.gather_as(*this, fn);
}

void Worker::gather_all_workers(const std::function<void(AdminContext&)>& fn) {
    group_.gather_as(*this, fn);
}

void Worker::tell_other_workers(std::function<void(AdminContext&)> fn) {
    group_.post_to_others_as(*this, std::move(fn));
}

bool Worker::tell_worker(std::size_t index, std::function<void(AdminContext&)> fn) {
    return group_.post_to_as(index, std::move(fn));
}

std::optional<std::string> Worker::reload_config(std::string_view trigger) {
    return reloader_->reload(*this, trigger);
}

std::optional<std::string> Worker::set_setting(std::string_view key, std::string_view value,
                                               std::string& notice) {
    return reloader_->set(*this, key, value, notice);
}

std::size_t Worker::worker_count() const { return group_.size(); }

void Worker::on_catalog_change(const std::string& database) {
    lock_catalog_->on_catalog_change(database);
}

void Worker::on_unknown_lock_call(const std::string& database) {
    lock_catalog_->on_unknown_call(database);
}

bool Worker::database_disabled(const std::string& database) const {
    return control_->disabled(database);
}

std::unique_ptr<ConsoleSession> Worker::open_admin_session(Client& client) {
    return std::make_unique<AdminSession>(*this, client);
}

bool Worker::over_client_limit() const {
    return group_.over_client_limit(config().max_client_conn);
}

ClientCounts& Worker::client_counts() { return group_.client_counts(); }

std::uint64_t Worker::next_id() { return ++last_id_ * group_.size() + index_ - (group_.size() - 1); }

int Worker::database_server_count(const std::string& database) const {
    return group_.budget().database_servers(database);
}

void Worker::run() {
    uv_run(loop(), UV_RUN_DEFAULT);
    // Let every handle's close callback run.
    uv_run(loop(), UV_RUN_DEFAULT);
}

// ---------------------------------------------------------------------------------------------
// Clients and servers

void Worker::accept_client(int fd, bool tcp, bool drained) {
    auto* client = new Client(*this, tcp);
    if (!client->accept(fd)) return;  // closed and freed by the client itself
    stats().clients_accepted++;
    // While draining (SHUTDOWN WAIT_FOR_CLIENTS), clients the listeners had already queued are
    // served, and the Unix socket stays open for the admin console (Client::on_authenticated
    // refuses everything else).
    if (draining() && !drained && !tcp) client->restrict_to_console();
    if (shutting_down_ && !(draining() && (drained || !tcp))) {
        client->fail(protocol::sqlstate::kCannotConnectNow, "pgtether is shutting down");
        return;
    }
    // The new client is already counted (in every worker's count: max_client_conn is a limit of
    // the process).
    // Refused (and counted in clients_refused) once its start-up packet shows it is not for the
    // console.
    if (group_.over_client_limit(config().max_client_conn)) {
        client->refuse_over_client_limit();
    }
}

void Worker::on_accept_out_of_descriptors(const std::string& error) {
    stats().accept_fd_exhausted++;
    if (auto line = accept_failure_reports_.on_failure(now_ms(), error)) spdlog::error("{}", *line);
}

std::optional<DatabaseConfig> Worker::resolve_database(const std::string& name) const {
    const DatabaseConfig* entry = config().find_database(name);
    if (!entry) return std::nullopt;
    DatabaseConfig resolved = *entry;
    if (entry == (config().fallback_database ? &*config().fallback_database : nullptr)) {
        resolved.name = name;
        if (resolved.dbname.empty() || resolved.dbname == "*") resolved.dbname = name;
    }
    return resolved;
}

void Worker::open_forced_user_pools() {
    // PgBouncer's janitor: a database entry with a forced user and a min_pool_size has its pool
    // (and so its warm servers, Pool::janitor) from the start, before any client. One worker
    // opens it: min_pool_size counts the pool's servers on every worker.
    if (index_ != 0) return;
    for (const auto& db : config().databases) {
        if (db.user.empty() || db.name == "*") continue;
        if (db.min_pool_size.value_or(config().min_pool_size) <= 0) continue;
        if (pools_.count(std::make_pair(db.name, db.user)) != 0) continue;
        if (pool_control().disabled(db.name)) continue;
        auto resolved = resolve_database(db.name);
        if (resolved) (void)pool_for(*resolved, db.user);
    }
}

Pool& Worker::pool_for(const DatabaseConfig& database, const std::string& user) {
    auto key = std::make_pair(database.name, user);
    auto it = pools_.find(key);
    if (it == pools_.end()) {
        auto first = pools_.lower_bound(std::make_pair(database.name, std::string()));
        if (is_auto_database(database.name) &&
            (first == pools_.end() || first->first.first != database.name)) {
            // PgBouncer's words for the first pool of a name the "*" entry serves.
            spdlog::info("registered new auto-database: db={}", database.name);
        }
        it = pools_.emplace(key, std::make_unique<Pool>(*this, database, user)).first;
    }
    return *it->second;
}

bool Worker::is_auto_database(const std::string& database) const {
    const DatabaseConfig* entry = config().find_database(database);
    return entry && config().fallback_database && entry == &*config().fallback_database;
}

void Worker::drop_idle_auto_databases(std::uint64_t now) {
    const std::uint64_t timeout = duration_ms(config().autodb_idle_timeout);
    if (!config().fallback_database || timeout == 0 || now < next_auto_database_check_ms_) return;
    next_auto_database_check_ms_ = now + 1000;
    // An auto-database is active while one of its pools has a server (closing ones too) or a
    // multiplexed LISTEN connection (kept, with its pool, until restart), or a client points at
    // it or it is due for a hand-off. The clients are looked at only when some database has no
    // such pool, so a busy process does not walk its clients every second.
    std::map<std::string, bool> active;  // by auto-database
    for (const auto& [key, pool] : pools_) {
        if (!is_auto_database(key.first)) continue;
        const bool used = pool->server_count() > 0 || pool->listen_hub_if_any() != nullptr;
        active[key.first] = active[key.first] || used;
    }
    const bool some_idle =
        std::any_of(active.begin(), active.end(), [](const auto& entry) { return !entry.second; });
    if (some_idle) {
        std::set<const Pool*> in_use(hand_offs_.begin(), hand_offs_.end());
        for_each_client([&](Client& client) {
            if (client.pool()) in_use.insert(client.pool());
        });
        for_each_server([&](Server& server) { in_use.insert(&server.pool()); });
        for (const auto& [key, pool] : pools_) {
            if (in_use.count(pool.get()) != 0 && active.count(key.first) != 0) {
                active[key.first] = true;
            }
        }
    }
    for (auto it = auto_database_idle_since_.begin(); it != auto_database_idle_since_.end();) {
        it = active.count(it->first) != 0 ? std::next(it) : auto_database_idle_since_.erase(it);
    }
    for (const auto& [name, used] : active) {
        if (used) {
            auto_database_idle_since_.erase(name);
            continue;
        }
        const auto [since, fresh] = auto_database_idle_since_.emplace(name, now);
        if (now - since->second < timeout) continue;
        auto_database_idle_since_.erase(since);
        auto first = pools_.lower_bound(std::make_pair(name, std::string()));
        while (first != pools_.end() && first->first.first == name) {
            stats_history_.forget(first->second.get());
            first = pools_.erase(first);
        }
        // PgBouncer's words (kill_database).
        spdlog::warn("dropping database '{}' as it does not exist anymore or inactive "
                     "auto-database",
                     name);
    }
}

void Worker::register_client(Client& client) {
    registry_->clients.push_back(client);
    ++group_.clients();
}
void Worker::release_client_slot() { --group_.clients(); }
void Worker::unregister_client(Client& client) {
    registry_->clients.remove(client);
    maybe_finish_shutdown();
}
void Worker::register_server(Server& server) { registry_->servers.push_back(server); }
void Worker::unregister_server(Server& server) {
    registry_->servers.remove(server);
    maybe_finish_shutdown();
}
std::size_t Worker::client_count() const { return registry_->clients.size(); }
std::size_t Worker::server_count() const { return registry_->servers.size(); }

void Worker::for_each_client(const std::function<void(Client&)>& fn) const {
    registry_->clients.for_each(fn);
}

void Worker::for_each_server(const std::function<void(Server&)>& fn) const {
    registry_->servers.for_each(fn);
}

int Worker::cancels_in_flight_for(const Server& server) const {
    int count = 0;
    registry_->cancels.for_each([&](CancelForwarder& forwarder) {
        if (forwarder.target() == &server) ++count;
    });
    return count;
}

void Worker::for_each_cancel(const std::function<void(const CancelForwarder&)>& fn) const {
    registry_->cancels.for_each([&](CancelForwarder& forwarder) { fn(forwarder); });
}

void Worker::cancels_janitor(std::uint64_t now) {
    peer_cancels_->janitor();
    // fail() only starts closing a forwarder's stream: none is deleted during the walk.
    registry_->cancels.for_each([&](CancelForwarder& forwarder) { forwarder.janitor(now); });
}

void Worker::cancel_client(const protocol::CancelKey& key, const std::string& from) {
    auto entry = cancels().find(key);
    if (entry && entry->worker == this) entry->client->on_cancel_request(from);
}

void Worker::forward_cancel(Server& server) {
    auto* forwarder = new CancelForwarder(*this, server);
    forwarder->start();
}

void Worker::forward_cancel_to_peer(const PeerConfig& peer, const protocol::CancelKey& key) {
    peer_cancels_->forward(peer, key);
}

protocol::CancelKey Worker::add_cancel_key(Client& client) {
    return cancels().add(*this, client, config().peer_id);
}

void Worker::remove_cancel_key(const protocol::CancelKey& key) { cancels().remove(key); }

void Worker::cancel_key_holder(const protocol::CancelKey& key, const std::string& from) {
    auto entry = cancels().find(key);
    if (!entry) return;
    if (entry->worker == this) {
        entry->client->on_cancel_request(from);  // found on this loop: no second lookup
        return;
    }
    // The client is another worker's: only its loop may touch it (and it may be gone by then:
    // cancel_client looks the key up again).
    Worker* owner = entry->worker;
    (void)owner->post([owner, key, from]() { owner->cancel_client(key, from); });
}

void Worker::register_cancel(CancelForwarder& forwarder) {
    registry_->cancels.push_back(forwarder);
}
void Worker::unregister_cancel(CancelForwarder& forwarder) {
    registry_->cancels.remove(forwarder);
    maybe_finish_shutdown();
}
void Worker::forget_cancel_target(Server& server) {
    registry_->cancels.for_each([&](CancelForwarder& forwarder) {
        if (forwarder.target() == &server) forwarder.forget_target();
    });
}

// ---------------------------------------------------------------------------------------------
// Periodic work

void Worker::schedule_hand_offs(Pool& pool) {
    hand_offs_.push_back(&pool);
    if (hand_offs_.size() == 1) {
        uv_check_start(&hand_off_check_, on_hand_off_check);
        uv_idle_start(&hand_off_idle_, on_hand_off_idle);
    }
}

void Worker::on_hand_off_check(uv_check_t* check) {
    static_cast<Worker*>(check->data)->run_hand_offs();
}

void Worker::on_hand_off_idle(uv_idle_t* idle) {
    static_cast<Worker*>(idle->data)->run_hand_offs();
}

void Worker::run_hand_offs() {
    // A hand-off may schedule another (a client that fails at once releases its server): those
    // are served in this pass too. Each round hands out at least one server or empties a queue.
    while (!hand_offs_.empty()) {
        std::vector<Pool*> pools;
        pools.swap(hand_offs_);
        for (Pool* pool : pools) pool->serve_waiting_clients();
    }
    uv_check_stop(&hand_off_check_);
    uv_idle_stop(&hand_off_idle_);
}

void Worker::on_janitor(uv_timer_t* timer) { static_cast<Worker*>(timer->data)->janitor(); }

// The tick (every janitor::kIntervalMs; proxy/pool/janitor.hpp lists what it checks): shutdown
// progress, then every client's, pool's, auth lookup's, cancel's and lock catalog's checks.
void Worker::janitor() {
    std::uint64_t now = now_ms();
    // The process's clients, not this worker's: worker 0 keeps the Unix socket open for the
    // console, and every worker's /readyz keeps saying it is draining, until the last client of
    // every worker has left (workers = N).
    if (draining() && group_.clients() == 0) {
        // The last client has left: close the servers and everything else, then stop.
        spdlog::info("shutting down: all clients have disconnected");
        shutdown_mode_ = ShutdownMode::Graceful;
        shutdown_deadline_ms_ = now + janitor::kShutdownGraceMs;
        close_everything();
    }
    // SHUTDOWN WAIT_FOR_CLIENTS serves its clients as usual until the last one has left. The
    // clients closed by a shutdown are told in PgBouncer's words, "server shutting down".
    const bool closing_clients = shutting_down();
    // WAIT_FOR_SERVERS, as PgBouncer: a client between transactions stays until it asks for a
    // server (then it is closed: Client's request path) or until no server is in use any more.
    const bool for_servers = waiting_for_servers();
    bool servers_in_use = false;
    for_each_client([&](Client& client) {
        if (for_servers && client.state() == Client::State::Waiting) {
            client.fail(protocol::sqlstate::kAdminShutdown, "server shutting down");
            return;
        }
        if (closing_clients &&
            ((client.state() == Client::State::Idle && !for_servers) ||
             client.state() == Client::State::Startup ||
             client.state() == Client::State::AuthLookup ||
             client.state() == Client::State::Auth)) {
            client.fail(protocol::sqlstate::kAdminShutdown, "server shutting down");
            return;
        }
        if (client.state() == Client::State::Active) servers_in_use = true;
        client.janitor(now);
    });
    if (for_servers && !servers_in_use) {
        for_each_client([&](Client& client) {
            if (client.state() != Client::State::Closing) {
                client.fail(protocol::sqlstate::kAdminShutdown, "server shutting down");
            }
        });
    }
    if (!shutting_down_) open_forced_user_pools();
    for (auto& [key, pool] : pools_) pool->janitor(now);
    drop_idle_auto_databases(now);
    auth_lookups_->janitor(now);
    cancels_janitor(now);
    lock_catalog_->tick(now);
    control_->tick();
    if (closing_clients) {
        if (shutdown_deadline_ms_ != 0 && now >= shutdown_deadline_ms_) {
            for_each_client([&](Client& client) {
                client.fail(protocol::sqlstate::kAdminShutdown, "server shutting down");
            });
        }
        for (auto& [key, pool] : pools_) pool->close_all_servers("shutting down");
        maybe_finish_shutdown();
    }
}

void Worker::on_stats_timer(uv_timer_t* timer) {
    static_cast<Worker*>(timer->data)->stats_tick();
}

void Worker::stats_tick() {
    std::map<const Pool*, PoolStats> current;
    PoolStats totals;
    for (auto& [key, pool] : pools_) {
        current.emplace(pool.get(), pool->stats());
        totals += pool->stats();
    }
    stats_history_.tick(current, now_us());
    if (config().log_stats) log_stats(stats_history_.averages([](const Pool&) { return true; }));
    logged_totals_ = totals;
}

void Worker::log_stats(const StatsAverages& avg) {
    // PgBouncer 1.18's line (src/stats.c), averaged over the stats_period that just ended.
    // With several workers each logs its own figures, named by its index.
    const std::string who = group_.size() > 1 ? "worker " + std::to_string(index_) + ": " : "";
    spdlog::info("{}stats: {} xacts/s, {} queries/s, in {} B/s, out {} B/s, xact {} us, query {} "
                 "us, wait {} us",
                 who, avg.xact_count, avg.query_count, avg.bytes_received, avg.bytes_sent,
                 avg.xact_time_us, avg.query_time_us, avg.wait_time_us);
    if (config().advisory_lock_tracking == LockTracking::Off) return;
    PoolStats totals;
    for (auto& [key, pool] : pools_) totals += pool->stats();
    std::size_t tethered = 0;
    registry_->clients.for_each([&](Client& client) { tethered += client.tethered() ? 1 : 0; });
    const PoolStats& before = logged_totals_;
    spdlog::info("{}tether: {} tethered clients; in the last period {} tethered, {} untethered, {} "
                 "probes, {} scrubs ({} failed), {} leaks found, {} times tether_reserve_size "
                 "exhausted",
                 who, tethered, totals.tether_events - before.tether_events,
                 totals.untether_events - before.untether_events, totals.probes - before.probes,
                 totals.scrubs - before.scrubs, totals.scrub_failures - before.scrub_failures,
                 totals.leaks_found - before.leaks_found,
                 totals.tether_reserve_exhausted - before.tether_reserve_exhausted);
}

// ---------------------------------------------------------------------------------------------
// Reload and shutdown

void Worker::apply_config(std::shared_ptr<const Config> config,
                          std::shared_ptr<const AuthFile> auth_file,
                          std::shared_ptr<const SecuritySetup> security) {
    if (!security) security = load_security(*config);
    // Server connections made with other TLS settings are replaced (PgBouncer does the same):
    // otherwise an old, maybe weaker, setting would live on in the pool indefinitely.
    const bool server_tls_changed = server_tls_settings_differ(this->config(), *config);
    if (config->tcp_defer_accept != this->config().tcp_defer_accept) {
        // PgBouncer applies it again at a reload too (set_defer_accept). A socket other workers
        // share is the same socket: setting it twice is harmless.
        for (auto& listener : listeners_) listener->set_defer_accept(config->tcp_defer_accept);
    }
    const std::shared_ptr<const AuthFile> old_auth_file = auth_file_ptr();
    set_config(std::move(config), std::move(security));
    set_tcp_options(tcp_options_of(this->config()));
    set_auth_file(std::move(auth_file));
    lock_catalog_->apply_config();
    if (!stopped_) restart_stats_timer();
    // No auth_user connection made with the old settings serves another lookup.
    auth_lookups_->on_reload();
    for (auto& [key, pool] : pools_) {
        auto resolved = resolve_database(key.first);
        if (!resolved) {
            // The database is gone from the config: finish what runs, then close its servers.
            pool->close_all_servers("database removed from configuration");
            continue;
        }
        const auto& old = pool->database();
        bool target_changed = old.host != resolved->host || old.port != resolved->port ||
                              old.ports != resolved->ports || old.dbname != resolved->dbname ||
                              old.user != resolved->user || old.password != resolved->password ||
                              old.target_session_attrs != resolved->target_session_attrs;
        // The user's secret in auth_file, which the pool's logins use when the database entry
        // names no password.
        const std::string& user = key.second;  // clang before 16 captures no structured binding
        auto secret_of = [&](const AuthFile* file) -> std::optional<std::string> {
            if (!file) return std::nullopt;
            auto it = file->find(user);
            if (it == file->end()) return std::nullopt;
            return std::to_string(static_cast<int>(it->second.kind)) + ":" + it->second.secret;
        };
        const bool credentials_changed =
            secret_of(old_auth_file.get()) != secret_of(auth_file_ptr().get());
        const bool connect_query_changed = old.connect_query != resolved->connect_query;
        pool->apply_config(*resolved);
        // PgBouncer's words for a server whose settings went out of date: "obsolete connection".
        if (target_changed) {
            pool->close_all_servers("obsolete connection (connection settings changed)");
        } else if (server_tls_changed) {
            pool->close_all_servers("obsolete connection (server TLS settings changed)");
        }
        if (target_changed || server_tls_changed || credentials_changed || connect_query_changed) {
            pool->on_login_settings_changed();
        }
    }
}

void Worker::begin_shutdown(ShutdownMode mode) {
    if (mode == ShutdownMode::Immediate && !shutting_down_) {
        shutting_down_ = true;
        shutdown_mode_ = ShutdownMode::Graceful;
        shutdown_deadline_ms_ = now_ms();
        close_everything();
        janitor();
        return;
    }
    if (shutting_down_) {
        // A second signal or command: stop waiting (PgBouncer: an immediate shutdown).
        if (shutdown_mode_ == ShutdownMode::WaitForClients) close_everything();
        shutdown_mode_ = ShutdownMode::Graceful;
        shutdown_deadline_ms_ = now_ms();
        janitor();
        return;
    }
    shutting_down_ = true;
    shutdown_mode_ = mode;
    if (mode == ShutdownMode::WaitForClients) {
        // Stop accepting on TCP, without resetting the connections the kernel has queued; the
        // Unix socket stays open for the admin console. Clients keep their sessions, pools keep
        // serving them; the process exits when the last client has left.
        spdlog::info("shutting down: no new connections; waiting for {} clients to disconnect",
                     client_count());
        for (auto& listener : listeners_) {
            if (listener->is_tcp()) listener->drain_and_close();
        }
        return;
    }
    if (mode == ShutdownMode::WaitForServers) {
        shutdown_deadline_ms_ = 0;  // no bound: as long as the transactions take
        spdlog::info("shutting down: no new connections; waiting for transactions to finish");
    } else {
        shutdown_deadline_ms_ = now_ms() + janitor::kShutdownGraceMs;
        spdlog::info("shutting down: no new connections; waiting up to {} s for transactions",
                     janitor::kShutdownGraceMs / 1000);
    }
    close_everything();
    // WAIT_FOR_SERVERS leaves its clients to the janitor's next round (within 100 ms), as
    // PgBouncer's janitor does: the command itself closes nobody.
    if (mode != ShutdownMode::WaitForServers) janitor();
}

void Worker::close_everything() {
    lock_catalog_->shutdown();
    for (auto& listener : listeners_) listener->close();
    auth_lookups_->close_all();
    peer_cancels_->clear();
}

void Worker::close_for_exit() {
    close_everything();
    if (metrics_) metrics_->close();
    for (auto* handle : {reinterpret_cast<uv_handle_t*>(&janitor_timer_),
                         reinterpret_cast<uv_handle_t*>(&stats_timer_),
                         reinterpret_cast<uv_handle_t*>(&hand_off_check_),
                         reinterpret_cast<uv_handle_t*>(&hand_off_idle_)}) {
        if (!uv_is_closing(handle)) uv_close(handle, nullptr);
    }
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&mailbox_async_))) close_mailbox();
    // And whatever else is on this loop: main's signal watchers on worker 0's (their owner
    // outlives the workers).
    uv_walk(
        loop(),
        [](uv_handle_t* handle, void*) {
            if (!uv_is_closing(handle)) uv_close(handle, nullptr);
        },
        nullptr);
    // Bounded: a handle that somehow stays open leaves the loop unfreed (uv_loop_close says
    // EBUSY), never a hang at exit.
    for (int round = 0; round < 16 && uv_loop_alive(loop()); ++round) {
        uv_run(loop(), UV_RUN_NOWAIT);
    }
    stopped_ = true;
}

void Worker::close_metrics_endpoint() {
    if (metrics_) metrics_->close();
}

void Worker::maybe_finish_shutdown() {
    // While draining, the janitor notices the last client's departure (not this call, which
    // may come from inside a client's destructor) and then shuts down as usual.
    if (!shutting_down() || stopped_ || !registry_->clients.empty() ||
        !registry_->servers.empty() || !registry_->cancels.empty()) {
        return;
    }
    stopped_ = true;
    spdlog::info("shutdown complete");
    // The metrics endpoint stays open (/readyz 503, /healthz 200) until every worker has
    // stopped: with several workers, worker 0 may finish long before another worker's last
    // transaction. main closes it then (close_metrics_endpoint).
    // The pools' listening connections would keep the loop running.
    for (auto& [key, pool] : pools_) pool->stop_listening();
    uv_close(reinterpret_cast<uv_handle_t*>(&janitor_timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&stats_timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&hand_off_check_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&hand_off_idle_), nullptr);
    close_mailbox();
    if (on_stopped_) on_stopped_();
}

}  // namespace pgtether
