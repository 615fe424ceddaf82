// `workers = 2`: two event loops on two threads in one pgtether (docs/architecture.md, "Workers").
// Pool limits stay limits of the process however clients spread over the workers; a client gets
// a backend that the other worker holds idle; a cancel, PAUSE/RESUME, RELOAD and SHOW reach every
// worker. Which worker a client is on: worker 0 owns the Unix socket; over TCP the worker whose
// loop accepts first from the shared listening socket (with so_reuseport: the kernel picks), and
// SHOW CLIENTS' id says which (worker i of N hands out i+1, i+1+N, ...).
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

constexpr int kWorkers = 2;

PoolerConfig two_workers(const std::string& role, int pool_size,
                         std::map<std::string, std::string> extra = {}) {
    extra.emplace("workers", std::to_string(kWorkers));
    extra.emplace("query_wait_timeout", "60");
    auto config = pool_config("transaction", pool_size, extra);
    // The role logs in to PostgreSQL without a password (as every non-auth test role).
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    return config;
}

Result must_show(Conn& admin, const std::string& what) {
    auto r = admin.exec("SHOW " + what);
    REQUIRE_MESSAGE(r.ok(), what << ": " << r.describe());
    return r;
}

// The worker serving the client whose application_name is `app`.
int worker_of(Conn& admin, const std::string& app) {
    auto row = find_row(must_show(admin, "CLIENTS"), "application_name", app);
    REQUIRE_MESSAGE(row.has_value(), "no client with application_name " << app);
    return static_cast<int>((cell_int(*row, "id") - 1) % kWorkers);
}

std::string app_param(const std::string& app) { return "application_name=" + app; }

// A client on worker 0: through the Unix socket, which only worker 0 listens on.
Conn on_worker_0(const Pgtether& pooler, const std::string& role, const std::string& app) {
    return Conn::must(pooler.unix_conninfo(role, "", app_param(app)));
}

// A client on worker 1: TCP connections until the kernel hands one to worker 1.
Conn on_worker_1(const Pgtether& pooler, Conn& admin, const std::string& role,
                 const std::string& app) {
    for (int attempt = 0; attempt < 64; ++attempt) {
        Conn conn = Conn::must(pooler.conninfo(role, "", "", app_param(app)));
        if (worker_of(admin, app) == 1) return conn;
    }
    FAIL("64 TCP connections all went to worker 0");
    return Conn::must(pooler.conninfo(role));
}

// A CancelRequest through the Unix socket (worker 0's).
void cancel_through_unix_socket(const Pgtether& pooler, int pid, int key) {
    const std::string path = pooler.dir() + "/.s.PGSQL." + std::to_string(pooler.port());
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const std::string packet = wire::cancel_request(pid, key);
    CHECK(::write(fd, packet.data(), packet.size()) == static_cast<ssize_t>(packet.size()));
    char byte = 0;
    CHECK(::read(fd, &byte, 1) == 0);  // no reply: the pooler closes
    ::close(fd);
}

}  // namespace

TEST_CASE("pool limits are the process's: two workers never hold more than default_pool_size") {
    const std::string role = private_role("pgt_workers_limit");
    REQUIRE(settled(role));
    Pgtether pooler(two_workers(role, 3));
    Conn admin = console(pooler);
    REQUIRE_MESSAGE(admin.ok(), admin.error());

    constexpr int kClients = 12;
    std::vector<Conn> clients;
    for (int i = 0; i < kClients; ++i) {
        clients.push_back(
            Conn::must(pooler.conninfo(role, "", "", app_param("limit" + std::to_string(i)))));
    }
    clients.push_back(on_worker_0(pooler, role, "limit-unix"));
    clients.push_back(on_worker_1(pooler, admin, role, "limit-tcp1"));
    int on_each[kWorkers] = {};
    for (int i = 0; i < kClients; ++i) ++on_each[worker_of(admin, "limit" + std::to_string(i))];
    MESSAGE("clients on worker 0: " << on_each[0] << ", on worker 1: " << on_each[1]);

    // Every client runs three short transactions at once; the pool has three backends.
    for (auto& c : clients) {
        send_query(c, "SELECT pg_sleep(0.2); SELECT pg_sleep(0.2); SELECT pg_sleep(0.2)");
    }
    int most = 0;
    int most_in_show = 0;
    auto deadline = std::chrono::steady_clock::now() + 60s;
    std::size_t done = 0;
    std::vector<bool> finished(clients.size(), false);
    while (done < clients.size() && std::chrono::steady_clock::now() < deadline) {
        most = std::max(most, backends_of(role));
        auto pools = must_show(admin, "POOLS");
        for (const auto& row : named_rows(pools)) {
            if (row.at("user") != std::optional<std::string>(role)) continue;
            const long long servers = cell_int(row, "sv_active") + cell_int(row, "sv_idle") +
                                      cell_int(row, "sv_used") + cell_int(row, "sv_tested") +
                                      cell_int(row, "sv_login");
            most_in_show = std::max(most_in_show, static_cast<int>(servers));
        }
        for (std::size_t i = 0; i < clients.size(); ++i) {
            if (finished[i]) continue;
            if (auto r = wait_result(clients[i], 10ms)) {
                CHECK_MESSAGE(r->ok(), r->describe());
                finished[i] = true;
                ++done;
            }
        }
    }
    CHECK(done == clients.size());
    MESSAGE("most backends seen: " << most << "; most servers in SHOW POOLS: " << most_in_show);
    CHECK(most <= 3);
    CHECK(most_in_show <= 3);
    CHECK(most_in_show >= 1);
}

TEST_CASE("a client gets the backend another worker holds idle, within a server login") {
    const std::string role = private_role("pgt_workers_lend");
    REQUIRE(settled(role));
    Pgtether pooler(two_workers(role, 1));
    Conn admin = console(pooler);
    Conn first = on_worker_0(pooler, role, "lend-a");
    PGT_REQUIRE_OK(first.exec("SELECT 1"));
    // Worker 0 holds the pool's only backend, idle.
    REQUIRE(eventually([&] { return backends_of(role) == 1; }));
    Conn second = on_worker_1(pooler, admin, role, "lend-b");
    const auto started = std::chrono::steady_clock::now();
    auto r = second.exec("SELECT current_user");
    const auto waited = std::chrono::steady_clock::now() - started;
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == role);
    MESSAGE("worker 1's client waited "
            << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
    CHECK(waited < 10s);  // the bound is a janitor tick and a login; generous for a loaded host
    CHECK(pooler.wait_for_log("lent to another worker"));
    CHECK(backends_of(role) <= 1);
    // And back: worker 0's client gets it again.
    PGT_REQUIRE_OK(first.exec("SELECT 2"));
    CHECK(backends_of(role) <= 1);
}

TEST_CASE("a cancel arriving on one worker stops the query of a client on the other") {
    const std::string role = private_role("pgt_workers_cancel");
    Pgtether pooler(two_workers(role, 2));
    Conn admin = console(pooler);
    // A raw client (its cancel key is in its greeting) that the kernel gave to worker 1; the
    // cancel then goes through the Unix socket, which only worker 0 listens on.
    int round = 0;
    for (; round < 64; ++round) {
        const std::string app = "cancel" + std::to_string(round);
        RawConn client(pooler.host(), pooler.port(), 30s);
        REQUIRE(client.send(wire::startup({{"user", role},
                                           {"database", TestEnv::get().database},
                                           {"application_name", app}})));
        auto greeting = client.read_until_ready_or_error(10s);
        const bool logged_in = !greeting.empty() && greeting.back().type == 'Z';
        REQUIRE_MESSAGE(logged_in, wire::describe(greeting));
        auto key = wire::backend_key_data(greeting);
        REQUIRE(key.has_value());
        if (worker_of(admin, app) != 1) continue;
        const std::string sql = "SELECT pg_sleep(60) /* " + app + " */";
        REQUIRE(client.send(wire::query(sql)));
        REQUIRE(eventually([&] {
            return direct_scalar("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                 "AND query = '" + sql + "'") == "1";
        }));
        cancel_through_unix_socket(pooler, key->pid, key->key);
        auto reply = client.read_until_ready_or_error(20s);
        CHECK_MESSAGE(wire::first_error_sqlstate(reply) == std::optional<std::string>("57014"),
                      wire::describe(reply));
        break;
    }
    CHECK(round < 64);
}

TEST_CASE("SHOW POOLS, CLIENTS and SERVERS count and list the clients and servers of both workers") {
    const std::string role = private_role("pgt_workers_show");
    Pgtether pooler(two_workers(role, 4));
    Conn admin = console(pooler);
    Conn a = on_worker_0(pooler, role, "show-a");
    Conn b = on_worker_1(pooler, admin, role, "show-b");
    // Each holds a backend in an open transaction: one server linked on each worker.
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    PGT_REQUIRE_OK(b.exec("BEGIN"));
    PGT_REQUIRE_OK(b.exec("SELECT 1"));

    auto pools = must_show(admin, "POOLS");
    auto pool = find_row(pools, "user", role);
    REQUIRE(pool.has_value());
    CHECK(cell_int(*pool, "cl_active") == 2);
    CHECK(cell_int(*pool, "sv_active") == 2);
    int rows_of_role = 0;
    for (const auto& row : named_rows(pools)) {
        if (row.at("user") == std::optional<std::string>(role)) ++rows_of_role;
    }
    CHECK(rows_of_role == 1);  // one row for the pool, not one per worker

    auto clients = must_show(admin, "CLIENTS");
    CHECK(find_row(clients, "application_name", "show-a").has_value());
    CHECK(find_row(clients, "application_name", "show-b").has_value());
    int servers_of_role = 0;
    for (const auto& row : named_rows(must_show(admin, "SERVERS"))) {
        if (row.at("user") == std::optional<std::string>(role)) ++servers_of_role;
    }
    CHECK(servers_of_role == 2);
    // SHOW DATABASES' current_connections counts the process's servers.
    // The metrics endpoint's figures are the process's too.
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    PGT_REQUIRE_OK(b.exec("COMMIT"));
}

TEST_CASE("PAUSE and RESUME on the console hold and release the clients of both workers") {
    const std::string role = private_role("pgt_workers_pause");
    Pgtether pooler(two_workers(role, 2));
    Conn admin = console(pooler);
    Conn a = on_worker_0(pooler, role, "pause-a");
    Conn b = on_worker_1(pooler, admin, role, "pause-b");
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    PGT_REQUIRE_OK(b.exec("SELECT 1"));
    // PAUSE returns once every server of both workers is closed.
    PGT_REQUIRE_OK(admin.exec("PAUSE"));
    CHECK(eventually([&] { return backends_of(role) == 0; }));
    send_query(a, "SELECT 'a'");
    send_query(b, "SELECT 'b'");
    CHECK_FALSE(wait_result(a, 1500ms).has_value());
    CHECK_FALSE(wait_result(b, 100ms).has_value());
    PGT_REQUIRE_OK(admin.exec("RESUME"));
    auto ra = wait_result(a, 20s);
    auto rb = wait_result(b, 20s);
    REQUIRE(ra.has_value());
    REQUIRE(rb.has_value());
    CHECK(ra->value() == "a");
    CHECK(rb->value() == "b");
}

TEST_CASE("KILL_CLIENT answers once the client is gone, whichever worker holds it") {
    const std::string role = private_role("pgt_workers_kill");
    Pgtether pooler(two_workers(role, 2));
    Conn admin = console(pooler);  // TCP: either worker; one of the victims is the other's
    Conn victims[] = {on_worker_0(pooler, role, "kill-0"),
                      on_worker_1(pooler, admin, role, "kill-1")};
    const char* apps[] = {"kill-0", "kill-1"};
    for (int w = 0; w < kWorkers; ++w) {
        CAPTURE(apps[w]);
        PGT_REQUIRE_OK(victims[w].exec("SELECT 1"));
        auto row = find_row(must_show(admin, "CLIENTS"), "application_name", apps[w]);
        REQUIRE(row.has_value());
        PGT_REQUIRE_OK(admin.exec("KILL_CLIENT " + std::to_string(cell_int(*row, "id"))));
        // Right after the answer the connection is closed (57P01), as with PgBouncer: no query
        // of the victim's is served any more, on the console's worker or the other.
        auto after = victims[w].exec("SELECT 1");
        CHECK_FALSE(after.ok());
        CHECK(PQstatus(victims[w].raw()) == CONNECTION_BAD);
    }
}

TEST_CASE("RELOAD gives both workers the new configuration; workers itself needs a restart") {
    const std::string role = private_role("pgt_workers_reload");
    auto config = two_workers(role, 1);
    Pgtether pooler(config);
    Conn admin = console(pooler);
    Conn a = on_worker_1(pooler, admin, role, "reload-a");
    Conn b = on_worker_1(pooler, admin, role, "reload-b");
    // pool_size 1: two transactions of worker 1's clients cannot both hold a backend.
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    send_query(b, "SELECT 'b'");
    CHECK_FALSE(wait_result(b, 1000ms).has_value());
    PGT_REQUIRE_OK(a.exec("COMMIT"));
    REQUIRE(wait_result(b, 20s).has_value());

    config.settings["default_pool_size"] = "2";
    config.settings["workers"] = "3";
    pooler.reload(config);
    CHECK(pooler.wait_for_log("workers: cannot be changed while pgtether runs"));
    CHECK(pooler.wait_for_log("configuration reloaded"));
    // Now both fit, on the worker that did not handle the SIGHUP's reload itself.
    REQUIRE(eventually([&] {
        PGT_REQUIRE_OK(a.exec("BEGIN"));
        PGT_REQUIRE_OK(a.exec("SELECT 1"));
        send_query(b, "SELECT 'b'");
        auto r = wait_result(b, 500ms);
        PGT_REQUIRE_OK(a.exec("COMMIT"));
        if (!r) REQUIRE(wait_result(b, 20s).has_value());
        return r.has_value();
    }));
    auto workers = find_row(must_show(admin, "CONFIG"), "key", "workers");
    REQUIRE(workers.has_value());
    CHECK(cell(*workers, "value") == "2");
}

TEST_CASE("clients logging in on both workers before either knows the server's greeting are all served") {
    // A pool learns the server's greeting (its ParameterStatus values) from its first server, or
    // from the same pool on the other worker when a later client looks. Clients that logged in
    // before that wait for it, and every way of learning it must let them all in: a regression
    // left the earlier ones waiting for good once a later client learned it from the other worker.
    const std::string role = private_role("pgt_workers_greeting");
    REQUIRE(settled(role));
    constexpr int kRounds = 3;
    constexpr int kClients = 60;
    for (int round = 0; round < kRounds; ++round) {
        CAPTURE(round);
        Pgtether pooler(two_workers(role, 2));
        std::atomic<int> served{0};
        Failures failures;
        std::vector<std::thread> threads;
        for (int i = 0; i < kClients; ++i) {
            threads.emplace_back([&, i] {
                Conn conn(pooler.conninfo(role, "", "", app_param("greet" + std::to_string(i))));
                if (!conn.ok()) {
                    failures.add("client " + std::to_string(i) + ": " + conn.error());
                    return;
                }
                auto r = conn.exec("SELECT 1");
                if (!r.ok()) {
                    failures.add("client " + std::to_string(i) + ": " + r.describe());
                    return;
                }
                ++served;
            });
        }
        for (auto& t : threads) t.join();
        CHECK_MESSAGE(failures.count() == 0, failures.text());
        CHECK(served == kClients);
    }
}

// Issue 27, item 8: workers > 1 used to set SO_REUSEPORT by itself, so a second process of the
// same uid could bind the port without error and take a share of the clients. Without
// so_reuseport the workers now share one listening socket, and the port stays ours.
TEST_CASE("workers = 2 without so_reuseport: one shared socket, a second instance cannot bind") {
    const auto& env = TestEnv::get();
    Pgtether pooler(two_workers(env.superuser, 2));
    Conn admin = console(pooler);
    // Both workers accept from the shared socket.
    Conn zero = on_worker_0(pooler, env.superuser, "w0");
    Conn one = on_worker_1(pooler, admin, env.superuser, "w1");
    CHECK(scalar(one, "SELECT 1") == "1");
    CHECK(scalar(zero, "SELECT 2") == "2");

    auto impostor = two_workers(env.superuser, 2, {{"listen_port", std::to_string(pooler.port())}});
    // The second instance fails in the middle of its start-up; it closes its loops before it
    // exits (Worker::close_for_exit), so under the sanitizers LeakSanitizer checks it too.
    std::string outcome;
    try {
        Pgtether second(impostor);
        // The port answers (the first one's), so the harness may see a start: it must exit.
        const bool exited = eventually([&] { return !second.running(); });
        outcome = (exited ? "" : "still running: ") + second.log();
    } catch (const std::runtime_error& e) {
        outcome = e.what();
    }
    CHECK_MESSAGE(outcome.find("cannot listen on 127.0.0.1:" + std::to_string(pooler.port()) +
                               ": address already in use") != std::string::npos,
                  "the second instance: " << outcome);
    // The first one still serves, on both workers.
    Conn later = Conn::must(pooler.conninfo());
    CHECK(scalar(later, "SELECT 3") == "3");
    CHECK(scalar(one, "SELECT 4") == "4");
}
