// More than one pgtether process: SHUTDOWN WAIT_FOR_CLIENTS / WAIT_FOR_SERVERS, a second process
// taking over the port with so_reuseport while pgbench runs, PgBouncer-compatible peering (a
// CancelRequest that lands on the wrong process is forwarded to the one that owns the key, also
// through haproxy), and session advisory locks that stay exclusive across instances.
#include <doctest/doctest.h>
#include <signal.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/netns.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

// The admin console over the pooler's own Unix socket: with so_reuseport, a TCP connection to
// the shared port may reach the other process.
Conn unix_console(const PoolerProcess& pooler) {
    return Conn(make_conninfo(pooler.dir(), pooler.port(), TestEnv::get().superuser, "pgbouncer"));
}

Conn unix_client(const PoolerProcess& pooler) {
    return Conn(make_conninfo(pooler.dir(), pooler.port(), TestEnv::get().superuser,
                              TestEnv::get().database));
}

bool exits_within(PoolerProcess& pooler, std::chrono::milliseconds timeout) {
    return eventually([&] { return !pooler.running(); }, timeout);
}

// pgbench through host:port, in the background; its output goes to a log file.
class Pgbench {
  public:
    // `netns_fd`: run inside that network namespace (support/netns.hpp), or -1.
    Pgbench(const std::string& dir, const std::string& name, int port,
            std::vector<std::string> options, int netns_fd = -1)
        : log_path_(dir + "/" + name + ".log") {
        const auto& env = TestEnv::get();
        ChildProcess::Options run;
        run.netns_fd = netns_fd;
        run.argv = {env.pg_bin + "/pgbench", "-n", "-h",         "127.0.0.1", "-p",
                    std::to_string(port),    "-U", env.superuser};
        for (auto& option : options)
            run.argv.push_back(std::move(option));
        run.argv.push_back(env.database);
        run.log_path = log_path_;
        process_ = std::make_unique<ChildProcess>(run);
    }
    // The exit status once it has finished (nullopt: still running after `timeout`).
    std::optional<int> wait(std::chrono::milliseconds timeout) {
        return process_->wait_exit(timeout);
    }
    [[nodiscard]] std::string output() const { return read_file(log_path_); }

  private:
    std::string log_path_;
    std::unique_ptr<ChildProcess> process_;
};

// A PgBouncer-style [peers] line for a pooler listening on 127.0.0.1:port.
std::string peer_line(int id, int port) {
    return std::to_string(id) + " = host=127.0.0.1 port=" + std::to_string(port);
}

// The peer id a cancel key carries: bytes 1 and 2 of the key, i.e. of the "process id" that
// libpq reports (core/peering.hpp).
int key_peer(int backend_pid) {
    auto pid = static_cast<std::uint32_t>(backend_pid);
    return static_cast<int>(((pid >> 16) & 0xff) | (((pid >> 8) & 0xff) << 8));
}

bool query_running(const std::string& query) {
    return direct_scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND "
               "query = '" +
               query + "'") != "0";
}

using wire::KeyData;

KeyData key_data(const std::vector<BackendMessage>& hello) {
    auto key = wire::backend_key_data(hello);
    if (!key) FAIL("no BackendKeyData in the greeting: " << wire::describe(hello));
    return key.value_or(KeyData{});
}

// How many times `needle` occurs in `text`.
int count_of(const std::string& text, const std::string& needle) {
    int count = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
        ++count;
    return count;
}

void send_cancel(const std::string& host, int port, KeyData key) {
    RawConn raw(host, port);
    REQUIRE(raw.send(wire::cancel_request(key.pid, key.key)));
    CHECK(raw.wait_closed());  // no reply; the receiver closes the connection
}

// Two peered pgtether processes on their own ports: peer 1 and peer 2.
struct PeerPair {
    int port1 = free_port();
    int port2 = free_port();
    std::unique_ptr<Pgtether> one;
    std::unique_ptr<Pgtether> two;

    PeerPair() {
        one = std::make_unique<Pgtether>(config(1, port1));
        two = std::make_unique<Pgtether>(config(2, port2));
    }
    [[nodiscard]] PoolerConfig config(int id, int port) const {
        auto c = pool_config("transaction", 2,
                             {{"peer_id", std::to_string(id)},
                              {"listen_port", std::to_string(port)},
                              {"query_wait_timeout", "30"}});
        c.peers = {peer_line(1, port1), peer_line(2, port2)};
        return c;
    }
    Pgtether& by_id(int id) { return id == 1 ? *one : *two; }
};

}  // namespace

TEST_CASE(
    "SHUTDOWN WAIT_FOR_CLIENTS: connected clients keep working, the process exits when "
    "the last one leaves") {
    Pgtether pooler(pool_config("transaction", 2));
    std::optional<Conn> connected(Conn::must(pooler.conninfo()));
    Conn& client = *connected;
    PGT_CHECK_OK(client.exec("SELECT 1"));
    {
        Conn admin = unix_console(pooler);
        REQUIRE(admin.ok());
        auto r = admin.exec("SHUTDOWN WAIT_FOR_CLIENTS");
        PGT_CHECK_OK(r);
        CHECK(r.command_tag == "SHUTDOWN");
    }
    CHECK(pooler.wait_for_log("SHUTDOWN WAIT_FOR_CLIENTS command issued"));
    // No new TCP connections...
    CHECK(eventually([&] { return !port_accepts(pooler.host(), pooler.port()); }, 5s));
    // ...but the connected client keeps its session: transactions, also explicit ones.
    for (int i = 0; i < 5; ++i) {
        PGT_CHECK_OK(client.exec("BEGIN"));
        CHECK(scalar(client, "SELECT 40 + 2") == "42");
        PGT_CHECK_OK(client.exec("COMMIT"));
    }
    // The Unix socket stays open for the admin console only (PgBouncer's rule).
    {
        Conn admin = unix_console(pooler);
        CHECK_MESSAGE(admin.ok(), admin.error());
        auto clients = admin.exec("SHOW CLIENTS");
        PGT_CHECK_OK(clients);
        Conn other = unix_client(pooler);
        CHECK_FALSE(other.ok());
        CHECK(other.error().find("pgtether is shutting down") != std::string::npos);
        // RESUME, or SIGUSR2, cannot undo a shutdown (PgBouncer's words).
        auto resume = admin.exec("RESUME");
        PGT_CHECK_SQLSTATE(resume, "08P01");
        CHECK(resume.error_text.find("pooler is shutting down") != std::string::npos);
        REQUIRE(::kill(pooler.pid(), SIGUSR2) == 0);
        CHECK(pooler.wait_for_log("got SIGUSR2 while shutting down, ignoring"));
    }
    std::this_thread::sleep_for(500ms);
    CHECK(pooler.running());
    connected.reset();  // the last client leaves
    CHECK(exits_within(pooler, 10s));
    CHECK(pooler.log().find("all clients have disconnected") != std::string::npos);
    CHECK(pooler.log().find("shutdown complete") != std::string::npos);
}

TEST_CASE(
    "SHUTDOWN WAIT_FOR_CLIENTS with two workers: the console answers until the process's last "
    "client leaves") {
    Pgtether pooler(pool_config("transaction", 2, {{"workers", "2"}}));
    // Eight TCP clients, spread over the two workers; client ids tell whose each is (worker i of
    // N hands out i+1, i+1+N, ...).
    std::vector<std::unique_ptr<Conn>> clients;
    for (int i = 0; i < 8; ++i) {
        clients.push_back(std::make_unique<Conn>(
            Conn::must(pooler.conninfo("", "", "", "application_name=c" + std::to_string(i)))));
        PGT_REQUIRE_OK(clients.back()->exec("SELECT 1"));
    }
    std::vector<int> worker_of(clients.size(), -1);
    {
        Conn admin = unix_console(pooler);
        REQUIRE(admin.ok());
        auto rows = admin.exec("SHOW CLIENTS");
        PGT_REQUIRE_OK(rows);
        for (std::size_t i = 0; i < clients.size(); ++i) {
            auto row = find_row(rows, "application_name", "c" + std::to_string(i));
            REQUIRE(row);
            worker_of[i] = static_cast<int>((cell_int(*row, "id") - 1) % 2);
        }
    }
    const auto on_worker = [&](int worker) {
        return std::count(worker_of.begin(), worker_of.end(), worker);
    };
    // The kernel spreads accepted connections; with eight, both workers have some almost always.
    if (on_worker(0) == 0 || on_worker(1) == 0) {
        MESSAGE("all eight clients landed on one worker; nothing to check");
        return;
    }
    {
        Conn admin = unix_console(pooler);
        REQUIRE(admin.ok());
        PGT_CHECK_OK(admin.exec("SHUTDOWN WAIT_FOR_CLIENTS"));
    }
    CHECK(pooler.wait_for_log("SHUTDOWN WAIT_FOR_CLIENTS command issued"));
    // Worker 0 (the console's Unix socket) loses all its clients first...
    for (std::size_t i = 0; i < clients.size(); ++i) {
        if (worker_of[i] == 0) clients[i].reset();
    }
    std::this_thread::sleep_for(500ms);
    // ...and still answers the console while worker 1's clients keep their sessions.
    for (std::size_t i = 0; i < clients.size(); ++i) {
        if (worker_of[i] != 1) continue;
        CHECK(pooler.running());
        CHECK(scalar(*clients[i], "SELECT 'still served'") == "still served");
        Conn admin = unix_console(pooler);
        CHECK_MESSAGE(admin.ok(), admin.error());
        if (admin.ok()) PGT_CHECK_OK(admin.exec("SHOW CLIENTS"));
        clients[i].reset();
    }
    CHECK(exits_within(pooler, 10s));
    CHECK(pooler.log().find("all clients have disconnected") != std::string::npos);
    CHECK(pooler.log().find("shutdown complete") != std::string::npos);
}

TEST_CASE("SHUTDOWN WAIT_FOR_SERVERS: the open transaction finishes, then the process exits") {
    Pgtether pooler(pool_config("transaction", 2));
    Conn client = Conn::must(pooler.conninfo());
    PGT_CHECK_OK(client.exec("BEGIN"));
    PGT_CHECK_OK(client.exec("SELECT 1"));
    {
        Conn admin = unix_console(pooler);
        REQUIRE(admin.ok());
        PGT_CHECK_OK(admin.exec("SHUTDOWN WAIT_FOR_SERVERS"));
    }
    CHECK(eventually([&] { return !port_accepts(pooler.host(), pooler.port()); }, 5s));
    // Beyond the 10 s bound of a plain SHUTDOWN: WAIT_FOR_SERVERS has none.
    std::this_thread::sleep_for(200ms);
    CHECK(pooler.running());
    PGT_CHECK_OK(client.exec("COMMIT"));
    CHECK(exits_within(pooler, 10s));
    CHECK(pooler.log().find("shutdown complete") != std::string::npos);
}

TEST_CASE("SHUTDOWN with an unknown mode is a syntax error and shuts nothing down") {
    Pgtether pooler(pool_config("transaction", 2));
    Conn admin = unix_console(pooler);
    auto r = admin.exec("SHUTDOWN WAIT_FOR_NOTHING");
    CHECK(r.is_error());
    CHECK_MESSAGE(r.message.find("invalid command") != std::string::npos, r.describe());
    CHECK(port_accepts(pooler.host(), pooler.port()));
}

TEST_CASE("so_reuseport takeover under pgbench: no failed transaction, no refused connection") {
    // Linux resets a connection that reaches the old socket between its last accept and its
    // close -- microseconds, unless the host is loaded and the old process is preempted there
    // -- unless net.ipv4.tcp_migrate_req = 1 hands such connections to the new socket
    // (docs/deployment.md). The setting is per network namespace: both processes and pgbench
    // run in a namespace of the test's own with it set, and reach PostgreSQL over its Unix
    // socket (file system, not network).
    if (auto why = network_faults_unavailable()) {
        MESSAGE("skipped: " << *why);
        return;
    }
    NetNamespace ns;
    ns.run_inside([] {
        std::ofstream migrate("/proc/sys/net/ipv4/tcp_migrate_req");
        migrate << "1\n";
        migrate.flush();
        if (!migrate) throw std::runtime_error("cannot set net.ipv4.tcp_migrate_req");
    });
    const TestEnv& env = TestEnv::get();
    const int port = free_port();
    auto config = [&] {
        PoolerConfig c = pool_config("transaction", 4,
                                     {{"so_reuseport", "1"}, {"listen_port", std::to_string(port)}});
        c.databases = {"* = host=" + env.pg_socket_dir + " port=" + std::to_string(env.pg_port)};
        c.netns_fd = ns.fd();
        return c;
    };
    auto old_process = std::make_unique<Pgtether>(config());
    TempDir scratch("pgt-takeover", env.tmp_dir);
    // A connection per transaction (-C): new connections keep arriving throughout the takeover.
    Pgbench reconnecting(scratch.path(), "reconnecting", port,
                         {"-S", "-C", "-c", "4", "-j", "2", "-T", "12", "-R", "300"}, ns.fd());
    // Long-lived connections: they stay on the old process until pgbench ends.
    Pgbench persistent(scratch.path(), "persistent", port, {"-S", "-c", "2", "-T", "12"},
                       ns.fd());
    std::this_thread::sleep_for(3s);

    Pgtether new_process(config());
    REQUIRE(new_process.wait_for_log("listening on 127.0.0.1:" + std::to_string(port)));
    std::this_thread::sleep_for(1s);
    {
        Conn admin = unix_console(*old_process);
        REQUIRE(admin.ok());
        PGT_CHECK_OK(admin.exec("SHUTDOWN WAIT_FOR_CLIENTS"));
    }

    auto reconnecting_status = reconnecting.wait(60s);
    auto persistent_status = persistent.wait(60s);
    REQUIRE(reconnecting_status);
    REQUIRE(persistent_status);
    const std::string out1 = reconnecting.output();
    const std::string out2 = persistent.output();
    CHECK_MESSAGE(WIFEXITED(*reconnecting_status), out1);
    CHECK_MESSAGE(WEXITSTATUS(*reconnecting_status) == 0, out1);
    CHECK_MESSAGE(WEXITSTATUS(*persistent_status) == 0, out2);
    for (const auto* out : {&out1, &out2}) {
        CHECK_MESSAGE(out->find("number of failed transactions: 0 ") != std::string::npos, *out);
        CHECK_MESSAGE(out->find("aborted") == std::string::npos, *out);
        CHECK_MESSAGE(out->find("error") == std::string::npos, *out);
    }
    // The old process left once its last client had; the new one served the rest.
    CHECK_MESSAGE(exits_within(*old_process, 15s), old_process->log());
    CHECK(old_process->log().find("all clients have disconnected") != std::string::npos);
    Conn admin = unix_console(new_process);
    auto stats = admin.exec("SHOW STATS_TOTALS");
    PGT_CHECK_OK(stats);
    auto row = find_row(stats, "database", TestEnv::get().database);
    REQUIRE(row);
    CHECK(cell_int(*row, "xact_count") > 0);
    MESSAGE("new process served " << cell_int(*row, "xact_count") << " transactions");
}

TEST_CASE(
    "peering: cancel keys carry the peer id; a cancel sent to the other process is "
    "forwarded to the owner") {
    PeerPair peers;
    const TestEnv& env = TestEnv::get();
    RawConn a("127.0.0.1", peers.port1);
    auto hello = a.startup(env.superuser, env.database);
    REQUIRE_MESSAGE((!hello.empty() && hello.back().type == 'Z'), wire::describe(hello));
    KeyData key = key_data(hello);
    CHECK(key_peer(key.pid) == 1);
    CHECK(key.pid > 0);
    {
        Conn on_two = Conn::must(peers.two->conninfo());
        CHECK(key_peer(on_two.backend_pid()) == 2);
        Conn admin = console(*peers.two);
        auto shown = admin.exec("SHOW PEERS");
        PGT_CHECK_OK(shown);
        auto row = find_row(shown, "peer_id", "1");
        REQUIRE(row);
        CHECK(cell(*row, "host") == "127.0.0.1");
        CHECK(cell_int(*row, "port") == peers.port1);
        CHECK(named_rows(shown).size() == 2);
    }

    const std::string sql = "SELECT pg_sleep(60) /* peering: to be cancelled */";
    REQUIRE(a.send(wire::query(sql)));
    REQUIRE(eventually([&] { return query_running(sql); }));
    // The cancel reaches process 2, which does not know the key: it forwards it to peer 1.
    send_cancel("127.0.0.1", peers.port2, key);
    auto cancelled = a.read_until_ready_or_error(20s);
    INFO(wire::describe(cancelled));
    CHECK(wire::first_error_sqlstate(cancelled) == "57014");
    CHECK(peers.two->wait_for_log("forwarding cancel request to peer 1"));
    // The session goes on.
    REQUIRE(a.read_until_ready_or_error(5s).back().type == 'Z');
    REQUIRE(a.send(wire::query("SELECT 1")));
    CHECK_FALSE(wire::first_error_sqlstate(a.read_until_ready_or_error()).has_value());

    // A key of an unknown peer and one whose TTL is used up are dropped with a log line.
    std::int32_t unknown_peer = static_cast<std::int32_t>((0x12u << 24) | (7u << 16));
    send_cancel("127.0.0.1", peers.port2, {unknown_peer, 0x3});
    CHECK(peers.two->wait_for_log("could not find peer 7"));
    send_cancel("127.0.0.1", peers.port2, {key.pid, key.key & ~0x3});
    CHECK(peers.two->wait_for_log("TTL was exhausted"));
}

namespace {

// SHOW PEER_POOLS' counts for `peer`: cl_active_cancel_req, cl_waiting_cancel_req,
// sv_active_cancel, sv_login; empty if the peer has no row.
std::vector<long long> peer_pool(Conn& admin, int peer) {
    auto shown = admin.exec("SHOW PEER_POOLS");
    if (!shown.ok()) return {};
    auto row = find_row(shown, "peer_id", std::to_string(peer));
    if (!row) return {};
    return {cell_int(*row, "cl_active_cancel_req"), cell_int(*row, "cl_waiting_cancel_req"),
            cell_int(*row, "sv_active_cancel"), cell_int(*row, "sv_login")};
}

}  // namespace

TEST_CASE(
    "cancel requests to a peer: at most its pool_size in flight, the rest queued, unsent ones "
    "dropped after cancel_wait_timeout; SHOW PEER_POOLS counts them") {
    SilentListener silent(0);  // a peer that never answers
    const int port = free_port();
    // One worker, so that the counts are exact: with several, how the cancel connections spread
    // over the workers' sockets decides each one's share of the pool_size (PeerCancels::limit,
    // unit-tested).
    auto config = pool_config("transaction", 2,
                              {{"peer_id", "1"},
                               {"listen_port", std::to_string(port)},
                               {"cancel_wait_timeout", "3"},
                               {"workers", "1"}});
    // Peer 3 listens nowhere: forwarding to it fails at once.
    config.peers = {peer_line(1, port), peer_line(2, silent.port()) + " pool_size=3",
                    peer_line(3, free_port())};
    Pgtether pooler(config);
    Conn admin = console(pooler);
    auto shown = admin.exec("SHOW PEER_POOLS");
    PGT_REQUIRE_OK(shown);
    CHECK(named_rows(shown).size() == 2);  // peers 2 and 3; this process is peer 1
    CHECK_FALSE(find_row(shown, "peer_id", "1"));
    const std::vector<long long> none{0, 0, 0, 0};
    CHECK(peer_pool(admin, 2) == none);
    CHECK(peer_pool(admin, 3) == none);

    // Keys of peers 2 and 3 (the peer id in bytes 1 and 2 of the key, a TTL of 3).
    auto key_of = [](std::uint32_t peer) {
        return KeyData{static_cast<std::int32_t>((0x12u << 24) | (peer << 16)), 0x3};
    };
    for (int i = 0; i < 5; ++i)
        send_cancel("127.0.0.1", port, key_of(2));
    send_cancel("127.0.0.1", port, key_of(3));
    // The silent peer's accept queue takes one connection: that request is sent and awaits the
    // peer's close (active). Two more are in flight (pool_size = 3) and hang connecting
    // (sv_login); the last two are queued. All but the sent one wait.
    const std::vector<long long> capped{1, 4, 1, 2};
    CHECK(eventually([&] { return peer_pool(admin, 2) == capped; }));
    CHECK(pooler.wait_for_log("cannot forward a cancel request to peer 3"));
    CHECK(peer_pool(admin, 3) == none);
    // After cancel_wait_timeout every request is given up: those not sent, and the sent one,
    // whose peer is still there but never closes (issue 27: it used to stay until the peer went
    // away, and with it the peer's slot).
    CHECK(eventually([&] { return peer_pool(admin, 2) == none; }, 10s));
    // The failures of one peer within the report interval make one line, with the reason of
    // whichever forwarder the tick ended first: "not forwarded within cancel_wait_timeout" (a
    // connecting one) or "did not close the connection within cancel_wait_timeout" (the sent
    // one). Queued requests dropped by the tick have a line of their own with the first reason.
    CHECK(pooler.wait_for_log("within cancel_wait_timeout"));
    CHECK(count_of(pooler.log(), "cannot forward a cancel request to peer 2") == 1);
}

TEST_CASE(
    "cancel requests for peers: the waiting ones bounded by max_client_conn, and floods of "
    "them (full queue, unknown peer, TTL used up) logged once per interval") {
    SilentListener silent(0);  // a peer that never answers
    const int port = free_port();
    auto config = pool_config("transaction", 2,
                              {{"peer_id", "1"},
                               {"listen_port", std::to_string(port)},
                               {"cancel_wait_timeout", "60"},
                               {"max_client_conn", "4"},
                               {"workers", "1"}});
    config.peers = {peer_line(1, port), peer_line(2, silent.port()) + " pool_size=1"};
    Pgtether pooler(config);
    Conn admin = console(pooler);
    auto key_of = [](std::uint32_t peer) {
        return KeyData{static_cast<std::int32_t>((0x12u << 24) | (peer << 16)), 0x3};
    };

    // One is sent (the silent peer's accept queue takes it) and holds the pool_size of 1; four
    // wait (max_client_conn = 4 with one worker); the other eight are dropped, with one line.
    for (int i = 0; i < 13; ++i)
        send_cancel("127.0.0.1", port, key_of(2));
    const std::vector<long long> bounded{1, 4, 1, 0};
    CHECK(eventually([&] { return peer_pool(admin, 2) == bounded; }));
    CHECK(
        pooler.wait_for_log("dropped a cancel request for peer 2: 4 cancel requests already "
                            "wait for a turn"));
    CHECK(count_of(pooler.log(), "dropped a cancel request for peer 2") == 1);

    // 200 requests for a peer that is not configured, 50 whose TTL is used up: a line each at
    // first, then at most one per 10 s (the loop takes well under that; allow for a slow host).
    const std::int32_t unknown_peer = static_cast<std::int32_t>((0x12u << 24) | (7u << 16));
    for (int i = 0; i < 200; ++i)
        send_cancel("127.0.0.1", port, {unknown_peer, 0x3});
    for (int i = 0; i < 50; ++i)
        send_cancel("127.0.0.1", port, {unknown_peer, 0x0});
    CHECK(pooler.wait_for_log("could not find peer 7 to forward cancel request to"));
    CHECK(pooler.wait_for_log("failed to forward cancel request because its TTL was exhausted"));
    const std::string log = pooler.log();
    CHECK(count_of(log, "could not find peer 7") >= 1);
    CHECK(count_of(log, "could not find peer 7") <= 2);
    CHECK(count_of(log, "TTL was exhausted") <= 2);
    // pgtether is still serving.
    Conn client = Conn::must(pooler.conninfo());
    CHECK(scalar(client, "SELECT 'still serving'") == "still serving");
}

namespace {

// haproxy (Debian's package, installed by scripts/lib/deps.sh) in TCP mode in front of two
// processes, round robin: consecutive connections alternate between them.
class Haproxy {
  public:
    Haproxy(int port1, int port2) : dir_("pgt-haproxy", TestEnv::get().tmp_dir) {
        port_ = free_port();
        std::string cfg =
            "global\n"
            "    maxconn 200\n"
            "defaults\n"
            "    mode tcp\n"
            "    timeout connect 5s\n"
            "    timeout client 5m\n"
            "    timeout server 5m\n"
            "listen pgtether\n"
            "    bind 127.0.0.1:" +
            std::to_string(port_) +
            "\n"
            "    balance roundrobin\n"
            "    server one 127.0.0.1:" +
            std::to_string(port1) +
            "\n"
            "    server two 127.0.0.1:" +
            std::to_string(port2) + "\n";
        std::string path = dir_.write_file("haproxy.cfg", cfg);
        ChildProcess::Options run;
        run.argv = {binary(), "-db", "-f", path};
        run.log_path = dir_.path() + "/haproxy.log";
        process_ = std::make_unique<ChildProcess>(run);
        REQUIRE_MESSAGE(eventually([&] { return port_accepts("127.0.0.1", port_); }, 10s),
                        read_file(run.log_path));
    }
    static std::string binary() {
        for (const char* path : {"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"}) {
            if (::access(path, X_OK) == 0) return path;
        }
        return "";
    }
    [[nodiscard]] int port() const { return port_; }

  private:
    TempDir dir_;
    int port_ = 0;
    std::unique_ptr<ChildProcess> process_;
};

}  // namespace

TEST_CASE(
    "peering behind haproxy: libpq's cancel lands on the other instance and cancels the "
    "query") {
    if (Haproxy::binary().empty()) {
        MESSAGE("haproxy is not installed (scripts/lib/deps.sh installs it): skipped");
        return;
    }
    PeerPair peers;
    Haproxy balancer(peers.port1, peers.port2);
    const TestEnv& env = TestEnv::get();
    // Round robin: libpq's CancelRequests (new connections through the balancer) alternate
    // between the instances; which one comes first depends on the connections haproxy forwarded
    // before (its readiness probe included). Each cancel must stop the query, and within two
    // rounds one lands on the instance that does not own the key and is forwarded.
    Conn client =
        Conn::must(make_conninfo("127.0.0.1", balancer.port(), env.superuser, env.database));
    const int owner = key_peer(client.backend_pid());
    REQUIRE((owner == 1 || owner == 2));
    const int other = 3 - owner;
    const std::string forwarded = "forwarding cancel request to peer " + std::to_string(owner);

    bool seen_forward = false;
    for (int round = 0; round < 3 && !seen_forward; ++round) {
        CAPTURE(round);
        const std::string sql =
            "SELECT pg_sleep(60) /* haproxy round " + std::to_string(round) + " */";
        send_query(client, sql);
        REQUIRE(eventually([&] { return query_running(sql); }));
        PGcancel* cancel = PQgetCancel(client.raw());
        REQUIRE(cancel != nullptr);
        char errbuf[256] = {};
        CHECK_MESSAGE(PQcancel(cancel, errbuf, sizeof errbuf) == 1, errbuf);
        PQfreeCancel(cancel);
        auto result = wait_result(client, 20s);
        REQUIRE(result);
        CHECK(result->sqlstate == "57014");
        seen_forward = peers.by_id(other).wait_for_log(forwarded, 2s);
    }
    CHECK_MESSAGE(seen_forward, peers.by_id(other).log());
    CHECK(scalar(client, "SELECT 'still here'") == "still here");
}

TEST_CASE("session advisory locks stay exclusive across two instances in front of one database") {
    // Two independent instances (no peering needed): locks live in PostgreSQL.
    Pgtether one(pool_config("transaction", 2));
    Pgtether two(pool_config("transaction", 2));
    const long long key = 7'160'016;
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    std::atomic<int> entries{0};
    std::atomic<int> failures{0};
    auto worker = [&](const Pgtether& pooler) {
        Conn conn = Conn::must(pooler.conninfo());
        for (int i = 0; i < 15; ++i) {
            auto locked = conn.exec("SELECT pg_advisory_lock(" + std::to_string(key) + ")");
            if (!locked.ok()) {
                ++failures;
                continue;
            }
            if (++inside > 1) ++overlaps;
            ++entries;
            // Transactions in between: under transaction pooling these could land on other
            // backends, but the tether keeps this client on the lock holder.
            conn.exec("SELECT pg_sleep(0.01)");
            conn.exec("SELECT 1");
            --inside;
            auto unlocked = conn.exec("SELECT pg_advisory_unlock(" + std::to_string(key) + ")");
            if (!unlocked.ok() || unlocked.value() != "t") ++failures;
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
        threads.emplace_back(worker, std::cref(one));
        threads.emplace_back(worker, std::cref(two));
    }
    for (auto& t : threads)
        t.join();
    CHECK(failures == 0);
    CHECK(overlaps == 0);
    CHECK(entries == 6 * 15);
    CHECK(advisory_locks_held(key) == 0);
}

namespace {

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    return text;
}

// A shipped ini file made runnable here: its container paths moved into `dir`, the container
// addresses and ports replaced by local ones.
std::string localized(const std::string& text, const TempDir& dir, int port, int metrics_port,
                      int peer_port1, int peer_port2) {
    const auto& env = TestEnv::get();
    std::string out = replace_all(text, "/etc/pgtether/secret", dir.path());
    out = replace_all(out, "/etc/pgtether", dir.path());
    out = replace_all(out, "/var/run/pgtether", dir.path());
    out = replace_all(out, "host=postgres.default.svc.cluster.local port=5432",
                      "host=" + env.pg_host + " port=" + std::to_string(env.pg_port));
    out = replace_all(out, "host=postgres port=5432",
                      "host=" + env.pg_host + " port=" + std::to_string(env.pg_port));
    out = replace_all(out, "host=pgtether1 port=6432",
                      "host=127.0.0.1 port=" + std::to_string(peer_port1));
    out = replace_all(out, "host=pgtether2 port=6432",
                      "host=127.0.0.1 port=" + std::to_string(peer_port2));
    out = replace_all(out, "listen_addr = 0.0.0.0", "listen_addr = 127.0.0.1");
    out = replace_all(out, "metrics_listen_addr = 0.0.0.0", "metrics_listen_addr = 127.0.0.1");
    out = replace_all(out, "listen_port = 6432", "listen_port = " + std::to_string(port));
    out = replace_all(out, "metrics_listen_port = 9127",
                      "metrics_listen_port = " + std::to_string(metrics_port));
    return out;
}

// The pgtether.ini embedded in docker/k8s/configmap.yaml (the block under `pgtether.ini: |`).
std::string configmap_ini(const std::string& yaml) {
    std::string out;
    auto at = yaml.find("pgtether.ini: |\n");
    REQUIRE(at != std::string::npos);
    std::size_t line = at + std::string("pgtether.ini: |\n").size();
    while (line < yaml.size()) {
        auto end = yaml.find('\n', line);
        std::string text = yaml.substr(line, end - line);
        if (!text.empty() && text.rfind("    ", 0) != 0) break;
        out += (text.size() >= 4 ? text.substr(4) : std::string()) + "\n";
        if (end == std::string::npos) break;
        line = end + 1;
    }
    return out;
}

std::unique_ptr<ChildProcess> start_shipped(const TempDir& dir, const std::string& ini, int port) {
    ChildProcess::Options run;
    run.argv = {TestEnv::get().pgtether_bin, "-v", dir.path() + "/" + ini};
    run.log_path = dir.path() + "/pgtether.log";
    run.as_daemon_user = true;
    auto process = std::make_unique<ChildProcess>(run);
    REQUIRE_MESSAGE(eventually([&] { return port_accepts("127.0.0.1", port); }, 10s),
                    read_file(run.log_path));
    return process;
}

}  // namespace

TEST_CASE("the shipped docker/ and docker/k8s configurations start, peer and serve") {
    const std::string source = std::string(PGT_SOURCE_DIR) + "/docker";
    const auto& env = TestEnv::get();
    const std::string userlist = read_file(source + "/userlist.txt");
    REQUIRE_FALSE(userlist.empty());
    const int port1 = free_port();
    const int port2 = free_port();
    // compose.yaml's two instances: pgtether.ini included by pgtether-1.ini / -2.ini.
    std::vector<std::unique_ptr<TempDir>> dirs;
    std::vector<std::unique_ptr<ChildProcess>> processes;
    for (int i = 1; i <= 2; ++i) {
        auto dir = std::make_unique<TempDir>("pgt-compose", env.tmp_dir);
        const int port = i == 1 ? port1 : port2;
        const int metrics = free_port();
        dir->write_file("userlist.txt", userlist);
        dir->write_file("pgtether.ini", localized(read_file(source + "/pgtether.ini"), *dir, port,
                                                  metrics, port1, port2));
        std::string own = "pgtether-" + std::to_string(i) + ".ini";
        dir->write_file(own, localized(read_file(source + "/" + own), *dir, port, metrics, port1,
                                       port2));
        processes.push_back(start_shipped(*dir, own, port));
        // The client port accepting says the sockets are bound, not that the loop is answering
        // yet (on a loaded host one GET waiting 5 s once came back empty): what a readiness
        // probe does, ask again.
        HttpReply reply;
        CHECK_MESSAGE(eventually(
                          [&] {
                              reply = http_get("127.0.0.1", metrics, "/metrics");
                              return reply.status == 200;
                          },
                          20s),
                      read_file(dir->path() + "/pgtether.log"));
        CHECK(reply.body.find("pgtether_") != std::string::npos);
        dirs.push_back(std::move(dir));
    }
    // A client logs in with the userlist's password (SCRAM); its key names instance 1, and
    // instance 2 knows its peer.
    Conn client = Conn::must(make_conninfo("127.0.0.1", port1, "postgres", env.database, "postgres"));
    CHECK(key_peer(client.backend_pid()) == 1);
    Conn admin(make_conninfo("127.0.0.1", port2, "postgres", "pgbouncer", "postgres"));
    REQUIRE_MESSAGE(admin.ok(), admin.error());
    auto peers = admin.exec("SHOW PEERS");
    PGT_CHECK_OK(peers);
    CHECK(named_rows(peers).size() == 2);
    auto config = admin.exec("SHOW CONFIG");
    auto peer_id = find_row(config, "key", "peer_id");
    REQUIRE(peer_id);
    CHECK(cell(*peer_id, "value") == "2");
    CHECK(scalar(client, "SELECT 'through compose instance 1'") == "through compose instance 1");
    processes.clear();
    dirs.clear();

    // docker/k8s/configmap.yaml's pgtether.ini with secret.yaml's userlist.
    TempDir k8s("pgt-k8s", env.tmp_dir);
    const int port = free_port();
    const int metrics = free_port();
    k8s.write_file("userlist.txt", userlist);
    k8s.write_file("pgtether.ini",
                   localized(configmap_ini(read_file(source + "/k8s/configmap.yaml")), k8s, port,
                             metrics, 0, 0));
    auto pod = start_shipped(k8s, "pgtether.ini", port);
    // The Deployment's probes: liveness /healthz, readiness /readyz, on the metrics port.
    // start_shipped waits for the client port; the metrics listener of a worker may answer a
    // moment later, so /healthz too is polled (a liveness probe has its initialDelaySeconds).
    CHECK(eventually([&] { return http_get("127.0.0.1", metrics, "/healthz").status == 200; }, 20s));
    CHECK(eventually([&] { return http_get("127.0.0.1", metrics, "/readyz").status == 200; }, 10s));
    Conn app = Conn::must(make_conninfo("127.0.0.1", port, "postgres", env.database, "postgres"));
    CHECK(scalar(app, "SELECT 1") == "1");
    // The preStop hook's login: user pgbouncer over the Unix socket, as pgtether's own OS user
    // (test_compat covers that login; here the socket is where the hook looks for it).
    CHECK(::access((k8s.path() + "/.s.PGSQL." + std::to_string(port)).c_str(), F_OK) == 0);
}
