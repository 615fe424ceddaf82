#include "proxy/admin/metrics.hpp"


#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>
#include <vector>

#include "core/host_choice.hpp"
#include "core/metrics_merge.hpp"
#include "core/state_probe.hpp"

#include "proxy/admin/admin_context.hpp"
#include "proxy/client/client.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/pool/listen_hub.hpp"
#include "proxy/pool/lock_catalog.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_census.hpp"
#include "proxy/pool/pool_control.hpp"

namespace pgtether {

namespace {

struct PoolRow {
    const Pool* pool;
    Labels labels;
    const PoolCensus* census;
    PoolStats stats;
};

}  // namespace

namespace {

// Descriptors the process has open (/proc/self/fd, less the one the listing itself holds), and
// its soft RLIMIT_NOFILE: what accept() runs into. 0 where they cannot be read.
std::uint64_t open_fds() {
    std::error_code error;
    std::uint64_t count = 0;
    for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
         it.increment(error))
        ++count;
    return error || count == 0 ? 0 : count - 1;
}

std::uint64_t max_fds() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
    return static_cast<std::uint64_t>(limit.rlim_cur);
}

// One worker's clients, servers, pools and counters.
std::string collect_worker_metrics(AdminContext& worker, MetricsFormat format) {
    auto census = take_census(worker);
    std::vector<PoolRow> rows;
    for (const auto& [key, pool] : worker.pools()) {
        rows.push_back({pool.get(),
                        {{"database", key.first}, {"user", key.second}},
                        &census[pool.get()],
                        pool->stats()});
    }
    MetricsWriter w(format);

    w.family("pgtether_info", "gauge", "pgtether's version");
    w.sample({{"version", PGTETHER_VERSION}}, std::uint64_t{1});

    std::size_t clients = 0;
    std::size_t admin_clients = 0;
    worker.for_each_client([&](Client& client) {
        ++clients;
        if (client.is_admin()) ++admin_clients;
    });
    w.family("pgtether_client_connections", "gauge",
             "Client connections open, in any state, admin console included");
    w.sample({}, static_cast<std::uint64_t>(clients));
    w.family("pgtether_admin_connections", "gauge", "Clients of the admin console");
    w.sample({}, static_cast<std::uint64_t>(admin_clients));
    w.family("pgtether_server_connections", "gauge", "Server connections open, in any state");
    w.sample({}, static_cast<std::uint64_t>(worker.server_count()));
    w.family("pgtether_paused", "gauge", "1 while PAUSE (without a database) is in effect");
    w.sample({}, std::uint64_t{worker.pool_control().paused_all() ? 1u : 0u});
    // Limits, so that alerts can be ratios (docker/prometheus/pgtether-alerts.yaml).
    w.family("pgtether_max_client_conn", "gauge",
             "max_client_conn: client connections the process accepts");
    w.sample({}, static_cast<std::uint64_t>(std::max(0, worker.config().max_client_conn)));
    w.family("pgtether_process_open_fds", "gauge", "File descriptors the process has open");
    w.sample({}, open_fds());
    w.family("pgtether_process_max_fds", "gauge",
             "The process's file descriptor limit (soft RLIMIT_NOFILE, raised to the hard limit "
             "at start-up)");
    w.sample({}, max_fds());

    auto per_pool_gauge = [&](const char* name, const char* help,
                              const std::function<std::uint64_t(const PoolRow&)>& value) {
        w.family(name, "gauge", help);
        for (const auto& row : rows)
            w.sample(row.labels, value(row));
    };
    auto per_pool_counter = [&](const char* name, const char* help,
                                const std::function<std::uint64_t(const PoolRow&)>& value) {
        w.family(name, "counter", help);
        for (const auto& row : rows)
            w.sample(row.labels, value(row));
    };
    auto with_state = [](Labels labels, const char* state) {
        labels.emplace_back("state", state);
        return labels;
    };

    w.family("pgtether_pool_clients", "gauge",
             "Clients of a pool by state: active (has a server), idle (logged in, no server), "
             "waiting (for a server)");
    for (const auto& row : rows) {
        const auto& c = *row.census;
        w.sample(with_state(row.labels, "active"), static_cast<std::uint64_t>(c.cl_linked));
        w.sample(with_state(row.labels, "idle"), static_cast<std::uint64_t>(c.cl_idle));
        w.sample(with_state(row.labels, "waiting"), static_cast<std::uint64_t>(c.cl_waiting));
    }
    w.family("pgtether_pool_servers", "gauge",
             "Server connections of a pool by state (SHOW SERVERS' states)");
    for (const auto& row : rows) {
        const auto& c = *row.census;
        const std::pair<const char*, int> states[] = {
            {"active", c.sv_active}, {"idle", c.sv_idle},   {"used", c.sv_used},
            {"tested", c.sv_tested}, {"login", c.sv_login}, {"being_canceled", c.sv_being_canceled},
        };
        for (const auto& [state, n] : states) {
            w.sample(with_state(row.labels, state), static_cast<std::uint64_t>(n));
        }
    }
    per_pool_gauge(
        "pgtether_pool_tethered_clients",
        "Clients tethered to their server by session state (advisory locks, temporary tables, ...)",
        [](const PoolRow& r) { return static_cast<std::uint64_t>(r.census->cl_tethered); });
    w.family("pgtether_pool_tethered_clients_by_reason", "gauge",
             "Tethered clients of a pool by the kind of session state that holds them "
             "(docs/session-state.md); a client held for two reasons counts in both");
    for (const auto& row : rows) {
        for (const auto& [kind, n] : row.census->tethered_by_kind) {
            Labels labels = row.labels;
            labels.emplace_back("reason", state_kind_label(kind));
            w.sample(labels, static_cast<std::uint64_t>(n));
        }
    }
    per_pool_gauge(
        "pgtether_pool_held_advisory_locks",
        "Session advisory locks held by the pool's tethered clients",
        [](const PoolRow& r) { return static_cast<std::uint64_t>(r.census->held_locks); });
    w.family("pgtether_pool_max_wait_seconds", "gauge",
             "How long the oldest waiting client of the pool has waited");
    for (const auto& row : rows)
        w.sample_seconds(row.labels, row.census->maxwait_us);
    per_pool_gauge("pgtether_pool_paused", "1 while the pool's database is paused or killed",
                   [](const PoolRow& r) { return r.pool->paused() ? 1u : 0u; });
    const auto size = [](int n) { return static_cast<std::uint64_t>(std::max(0, n)); };
    per_pool_gauge("pgtether_pool_size",
                   "pool_size: servers the pool keeps for its clients (for the process as a whole)",
                   [&](const PoolRow& r) { return size(r.pool->sizes().pool_size); });
    per_pool_gauge("pgtether_pool_reserve_size",
                   "reserve_pool_size: servers the pool may add for clients that waited "
                   "reserve_pool_timeout",
                   [&](const PoolRow& r) { return size(r.pool->sizes().reserve_pool_size); });
    per_pool_gauge("pgtether_pool_tether_reserve_size",
                   "tether_reserve_size as resolved: servers the pool may add for tethered clients",
                   [&](const PoolRow& r) { return size(r.pool->sizes().tether_reserve_size); });

    // Each host of each pool's [databases] host list, as SHOW HOSTS shows it (what this worker's
    // pool saw at its logins there; with workers = N the largest of the workers' values).
    struct HostRow {
        Labels labels;
        const HostStatus* status;
    };
    std::vector<HostRow> host_rows;
    for (const auto& row : rows) {
        const auto& db = row.pool->database();
        const auto& hosts = row.pool->hosts();
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            Labels labels = row.labels;
            labels.emplace_back("host", host_for_turn(db, i));
            labels.emplace_back("port", std::to_string(port_for_host(db, i)));
            host_rows.push_back({std::move(labels), &hosts[i]});
        }
    }
    const std::uint64_t now = worker.now_ms();
    w.family("pgtether_host_up", "gauge",
             "1 while the host is neither backing off nor untried (SHOW HOSTS' state up)");
    for (const auto& h : host_rows) {
        w.sample(h.labels, std::uint64_t{host_state_name(*h.status, now) == "up" ? 1u : 0u});
    }
    w.family("pgtether_host_role", "gauge",
             "1 for the role the host had at the last login there: primary, primary (read-only), "
             "standby or unknown");
    for (const auto& h : host_rows) {
        Labels labels = h.labels;
        labels.emplace_back("role", host_role_name(*h.status));
        w.sample(labels, std::uint64_t{1});
    }
    w.family("pgtether_host_backoff_seconds", "gauge",
             "How long the host is still skipped (server_host_backoff after a failure or the "
             "wrong role)");
    for (const auto& h : host_rows) {
        const std::uint64_t until = h.status->backoff_until_ms;
        w.sample_seconds(h.labels, until > now ? (until - now) * 1000 : 0);
    }
    w.family("pgtether_host_failures", "gauge",
             "Logins on the host that failed or reached the wrong role, in a row");
    for (const auto& h : host_rows) {
        w.sample(h.labels, static_cast<std::uint64_t>(std::max(0, h.status->failures)));
    }

    per_pool_counter("pgtether_transactions", "Transactions pooled",
                     [](const PoolRow& r) { return r.stats.xact_count; });
    per_pool_counter("pgtether_queries", "Queries pooled (ReadyForQuery messages)",
                     [](const PoolRow& r) { return r.stats.query_count; });
    per_pool_counter("pgtether_received_bytes", "Bytes received from clients",
                     [](const PoolRow& r) { return r.stats.bytes_received; });
    per_pool_counter("pgtether_sent_bytes", "Bytes sent to clients",
                     [](const PoolRow& r) { return r.stats.bytes_sent; });

    // Histograms with fixed buckets (core/stats.hpp kLatencyBucketBoundsUs): unlike a
    // summary's sum and count, buckets add up across pools and instances, so quantiles and
    // "share of queries under 10 ms" can be computed for any aggregation.
    const std::vector<std::uint64_t> bounds(kLatencyBucketBoundsUs.begin(),
                                            kLatencyBucketBoundsUs.end());
    auto histogram = [&](const char* name, const char* help,
                         const std::function<const LatencyHistogram&(const PoolRow&)>& of) {
        w.family(name, "histogram", help);
        for (const auto& row : rows) {
            const LatencyHistogram& h = of(row);
            std::vector<std::uint64_t> cumulative;
            for (std::size_t i = 0; i < h.counts.size(); ++i) cumulative.push_back(h.cumulative(i));
            w.histogram(row.labels, bounds, cumulative, h.sum_us);
        }
    };
    histogram("pgtether_query_duration_seconds",
              "Time queries spent on a server (a request to a quiet backend until it is quiet "
              "again)",
              [](const PoolRow& r) -> const LatencyHistogram& { return r.stats.query_times; });
    histogram("pgtether_transaction_duration_seconds", "Time transactions held a server",
              [](const PoolRow& r) -> const LatencyHistogram& { return r.stats.xact_times; });
    histogram("pgtether_client_wait_seconds", "Time clients waited for a server",
              [](const PoolRow& r) -> const LatencyHistogram& { return r.stats.wait_times; });

    // LISTEN multiplexed (docs/session-state.md).
    const auto hub_value = [](const PoolRow& r, auto value) -> std::uint64_t {
        const ListenHub* hub = r.pool->listen_hub_if_any();
        return hub ? static_cast<std::uint64_t>(value(*hub)) : 0;
    };
    per_pool_gauge("pgtether_listen_channels",
                   "Channels the pool's clients listen on through its listening connection (listened on, or about to be)",
                   [&](const PoolRow& r) {
                       return hub_value(r, [](const ListenHub& h) { return h.channels().size(); });
                   });
    per_pool_gauge("pgtether_listen_subscriptions",
                   "Client-channel pairs listening through the pool's listening connection",
                   [&](const PoolRow& r) {
                       return hub_value(r, [](const ListenHub& h) {
                           std::uint64_t n = 0;
                           for (const auto& c : h.channels()) n += static_cast<std::uint64_t>(c.listeners);
                           return n;
                       });
                   });
    per_pool_counter("pgtether_notifications_delivered",
                     "Notifications handed to listening clients (one per client and notification)",
                     [&](const PoolRow& r) {
                         return hub_value(r, [](const ListenHub& h) { return h.delivered(); });
                     });
    per_pool_counter("pgtether_notifications_dropped",
                     "Notifications not delivered: the client was past its listen_client_buffer",
                     [&](const PoolRow& r) {
                         return hub_value(r, [](const ListenHub& h) { return h.dropped(); });
                     });
    per_pool_counter("pgtether_listen_reconnects",
                     "Times the pool's listening connection failed and was opened again",
                     [&](const PoolRow& r) {
                         return hub_value(r, [](const ListenHub& h) { return h.reconnects(); });
                     });
    per_pool_counter("pgtether_tethers", "Clients that became tethered",
                     [](const PoolRow& r) { return r.stats.tether_events; });
    per_pool_counter("pgtether_untethers", "Tethered clients that released their last lock",
                     [](const PoolRow& r) { return r.stats.untether_events; });
    per_pool_counter("pgtether_lock_probes", "pg_locks probes at transaction ends",
                     [](const PoolRow& r) { return r.stats.probes; });
    per_pool_counter("pgtether_lock_ledger_decisions",
                     "Lock-relevant transaction ends decided by exact accounting, without a probe",
                     [](const PoolRow& r) { return r.stats.ledger_decisions; });
    per_pool_counter("pgtether_scrubs", "Backends cleaned after a tethered or dirty client left",
                     [](const PoolRow& r) { return r.stats.scrubs; });
    per_pool_counter("pgtether_scrub_failures", "Backends closed because cleaning failed",
                     [](const PoolRow& r) { return r.stats.scrub_failures; });
    per_pool_counter("pgtether_leaks_found",
                     "Idle pooled backends the leak sweep found holding advisory locks",
                     [](const PoolRow& r) { return r.stats.leaks_found; });
    per_pool_counter("pgtether_tether_reserve_exhausted",
                     "Times clients waited because more clients were tethered than "
                     "tether_reserve_size covers",
                     [](const PoolRow& r) { return r.stats.tether_reserve_exhausted; });

    // The tether's trigger per database (proxy/pool/lock_catalog.hpp).
    const auto& lock_databases = worker.lock_catalog().databases();
    auto per_database = [&](const char* name, const char* type, const char* help,
                            const std::function<std::uint64_t(const LockCatalog::Database&)>& value) {
        w.family(name, type, help);
        for (const auto& [database, db] : lock_databases)
            w.sample({{"database", database}}, value(*db));
    };
    const auto known = [](const LockCatalog::Database& db) {
        return static_cast<std::uint64_t>(
            std::count_if(db.names.begin(), db.names.end(),
                          [](const LockName& n) { return n.source != LockNameSource::Unknown; }));
    };
    const std::uint64_t fixed_names =
        builtin_lock_functions().size() + worker.lock_catalog().configured().size();
    per_database("pgtether_lock_functions", "gauge",
                 "Names the tether's trigger matches in the database: built-in, configured and "
                 "discovered lock functions, tables whose triggers lock, views that call them",
                 [&](const LockCatalog::Database& db) { return fixed_names + known(db); });
    per_database("pgtether_lock_functions_unknown", "gauge",
                 "Functions whose bodies discovery cannot read (C, internal, other languages)",
                 [&](const LockCatalog::Database& db) { return db.names.size() - known(db); });
    per_database("pgtether_lock_discovery_runs", "counter",
                 "Lock-function discovery runs finished, failed ones included",
                 [](const LockCatalog::Database& db) { return db.runs; });
    per_database("pgtether_lock_discovery_failures", "counter",
                 "Lock-function discovery runs that failed",
                 [](const LockCatalog::Database& db) { return db.failures; });

    auto& ws = worker.stats();
    w.family("pgtether_client_connections_accepted", "counter", "Client connections accepted");
    w.sample({}, ws.clients_accepted);
    w.family("pgtether_client_connections_refused", "counter",
             "Client connections refused by max_client_conn");
    w.sample({}, ws.clients_refused);
    w.family("pgtether_accept_fd_exhausted", "counter",
             "Times accept() failed for want of file descriptors (EMFILE/ENFILE), on a client "
             "listener or the metrics endpoint; it paused for 100 ms each time, the connections "
             "stayed queued");
    w.sample({}, ws.accept_fd_exhausted);
    w.family("pgtether_server_connections_opened", "counter", "Server connections opened");
    w.sample({}, ws.servers_opened);
    w.family("pgtether_server_login_failures", "counter", "Server logins that failed");
    w.sample({}, ws.login_failures);
    w.family("pgtether_admin_commands", "counter", "Commands run on the admin console");
    w.sample({}, ws.admin_queries);
    return w.finish();
}

}  // namespace

std::string collect_metrics(AdminContext& worker, MetricsFormat format) {
    if (worker.worker_count() == 1) return collect_worker_metrics(worker, format);
    // Every worker writes its own on its own thread; the samples are summed
    // (core/metrics_merge.hpp).
    std::vector<std::string> texts(worker.worker_count());
    worker.gather_all_workers(
        [&](AdminContext& each) { texts.at(each.index()) = collect_worker_metrics(each, format); });
    return merge_metrics_texts(texts);
}

}  // namespace pgtether
