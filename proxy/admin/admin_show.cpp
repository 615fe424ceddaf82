#include "proxy/admin/admin_show.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/client_limits.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/statement_redaction.hpp"
#include "proxy/admin/admin_context.hpp"
#include "proxy/admin/version.hpp"
#include "proxy/client/client.hpp"
#include "proxy/net/listener.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/net/tls.hpp"
#include "proxy/pool/listen_hub.hpp"
#include "proxy/pool/lock_catalog.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_census.hpp"
#include "proxy/pool/pool_control.hpp"
#include "proxy/server/cancel_forwarder.hpp"
#include "proxy/server/peer_cancels.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

namespace {

using Value = std::optional<std::string>;
using Row = std::vector<Value>;

// Type OIDs PgBouncer 1.18 uses: 's' text, 'i' int4, 'q' int8, 'n' numeric (SHOW STATS).
constexpr std::uint32_t kText = 25;
constexpr std::uint32_t kInt4 = 23;
constexpr std::uint32_t kInt8 = 20;
constexpr std::uint32_t kNumeric = 1700;
constexpr std::uint32_t kBytea = 17;

// The admin console's pseudo-pool, as PgBouncer shows it.
constexpr int kAdminPoolSize = 2;
constexpr const char* kAdminPoolMode = "statement";

Value text(std::string s) {
    return Value(std::move(s));
}
Value number(std::int64_t n) {
    return Value(std::to_string(n));
}
Value unsigned_number(std::uint64_t n) {
    return Value(std::to_string(n));
}
const Value kNull = std::nullopt;

class ResultSet {
  public:
    ResultSet(ShowTable& out, std::vector<protocol::ColumnDescription> columns)
        : out_(out), width_(columns.size()) {
        out_.columns = std::move(columns);
    }
    void row(const Row& values) {
        // A row always has as many values as the header has columns.
        Row padded = values;
        padded.resize(width_);
        out_.rows.push_back(std::move(padded));
    }

  private:
    ShowTable& out_;
    std::size_t width_;
};

// Converting the loop's millisecond clock to wall-clock text, "2026-11-30 07:27:12 UTC" like
// PgBouncer 1.18.
class Clock {
  public:
    explicit Clock(AdminContext& worker)
        : loop_now_ms_(worker.now_ms()),
          wall_now_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()) {}

    [[nodiscard]] std::string format(std::uint64_t loop_ms) const {
        std::int64_t wall_ms = wall_now_ms_ - static_cast<std::int64_t>(
                                                  loop_now_ms_ - std::min(loop_ms, loop_now_ms_));
        std::time_t seconds = static_cast<std::time_t>(wall_ms / 1000);
        std::tm tm{};
        localtime_r(&seconds, &tm);
        char buf[64];
        std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm);
        return buf;
    }
    [[nodiscard]] std::uint64_t now_ms() const { return loop_now_ms_; }

  private:
    std::uint64_t loop_now_ms_;
    std::int64_t wall_now_ms_;
};

struct Endpoint {
    std::string addr = "unix";
    int port = 0;
};

Endpoint endpoint_of(const sockaddr_storage& ss) {
    Endpoint e;
    char host[INET6_ADDRSTRLEN] = "";
    if (ss.ss_family == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
        uv_ip4_name(sin, host, sizeof host);
        e.addr = host;
        e.port = ntohs(sin->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
        uv_ip6_name(sin6, host, sizeof host);
        e.addr = host;
        e.port = ntohs(sin6->sin6_port);
    }
    return e;
}

// The two ends of a socket. A Unix socket shows as "unix" with the listen port, like PgBouncer.
std::pair<Endpoint, Endpoint> endpoints(Stream& stream, int unix_port) {
    Endpoint remote;
    Endpoint local;
    remote.port = local.port = unix_port;
    if (stream.is_tcp() && !stream.closing()) {
        auto* tcp = reinterpret_cast<uv_tcp_t*>(stream.handle());
        sockaddr_storage ss{};
        int len = sizeof ss;
        if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
            remote = endpoint_of(ss);
        }
        len = sizeof ss;
        if (uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
            local = endpoint_of(ss);
        }
    }
    return {remote, local};
}

// The process id of a Unix-socket peer (SO_PEERCRED), as PgBouncer's remote_pid; 0 otherwise.
int unix_peer_pid(Stream& stream) {
    if (stream.closing()) return 0;
    auto credentials = stream.peer_credentials();
    return credentials ? credentials->pid : 0;
}

// The `tls` column: version, cipher and key-exchange group of an established TLS session, as
// PgBouncer shows them; empty without TLS.
std::string tls_info(Stream& stream) {
    const TlsSession* tls = stream.tls();
    return tls ? tls->connection_info() : std::string();
}

std::string pointer_text(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

const char* pool_mode_text(PoolMode mode) {
    return to_string(mode);
}

// "42 exclusive, 7 shared" for the bigint-keyed locks; "1/2 shared" for the two-int4 ones.
std::pair<std::string, std::string> lock_lists(const std::vector<AdvisoryLockKey>& keys) {
    std::string bigint;
    std::string pairs;
    for (const auto& key : keys) {
        std::string& list = key.is_bigint ? bigint : pairs;
        if (!list.empty()) list += ", ";
        if (key.is_bigint) {
            list += std::to_string(key.bigint_key());
        } else {
            list += std::to_string(static_cast<std::int32_t>(key.classid)) + "/" +
                    std::to_string(static_cast<std::int32_t>(key.objid));
        }
        list += key.exclusive ? " exclusive" : " shared";
    }
    return {bigint, pairs};
}

// The load_balance_hosts column of SHOW POOLS and SHOW DATABASES: only for a host list, as
// PgBouncer shows it.
Value load_balance_hosts_of(const DatabaseConfig& db) {
    return db.host.find(',') != std::string::npos ? text(db.load_balance_hosts) : kNull;
}

std::vector<protocol::ColumnDescription> socket_columns() {
    // PgBouncer 1.24's SHOW CLIENTS / SHOW SERVERS / SHOW SOCKETS header (socket_header).
    return {{"type", kText},         {"user", kText},
            {"database", kText},     {"replication", kText},
            {"state", kText},        {"addr", kText},
            {"port", kInt4},         {"local_addr", kText},
            {"local_port", kInt4},   {"connect_time", kText},
            {"request_time", kText}, {"wait", kInt4},
            {"wait_us", kInt4},      {"close_needed", kInt4},
            {"ptr", kText},          {"link", kText},
            {"remote_pid", kInt4},   {"tls", kText},
            {"application_name", kText}, {"prepared_statements", kInt4},
            {"id", kInt8}};
}

// ---------------------------------------------------------------------------------------------

// PgBouncer's 21 socket columns of a client in `state` ("active", "cl_login", ...).
Row client_socket_row(const Clock& clock, Client& client, const char* state, int listen_port) {
    auto [remote, local] = endpoints(client.stream(), listen_port);
    std::uint64_t wait_us = 0;
    if (client.state() == Client::State::Waiting || client.state() == Client::State::WelcomeWait) {
        wait_us = (clock.now_ms() - client.state_since_ms()) * 1000;
    }
    auto app = client.params().get(TrackedParam::ApplicationName);
    std::uint64_t request_ms =
        client.last_activity_ms() ? client.last_activity_ms() : client.connected_at_ms();
    return {text("C"),
            text(client.user().empty() ? "(nouser)" : client.user()),
            text(client.is_admin()          ? kAdminDatabaseName
                 : client.database().empty() ? "(nodb)"
                                             : client.database()),
            text(replication_mode_name(client.replication())),
            text(state),
            text(remote.addr),
            number(remote.port),
            text(local.addr),
            number(local.port),
            text(clock.format(client.connected_at_ms())),
            text(clock.format(request_ms)),
            unsigned_number(wait_us / 1'000'000),
            unsigned_number(wait_us % 1'000'000),
            number(0),
            text(pointer_text(&client)),
            text(client.server() ? pointer_text(client.server()) : ""),
            number(unix_peer_pid(client.stream())),
            text(tls_info(client.stream())),
            text(std::string(app.value_or(""))),
            unsigned_number(client.statements().size()),
            unsigned_number(client.id())};
}

// The same for a server.
Row server_socket_row(const Clock& clock, Server& server, const char* state) {
    Endpoint remote;
    Endpoint local;
    remote.port = local.port = server.pool().database().port;
    if (!server.address_is_unix()) {
        remote = endpoint_of(server.address());
        if (server.stream().is_tcp() && !server.stream().closing() &&
            server.state() != Server::State::Connecting) {
            sockaddr_storage ss{};
            int len = sizeof ss;
            if (uv_tcp_getsockname(reinterpret_cast<uv_tcp_t*>(server.stream().handle()),
                                   reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
                local = endpoint_of(ss);
            }
        }
    }
    Client* client = server.client();
    std::optional<std::string_view> app;
    if (client) app = client->params().get(TrackedParam::ApplicationName);
    return {text("S"),
            text(server.pool().user_name()),
            text(server.pool().database_name()),
            text(replication_mode_name(server.replication())),
            text(state),
            text(remote.addr),
            number(remote.port),
            text(local.addr),
            number(local.port),
            text(clock.format(server.connected_at_ms())),
            text(clock.format(server.state_since_ms())),
            number(0),
            number(0),
            number(server.retired() ? 1 : 0),
            text(pointer_text(&server)),
            text(client ? pointer_text(client) : ""),
            number(server.backend_pid()),
            text(tls_info(server.stream())),
            text(std::string(app.value_or(""))),
            unsigned_number(server.statements().size()),
            unsigned_number(server.id())};
}

void show_clients(AdminContext& worker, ShowTable& out) {
    auto columns = socket_columns();
    // pgtether: the tether. (`id` is the one KILL_CLIENT takes.)
    columns.push_back({"tethered", kInt4});
    columns.push_back({"tethered_since", kText});
    columns.push_back({"held_locks", kText});
    columns.push_back({"tether_reasons", kText});
    ResultSet rs(out, columns);
    Clock clock(worker);
    const int listen_port = worker.config().listen_port;
    worker.for_each_client([&](Client& client) {
        const char* state = client_state_name(client);
        if (!state) return;
        Row row = client_socket_row(clock, client, state, listen_port);
        row.insert(row.end(),
                   {number(client.tethered() ? 1 : 0),
                    client.tethered() ? text(clock.format(client.tethered_since_ms())) : kNull,
                    client.tethered() ? text(client.lock_ledger().describe()) : kNull,
                    client.tethered() ? text(client.describe_tether()) : kNull});
        rs.row(row);
    });
}

void show_servers(AdminContext& worker, ShowTable& out) {
    auto columns = socket_columns();
    // pgtether: whether its client is tethered, which client, and which of pgtether's own
    // queries runs on it.
    columns.push_back({"tethered", kInt4});
    columns.push_back({"client_id", kInt8});
    columns.push_back({"internal_query", kText});
    ResultSet rs(out, columns);
    Clock clock(worker);
    worker.for_each_server([&](Server& server) {
        const char* state = server_state_name(server);
        if (!state) return;
        Client* client = server.client();
        auto purpose = server.internal_purpose();
        Row row = server_socket_row(clock, server, state);
        row.insert(row.end(), {number(client && client->tethered() ? 1 : 0),
                               client ? unsigned_number(client->id()) : kNull,
                               purpose ? text(purpose_traits(*purpose).name) : kNull});
        rs.row(row);
    });
}

// SHOW SOCKETS and SHOW ACTIVE_SOCKETS: every client and server socket (or, for ACTIVE_SOCKETS,
// those with bytes buffered either way) with PgBouncer 1.24's columns. State names get PgBouncer's
// cl_/sv_ prefixes; clients still logging in show as cl_login. Of PgBouncer's buffer columns,
// pkt_avail (input received, not yet forwarded) and send_avail (output queued) are measured;
// the others describe PgBouncer's iobuf and are 0.
void show_sockets(AdminContext& worker, ShowTable& out, bool active_only) {
    auto columns = socket_columns();
    for (const char* name :
         {"recv_pos", "pkt_pos", "pkt_remain", "send_pos", "send_remain", "pkt_avail",
          "send_avail"}) {
        columns.push_back({name, kInt4});
    }
    ResultSet rs(out, columns);
    Clock clock(worker);
    const int listen_port = worker.config().listen_port;
    auto add = [&](Row row, Stream& stream) {
        std::size_t pending_in = stream.closing() ? 0 : stream.pending_input_size();
        bool pending_out = !stream.closing() && stream.write_pending();
        if (active_only && pending_in == 0 && !pending_out) return;
        row.insert(row.end(), {number(0), number(0), number(0), number(0), number(0),
                               unsigned_number(pending_in), number(pending_out ? 1 : 0)});
        rs.row(row);
    };
    worker.for_each_client([&](Client& client) {
        if (client.state() == Client::State::Closing) return;
        const char* state = client_state_name(client);
        std::string name = state ? std::string("cl_") + state : "cl_login";
        add(client_socket_row(clock, client, name.c_str(), listen_port), client.stream());
    });
    worker.for_each_server([&](Server& server) {
        const char* state = server_state_name(server);
        if (!state) return;
        std::string name =
            std::string("sv_") + (std::string_view(state) == "new" ? "login" : state);
        add(server_socket_row(clock, server, name.c_str()), server.stream());
    });
}

// SHOW FDS: PgBouncer's online-restart hand-over list, with its columns. pgtether does not
// take over sockets (-R), so this only describes them: no descriptors are sent along, and the
// password and SCRAM key columns, which PgBouncer fills for the process taking over, stay NULL.
void show_fds(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"fd", kInt4},
                       {"task", kText},
                       {"user", kText},
                       {"database", kText},
                       {"addr", kText},
                       {"port", kInt4},
                       {"cancel", kInt8},
                       {"link", kInt4},
                       {"client_encoding", kText},
                       {"std_strings", kText},
                       {"datestyle", kText},
                       {"timezone", kText},
                       {"password", kText},
                       {"scram_client_key", kBytea},
                       {"scram_server_key", kBytea}});
    auto fd_of = [](Stream& stream) -> std::int64_t {
        uv_os_fd_t fd = -1;
        if (stream.closing() ||
            uv_fileno(reinterpret_cast<uv_handle_t*>(stream.handle()), &fd) != 0) {
            return 0;
        }
        return fd;
    };
    // One client or server: PgBouncer's cancel key is the 8 bytes as one int8.
    auto connection_row = [&](Stream& stream, const char* task, const std::string& user,
                              const std::string& database, const Endpoint& remote,
                              const protocol::CancelKey& key, Stream* link,
                              const ParamValues& params) {
        auto cancel = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(key.pid)) << 32) |
                      static_cast<std::uint32_t>(key.secret);
        auto param = [&](TrackedParam p) {
            auto v = params.get(p);
            return v ? text(std::string(*v)) : kNull;
        };
        rs.row({number(fd_of(stream)), text(task), text(user), text(database), text(remote.addr),
                number(remote.port), text(std::to_string(static_cast<std::int64_t>(cancel))),
                number(link ? fd_of(*link) : 0), param(TrackedParam::ClientEncoding),
                param(TrackedParam::StandardConformingStrings), param(TrackedParam::DateStyle),
                param(TrackedParam::TimeZone), kNull, kNull, kNull});
    };
    const int listen_port = worker.config().listen_port;
    for (const auto& listener : worker.listeners()) {
        if (listener->fd() < 0) continue;
        Endpoint local;
        local.port = listen_port;
        if (sockaddr_storage ss{}; listener->local_address(ss)) local = endpoint_of(ss);
        rs.row({number(listener->fd()), text("pooler"), kNull, kNull, text(local.addr),
                number(local.port)});
    }
    worker.for_each_client([&](Client& client) {
        if (client.state() == Client::State::Closing || client.is_admin()) return;
        auto remote = endpoints(client.stream(), listen_port).first;
        connection_row(client.stream(), "client", client.user(), client.database(), remote,
                       client.cancel_key(), client.server() ? &client.server()->stream() : nullptr,
                       client.params());
    });
    worker.for_each_server([&](Server& server) {
        if (server.state() == Server::State::Closing) return;
        Endpoint remote;
        remote.port = server.pool().database().port;
        if (!server.address_is_unix()) remote = endpoint_of(server.address());
        connection_row(server.stream(), "server", server.pool().user_name(),
                       server.pool().database_name(), remote, server.backend_key(),
                       server.client() ? &server.client()->stream() : nullptr, server.params());
    });
}

void show_pools(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"database", kText},
                       {"user", kText},
                       {"cl_active", kInt4},
                       {"cl_waiting", kInt4},
                       {"cl_active_cancel_req", kInt4},
                       {"cl_waiting_cancel_req", kInt4},
                       {"sv_active", kInt4},
                       {"sv_active_cancel", kInt4},
                       {"sv_being_canceled", kInt4},
                       {"sv_idle", kInt4},
                       {"sv_used", kInt4},
                       {"sv_tested", kInt4},
                       {"sv_login", kInt4},
                       {"maxwait", kInt4},
                       {"maxwait_us", kInt4},
                       {"pool_mode", kText},
                       {"load_balance_hosts", kText},
                       // pgtether
                       {"cl_tethered", kInt4},
                       {"sv_tethered", kInt4},
                       {"tether_reserve_exhausted", kInt8}});
    auto census = take_census(worker);
    int admin_clients = 0;
    worker.for_each_client([&](Client& client) {
        if (client.is_admin() && client.state() != Client::State::Closing) ++admin_clients;
    });
    // PgBouncer lists its console as the pool pgbouncer/pgbouncer; pools are sorted by name.
    bool admin_done = false;
    auto admin_row = [&]() {
        admin_done = true;
        rs.row({text(kAdminDatabaseName), text(kAdminDatabaseName), number(admin_clients),
                number(0), number(0), number(0), number(0), number(0), number(0), number(0),
                number(0), number(0), number(0), number(0), number(0), text(kAdminPoolMode),
                kNull, number(0), number(0), number(0)});
    };
    for (const auto& [key, pool] : worker.pools()) {
        if (!admin_done && key.first > kAdminDatabaseName) admin_row();
        const auto& c = census[pool.get()];
        rs.row({text(key.first), text(key.second), number(c.cl_linked + c.cl_idle),
                number(c.cl_waiting), number(0), number(0), number(c.sv_active),
                number(c.sv_active_cancel), number(c.sv_being_canceled), number(c.sv_idle),
                number(c.sv_used), number(c.sv_tested), number(c.sv_login),
                unsigned_number(c.maxwait_us / 1'000'000),
                unsigned_number(c.maxwait_us % 1'000'000), text(pool_mode_text(pool->mode())),
                load_balance_hosts_of(pool->database()), number(c.cl_tethered), number(c.sv_tethered),
                unsigned_number(pool->stats().tether_reserve_exhausted)});
    }
    if (!admin_done) admin_row();
}

// Per database, sorted by name, with the console's pseudo-database among them.
struct DatabaseStats {
    PoolStats totals;
    StatsAverages averages;
};

std::map<std::string, DatabaseStats> stats_by_database(AdminContext& worker) {
    std::map<std::string, DatabaseStats> out;
    for (const auto& [key, pool] : worker.pools())
        out[key.first].totals += pool->stats();
    for (auto& [database, entry] : out) {
        const std::string& name = database;  // clang before 16 captures no structured binding
        entry.averages = worker.stats_history().averages(
            [&](const Pool& pool) { return pool.database_name() == name; });
    }
    auto& admin = out[kAdminDatabaseName];
    admin.totals.xact_count = admin.totals.query_count = worker.stats().admin_queries;
    return out;
}

// SHOW STATS and its relatives: PgBouncer 1.24's columns in its order, pgtether's own after them.
void show_stats(AdminContext& worker, ShowTable& out) {
    std::vector<protocol::ColumnDescription> columns = {{"database", kText}};
    for (const char* name :
         {"total_server_assignment_count", "total_xact_count", "total_query_count",
          "total_received", "total_sent", "total_xact_time", "total_query_time",
          "total_wait_time", "total_client_parse_count", "total_server_parse_count",
          "total_bind_count", "avg_server_assignment_count", "avg_xact_count", "avg_query_count",
          "avg_recv", "avg_sent", "avg_xact_time", "avg_query_time", "avg_wait_time",
          "avg_client_parse_count", "avg_server_parse_count", "avg_bind_count",
          // pgtether: the tether's counters
          "total_tether_count", "total_untether_count", "total_probe_count", "total_scrub_count",
          "total_scrub_failure_count", "total_leak_count", "total_ledger_count"}) {
        columns.push_back({name, kNumeric});
    }
    ResultSet rs(out, columns);
    for (const auto& [name, s] : stats_by_database(worker)) {
        const auto& t = s.totals;
        const auto& a = s.averages;
        rs.row({text(name),
                unsigned_number(t.server_assignment_count),
                unsigned_number(t.xact_count),
                unsigned_number(t.query_count),
                unsigned_number(t.bytes_received),
                unsigned_number(t.bytes_sent),
                unsigned_number(t.xact_time_us),
                unsigned_number(t.query_time_us),
                unsigned_number(t.wait_time_us),
                unsigned_number(t.client_parse_count),
                unsigned_number(t.server_parse_count),
                unsigned_number(t.bind_count),
                unsigned_number(a.server_assignment_count),
                unsigned_number(a.xact_count),
                unsigned_number(a.query_count),
                unsigned_number(a.bytes_received),
                unsigned_number(a.bytes_sent),
                unsigned_number(a.xact_time_us),
                unsigned_number(a.query_time_us),
                unsigned_number(a.wait_time_us),
                unsigned_number(a.client_parse_count),
                unsigned_number(a.server_parse_count),
                unsigned_number(a.bind_count),
                unsigned_number(t.tether_events),
                unsigned_number(t.untether_events),
                unsigned_number(t.probes),
                unsigned_number(t.scrubs),
                unsigned_number(t.scrub_failures),
                unsigned_number(t.leaks_found),
                unsigned_number(t.ledger_decisions)});
    }
}

void show_stats_totals(AdminContext& worker, ShowTable& out) {
    std::vector<protocol::ColumnDescription> columns = {{"database", kText}};
    for (const char* name :
         {"server_assignment_count", "xact_count", "query_count", "bytes_received", "bytes_sent",
          "xact_time", "query_time", "wait_time", "client_parse_count", "server_parse_count",
          "bind_count",
          // pgtether
          "tether_count", "untether_count", "probe_count", "scrub_count", "scrub_failure_count",
          "leak_count", "ledger_count"}) {
        columns.push_back({name, kNumeric});
    }
    ResultSet rs(out, columns);
    for (const auto& [name, s] : stats_by_database(worker)) {
        const auto& t = s.totals;
        rs.row({text(name), unsigned_number(t.server_assignment_count),
                unsigned_number(t.xact_count), unsigned_number(t.query_count),
                unsigned_number(t.bytes_received), unsigned_number(t.bytes_sent),
                unsigned_number(t.xact_time_us), unsigned_number(t.query_time_us),
                unsigned_number(t.wait_time_us), unsigned_number(t.client_parse_count),
                unsigned_number(t.server_parse_count), unsigned_number(t.bind_count),
                unsigned_number(t.tether_events), unsigned_number(t.untether_events),
                unsigned_number(t.probes), unsigned_number(t.scrubs),
                unsigned_number(t.scrub_failures), unsigned_number(t.leaks_found),
                unsigned_number(t.ledger_decisions)});
    }
}

void show_stats_averages(AdminContext& worker, ShowTable& out) {
    std::vector<protocol::ColumnDescription> columns = {{"database", kText}};
    // The last three names are PgBouncer's (avg_ prefixed, unlike the others).
    for (const char* name : {"server_assignment_count", "xact_count", "query_count",
                             "bytes_received", "bytes_sent", "xact_time", "query_time",
                             "wait_time", "avg_client_parse_count", "avg_server_parse_count",
                             "avg_bind_count"}) {
        columns.push_back({name, kNumeric});
    }
    ResultSet rs(out, columns);
    for (const auto& [name, s] : stats_by_database(worker)) {
        const auto& a = s.averages;
        rs.row({text(name), unsigned_number(a.server_assignment_count),
                unsigned_number(a.xact_count), unsigned_number(a.query_count),
                unsigned_number(a.bytes_received), unsigned_number(a.bytes_sent),
                unsigned_number(a.xact_time_us), unsigned_number(a.query_time_us),
                unsigned_number(a.wait_time_us), unsigned_number(a.client_parse_count),
                unsigned_number(a.server_parse_count), unsigned_number(a.bind_count)});
    }
}

void show_totals(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"name", kText}, {"value", kNumeric}});
    PoolStats t;
    for (const auto& [key, pool] : worker.pools())
        t += pool->stats();
    t.xact_count += worker.stats().admin_queries;
    t.query_count += worker.stats().admin_queries;
    auto a = worker.stats_history().averages([](const Pool&) { return true; });
    const std::pair<const char*, std::uint64_t> rows[] = {
        {"total_server_assignment_count", t.server_assignment_count},
        {"total_xact_count", t.xact_count},
        {"total_query_count", t.query_count},
        {"total_client_bytes", t.bytes_received},
        {"total_server_bytes", t.bytes_sent},
        {"total_xact_time", t.xact_time_us},
        {"total_query_time", t.query_time_us},
        {"total_wait_time", t.wait_time_us},
        {"total_ps_client_parse_count", t.client_parse_count},
        {"total_ps_server_parse_count", t.server_parse_count},
        {"total_ps_bind_count", t.bind_count},
        {"avg_server_assignment_count", a.server_assignment_count},
        {"avg_xact_count", a.xact_count},
        {"avg_query_count", a.query_count},
        {"avg_client_bytes", a.bytes_received},
        {"avg_server_bytes", a.bytes_sent},
        {"avg_xact_time", a.xact_time_us},
        {"avg_query_time", a.query_time_us},
        {"avg_wait_time", a.wait_time_us},
        {"avg_ps_client_parse_count", a.client_parse_count},
        {"avg_ps_server_parse_count", a.server_parse_count},
        {"avg_ps_bind_count", a.bind_count},
        // pgtether's: accept() failures for want of file descriptors (the listener paused).
        {"total_accept_fd_exhausted", worker.stats().accept_fd_exhausted},
    };
    for (const auto& [name, value] : rows)
        rs.row({text(name), unsigned_number(value)});
}

void show_databases(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"name", kText},
                       {"host", kText},
                       {"port", kInt4},
                       {"database", kText},
                       {"force_user", kText},
                       {"pool_size", kInt4},
                       {"min_pool_size", kInt4},
                       {"reserve_pool_size", kInt4},
                       {"server_lifetime", kInt4},
                       {"pool_mode", kText},
                       {"load_balance_hosts", kText},
                       {"max_connections", kInt4},
                       {"current_connections", kInt4},
                       {"max_client_connections", kInt4},
                       {"current_client_connections", kInt4},
                       {"paused", kInt4},
                       {"disabled", kInt4}});
    const auto& config = worker.config();
    // Configured entries, and the databases clients reached through the "*" entry.
    std::map<std::string, DatabaseConfig> databases;
    for (const auto& db : config.databases)
        databases.emplace(db.name, db);
    for (const auto& [key, pool] : worker.pools()) {
        if (databases.count(key.first) == 0) {
            if (auto resolved = worker.resolve_database(key.first)) {
                databases.emplace(key.first, *resolved);
            } else {
                databases.emplace(key.first, pool->database());  // removed by a reload
            }
        }
    }
    const auto& control = worker.pool_control();
    auto& client_counts = worker.client_counts();
    auto seconds = [](Duration d) { return static_cast<long long>(d.count() / 1000000); };
    bool admin_done = false;
    // The console's row, PgBouncer 1.24's: its pool, the global limits, its clients.
    auto admin_row = [&]() {
        admin_done = true;
        rs.row({text(kAdminDatabaseName), kNull, number(config.listen_port),
                text(kAdminDatabaseName), text(kAdminDatabaseName), number(kAdminPoolSize),
                number(0), number(0), number(seconds(config.server_lifetime)),
                text(kAdminPoolMode), kNull, number(config.max_db_connections), number(0),
                number(config.max_db_client_connections),
                number(client_counts.database_clients(kAdminDatabaseName)), number(0),
                number(0)});
    };
    for (const auto& [name, db] : databases) {
        if (!admin_done && name > kAdminDatabaseName) admin_row();
        const int max_clients = resolve_client_limits(config, &db, nullptr).database;
        rs.row({text(name), db.host.empty() ? kNull : text(db.host), number(db.port),
                text(db.dbname.empty() ? name : db.dbname), db.user.empty() ? kNull : text(db.user),
                number(db.pool_size.value_or(config.default_pool_size)),
                number(db.min_pool_size.value_or(config.min_pool_size)),
                number(db.reserve_pool_size.value_or(config.reserve_pool_size)),
                number(seconds(server_lifetime_for(config, db))),
                db.pool_mode ? text(pool_mode_text(*db.pool_mode)) : kNull,
                load_balance_hosts_of(db),
                number(db.max_db_connections.value_or(config.max_db_connections)),
                number(worker.database_server_count(name)), number(max_clients),
                number(client_counts.database_clients(name)),
                number(control.database_paused(name) ? 1 : 0),
                number(control.disabled(name) ? 1 : 0)});
    }
    if (!admin_done) admin_row();
}

void show_users(AdminContext& worker, ShowTable& out) {
    // PgBouncer 1.24's columns.
    ResultSet rs(out, {{"name", kText},
                       {"pool_size", kText},
                       {"reserve_pool_size", kText},
                       {"pool_mode", kText},
                       {"max_user_connections", kInt4},
                       {"current_connections", kInt4},
                       {"max_user_client_connections", kInt4},
                       {"current_client_connections", kInt4}});
    auto& client_counts = worker.client_counts();
    const auto& budget = worker.budget();
    const auto& config = worker.config();
    std::set<std::string> names = {kAdminDatabaseName};
    for (const auto& [name, secret] : worker.auth_file())
        names.insert(name);
    for (const auto& [name, user] : config.users)
        names.insert(name);
    for (const auto& [key, pool] : worker.pools())
        names.insert(key.second);
    for (const auto& name : names) {
        const UserConfig* user = config.find_user(name);
        // pool_size and reserve_pool_size as PgBouncer shows them: the [users] entry's, as
        // text, NULL when it sets none.
        auto own = [&](const std::optional<int> UserConfig::*field) {
            return user && user->*field ? text(std::to_string(*(user->*field))) : kNull;
        };
        rs.row({text(name), own(&UserConfig::pool_size), own(&UserConfig::reserve_pool_size),
                user && user->pool_mode ? text(pool_mode_text(*user->pool_mode)) : kNull,
                number(user && user->max_user_connections ? *user->max_user_connections
                                                          : config.max_user_connections),
                number(budget.user_servers(name)),
                number(resolve_client_limits(config, nullptr, user).user),
                number(client_counts.user_clients(name))});
    }
}

void show_config(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out,
                 {{"key", kText}, {"value", kText}, {"default", kText}, {"changeable", kText}});
    for (const auto& s : describe_settings(worker.config())) {
        rs.row({text(s.key), s.value, s.default_value, text(s.changeable ? "yes" : "no")});
    }
}

void show_lists(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"list", kText}, {"items", kInt4}});
    const auto& config = worker.config();
    std::set<std::string> users = {kAdminDatabaseName};
    for (const auto& [name, secret] : worker.auth_file())
        users.insert(name);
    for (const auto& [name, user] : config.users)
        users.insert(name);
    std::set<std::string> databases = {kAdminDatabaseName};
    for (const auto& db : config.databases)
        databases.insert(db.name);
    int login = 0;
    int used = 0;
    int tethered = 0;
    worker.for_each_client([&](Client& client) {
        ++used;
        if (client.state() == Client::State::Startup ||
            client.state() == Client::State::AuthLookup || client.state() == Client::State::Auth) {
            ++login;
        }
        if (client.tethered()) ++tethered;
    });
    for (const auto& [key, pool] : worker.pools()) {
        databases.insert(key.first);
        users.insert(key.second);
    }
    // pgtether allocates connections one by one: nothing is kept free.
    const std::pair<const char*, std::int64_t> rows[] = {
        {"databases", static_cast<std::int64_t>(databases.size())},
        {"users", static_cast<std::int64_t>(users.size())},
        {"pools", static_cast<std::int64_t>(worker.pools().size()) + 1},
        {"free_clients", 0},
        {"used_clients", used},
        {"login_clients", login},
        {"free_servers", 0},
        {"used_servers", static_cast<std::int64_t>(worker.server_count())},
        {"dns_names", 0},
        {"dns_zones", 0},
        {"dns_queries", 0},
        {"dns_pending", 0},
        // pgtether
        {"tethered_clients", tethered},
    };
    for (const auto& [name, n] : rows)
        rs.row({text(name), number(n)});
}

void show_mem(AdminContext& worker, ShowTable& out) {
    ResultSet rs(
        out,
        {{"name", kText}, {"size", kInt4}, {"used", kInt4}, {"free", kInt4}, {"memtotal", kInt4}});
    // PgBouncer's rows are slab caches of fixed-size objects: size x (used + free) = memtotal.
    // pgtether allocates each object when needed and frees it when done, so nothing is free and
    // memtotal is size x used: the objects themselves, not the strings and buffers they point
    // to (the connections' buffers have a row of their own).
    auto objects = [&](const char* name, std::size_t size, std::size_t used) {
        rs.row({text(name), number(static_cast<std::int64_t>(size)),
                number(static_cast<std::int64_t>(used)), number(0),
                number(static_cast<std::int64_t>(size * used))});
    };
    objects("user_cache", sizeof(AuthFile::value_type), worker.auth_file().size());
    const Config& config = worker.config();
    objects("db_cache", sizeof(DatabaseConfig),
            config.databases.size() + (config.fallback_database ? 1 : 0));
    objects("pool_cache", sizeof(Pool), worker.pools().size());
    objects("server_cache", sizeof(Server), worker.server_count());
    objects("client_cache", sizeof(Client), worker.client_count());
    // Every socket read lands in the worker's one receive buffer first (pkt_buf bytes).
    objects("iobuf_cache", worker.scratch().size(), 1);
    // pgtether: what connections keep beyond that -- input held between reads (a partial
    // message, or a request waiting for a server) and output the kernel has not taken. A buffer
    // grows by doubling from 1 kB and is given back once empty, so these sizes vary: `size` is
    // the largest, memtotal their sum.
    BufferMemory buffers;
    worker.for_each_client([&](Client& client) { client.stream().add_buffer_memory(buffers); });
    worker.for_each_server([&](Server& server) { server.stream().add_buffer_memory(buffers); });
    rs.row({text("connection_buffers"), number(static_cast<std::int64_t>(buffers.largest)),
            number(static_cast<std::int64_t>(buffers.buffers)), number(0),
            number(static_cast<std::int64_t>(buffers.bytes))});
}

void show_version(ShowTable& out) {
    ResultSet rs(out, {{"version", kText}});
    // Tools look for "PgBouncer x.y.z" to learn the console dialect; this is 1.18's.
    rs.row({text(version_line())});
}

void show_state(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"key", kText}, {"value", kText}});
    bool paused = worker.pool_control().paused_all();
    rs.row({text("active"), text(paused ? "no" : "yes")});
    rs.row({text("paused"), text(paused ? "yes" : "no")});
    rs.row({text("suspended"), text("no")});
}

void show_locks(AdminContext& worker, ShowAudience audience, ShowTable& out) {
    ResultSet rs(out, {{"client_id", kInt8},
                       {"database", kText},
                       {"user", kText},
                       {"addr", kText},
                       {"port", kInt4},
                       {"backend_pid", kInt4},
                       {"lock_count", kInt4},
                       {"bigint_keys", kText},
                       {"int4_keys", kText},
                       {"tethered_since", kText},
                       {"tethered_seconds", kInt4},
                       {"last_query", kText},
                       {"tether_reasons", kText},
                       {"ledger", kText},
                       // Last, so that readers of the columns before it by position keep working.
                       {"application_name", kText}});
    Clock clock(worker);
    const int listen_port = worker.config().listen_port;
    worker.for_each_client([&](Client& client) {
        if (!client.tethered() || client.state() == Client::State::Closing) return;
        auto [remote, local] = endpoints(client.stream(), listen_port);
        auto [bigint, pairs] = lock_lists(client.held_locks());
        Server* server = client.server();
        rs.row({unsigned_number(client.id()), text(client.database()), text(client.user()),
                text(remote.addr), number(remote.port),
                server ? number(server->backend_pid()) : kNull,
                number(static_cast<std::int64_t>(client.held_locks().size())), text(bigint),
                text(pairs), text(clock.format(client.tethered_since_ms())),
                unsigned_number(
                    (clock.now_ms() - std::min(clock.now_ms(), client.tethered_since_ms())) / 1000),
                text(audience == ShowAudience::Admin
                         ? client.last_query()
                         : protocol::redact_statement_literals(client.last_query())),
                text(client.describe_tether()), text(client.lock_ledger().describe()),
                // As SHOW CLIENTS shows it: from the startup packet, then the client's SETs.
                text(std::string(
                    client.params().get(TrackedParam::ApplicationName).value_or("")))});
    });
}

// Every name the tether's trigger matches, per database, and how it got there; then the functions
// discovery could not read. `workers` is 1 here; merged over the workers it counts those whose
// trigger has the name (one discovery is posted to the others, which take it a moment later).
void show_lock_functions(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"database", kText},
                       {"schema", kText},
                       {"name", kText},
                       {"kind", kText},
                       {"found", kText},
                       {"discovered_at", kText},
                       {"checked_at", kText},
                       {"workers", kInt4}});
    const Value one = number(1);
    Clock clock(worker);
    const LockCatalog& catalog = worker.lock_catalog();
    for (const auto& [name, db] : catalog.databases()) {
        // Facts of the database, on each of its rows: when its catalog was last discovered, and
        // when the catalog watch last found it unchanged or moved (only one worker runs
        // watches; merged, its time shows).
        const Value at =
            db->discovered_at_ms == 0 ? kNull : text(clock.format(db->discovered_at_ms));
        const Value checked =
            db->checked_at_ms == 0 ? kNull : text(clock.format(db->checked_at_ms));
        for (const std::string& builtin : builtin_lock_functions()) {
            rs.row({text(name), text("pg_catalog"), text(builtin), text("function"),
                    text(to_string(LockNameSource::Builtin)), at, checked, one});
        }
        for (const std::string& configured : catalog.configured()) {
            const auto dot = configured.rfind('.');
            rs.row({text(name), dot == std::string::npos ? kNull : text(configured.substr(0, dot)),
                    text(dot == std::string::npos ? configured : configured.substr(dot + 1)),
                    text("function"), text(to_string(LockNameSource::Configured)), at, checked,
                    one});
        }
        for (const LockName& n : db->names) {
            std::string found = to_string(n.source);
            if (!n.detail.empty()) found += " " + n.detail;
            rs.row({text(name), text(n.schema), text(n.name), text(n.kind), text(found), at,
                    checked, one});
        }
    }
}

// LISTEN multiplexed (docs/session-state.md): per pool and channel, its clients listening through
// the pool's listening connection, the notifications handed to them and those dropped with a
// client past its listen_client_buffer; channels whose last listener left keep a row with their
// counters (ListenHub::retired_channels). With several workers each worker has its own listening
// connection: one row per worker.
void show_listens(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"database", kText},
                       {"user", kText},
                       {"channel", kText},
                       {"listeners", kInt4},
                       {"delivered", kInt8},
                       {"dropped", kInt8},
                       {"listening", kText},
                       {"connection", kText}});
    for (const auto& entry : worker.pools()) {
        const Pool& pool = *entry.second;
        const ListenHub* hub = pool.listen_hub_if_any();
        if (!hub) continue;
        auto row = [&](const ListenHub::ChannelView& channel) {
            rs.row({text(pool.database_name()), text(pool.user_name()), text(channel.channel),
                    number(channel.listeners), unsigned_number(channel.delivered),
                    unsigned_number(channel.dropped), text(channel.listening ? "yes" : "no"),
                    text(hub->connection_state())});
        };
        for (const auto& channel : hub->channels()) row(channel);
        for (const auto& channel : hub->retired_channels()) row(channel);
    }
}

// Host lists (docs/deployment.md, "Primaries and standbys"): per pool and host of its
// database's list, what the pool knows of it (core/host_choice.hpp): its role at the last login
// there, whether it is being skipped, and since when it was last tried. Each worker keeps its
// own record: one row per worker.
void show_hosts(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"database", kText},
                       {"user", kText},
                       {"host", kText},
                       {"port", kInt4},
                       {"target_session_attrs", kText},
                       {"role", kText},
                       {"state", kText},
                       {"last_check_ms_ago", kInt8},
                       {"backoff_ms_left", kInt8},
                       {"failures", kInt4}});
    const std::uint64_t now = worker.now_ms();
    for (const auto& [key, pool] : worker.pools()) {
        const auto& db = pool->database();
        const auto& hosts = pool->hosts();
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            const HostStatus& host = hosts[i];
            const std::string name = host_for_turn(db, i);
            rs.row({text(pool->database_name()), text(pool->user_name()),
                    name.empty() ? kNull : text(name), number(port_for_host(db, i)),
                    text(session_attrs_name(pool->session_attrs())), text(host_role_name(host)),
                    text(host_state_name(host, now)),
                    host.last_check_ms == 0 ? kNull
                                            : unsigned_number(now - host.last_check_ms),
                    unsigned_number(host.backoff_until_ms > now ? host.backoff_until_ms - now
                                                                : 0),
                    number(host.failures)});
        }
    }
}

void show_dns(ShowTable& out, bool hosts) {
    // pgtether resolves host names at connect time and keeps no DNS cache: always empty.
    if (hosts) {
        ResultSet rs(out, {{"hostname", kText}, {"ttl", kInt8}, {"addrs", kText}});
    } else {
        ResultSet rs(out, {{"zonename", kText}, {"serial", kInt8}, {"count", kInt4}});
    }
}

// PgBouncer 1.19's SHOW PEERS: the [peers] entries (pool_size: as configured, else
// default_pool_size, which is what PgBouncer shows).
void show_peers(const AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"peer_id", kInt4}, {"host", kText}, {"port", kInt4}, {"pool_size", kInt4}});
    const auto& config = worker.config();
    for (const auto& [id, peer] : config.peers) {
        rs.row({number(id), text(peer.host), number(peer.port),
                number(peer.pool_size.value_or(config.default_pool_size))});
    }
}

// PgBouncer 1.19's SHOW PEER_POOLS: per peer, the cancel requests being forwarded to it. PgBouncer
// keeps a pool of connections per peer; pgtether opens one connection per forwarded request (at
// most pool_size at once, proxy/server/peer_cancels.hpp), so a request queued for its turn or
// waiting for its connection counts as cl_waiting_cancel_req (the latter also as sv_login), one
// sent and awaiting the peer's close as cl_active_cancel_req and sv_active_cancel.
// Every configured peer but this process itself has a row.
void show_peer_pools(AdminContext& worker, ShowTable& out) {
    ResultSet rs(out, {{"peer_id", kInt4},
                       {"cl_active_cancel_req", kInt4},
                       {"cl_waiting_cancel_req", kInt4},
                       {"sv_active_cancel", kInt4},
                       {"sv_login", kInt4}});
    const auto& config = worker.config();
    for (const auto& [id, peer] : config.peers) {
        if (id == config.peer_id) continue;
        int sent = 0;
        int connecting = 0;
        worker.for_each_cancel([&, id = id](const CancelForwarder& forwarder) {
            if (forwarder.peer_id() != id) return;
            ++(forwarder.sent() ? sent : connecting);
        });
        const int waiting = connecting + worker.peer_cancels().queued(id);
        rs.row({number(id), number(sent), number(waiting), number(sent), number(connecting)});
    }
}

}  // namespace

ShowOutcome collect_show(AdminContext& worker, std::string_view what, ShowAudience audience,
                         ShowTable& out) {
    if (what == "clients") {
        show_clients(worker, out);
    } else if (what == "servers") {
        show_servers(worker, out);
    } else if (what == "pools") {
        show_pools(worker, out);
    } else if (what == "stats") {
        show_stats(worker, out);
    } else if (what == "stats_totals") {
        show_stats_totals(worker, out);
    } else if (what == "stats_averages") {
        show_stats_averages(worker, out);
    } else if (what == "totals") {
        show_totals(worker, out);
    } else if (what == "databases") {
        show_databases(worker, out);
    } else if (what == "users") {
        show_users(worker, out);
    } else if (what == "config") {
        show_config(worker, out);
    } else if (what == "lists") {
        show_lists(worker, out);
    } else if (what == "mem") {
        show_mem(worker, out);
    } else if (what == "version") {
        show_version(out);
    } else if (what == "state") {
        show_state(worker, out);
    } else if (what == "locks") {
        show_locks(worker, audience, out);
    } else if (what == "lock_functions") {
        show_lock_functions(worker, out);
    } else if (what == "listens") {
        show_listens(worker, out);
    } else if (what == "hosts") {
        show_hosts(worker, out);
    } else if (what == "dns_hosts" || what == "dns_zones") {
        show_dns(out, what == "dns_hosts");
    } else if (what == "sockets" || what == "active_sockets") {
        show_sockets(worker, out, what == "active_sockets");
    } else if (what == "fds") {
        show_fds(worker, out);
    } else if (what == "peers") {
        show_peers(worker, out);
    } else if (what == "peer_pools") {
        show_peer_pools(worker, out);
    } else {
        return ShowOutcome::Unknown;
    }
    return ShowOutcome::Done;
}

ShowOutcome append_show(AdminContext& worker, std::string_view what, ShowAudience audience,
                        std::string& out) {
    std::vector<ShowTable> tables(worker.worker_count());
    const ShowOutcome outcome = collect_show(worker, what, audience, tables.at(worker.index()));
    if (outcome != ShowOutcome::Done) return outcome;
    if (tables.size() > 1) {
        worker.gather_all_workers([&](AdminContext& other) {
            if (&other != &worker)
                (void)collect_show(other, what, audience, tables.at(other.index()));
        });
        // The caller's rows first, as they were before there was more than one worker.
        std::rotate(tables.begin(), tables.begin() + static_cast<long>(worker.index()),
                    tables.end());
    }
    append_show_table(merge_show_tables(what, std::move(tables)), out);
    return outcome;
}

std::string admin_help_text() {
    return "\n"
           "\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION\n"
           "\tSHOW LISTS|MEM|STATE|LOCKS|LOCK_FUNCTIONS|LISTENS|HOSTS\n"
           "\tSHOW SOCKETS|ACTIVE_SOCKETS|FDS\n"
           "\tSHOW PEERS|PEER_POOLS|DNS_HOSTS|DNS_ZONES\n"
           "\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS\n"
           "\tSET key = arg\n"
           "\tRELOAD\n"
           "\tPAUSE [<db>]\n"
           "\tRESUME [<db>]\n"
           "\tDISABLE <db>\n"
           "\tENABLE <db>\n"
           "\tRECONNECT [<db>]\n"
           "\tKILL [<db>]\n"
           "\tKILL_CLIENT <client_id>\n"
           "\tSHUTDOWN [WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS]\n"
           "\tWAIT_CLOSE [<db>]";
}

}  // namespace pgtether
