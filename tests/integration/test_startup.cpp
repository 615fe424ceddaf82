// Start-up, signals and the command line: conf/pgtether.ini with every documented setting turned
// on and a realistic production pgbouncer.ini start as they are; an invalid value or unknown key
// stops start-up with "FILE:LINE: KEY: ..." and a non-zero exit; -V and -h; -d with a pidfile
// daemonizes and SIGTERM stops it and removes the pidfile; SIGHUP reloads a changed pool size and
// keeps the old configuration when the new one is broken; PgBouncer 1.23's signals: SIGINT lets
// running transactions finish while new connections are refused (a second SIGINT cuts them
// off), SIGTERM serves the connected clients until they leave, SIGQUIT exits at once.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"
#include "tests/integration/support/tls_support.hpp"  // run_command

using namespace pgtether::itest;

namespace {

struct Exit {
    std::optional<int> status;  // wait status; nullopt = still running after the timeout
    std::string output;
};

// Runs pgtether with `args` to completion (as the daemon user, like the tests' poolers).
Exit run_pgtether(const std::vector<std::string>& args, const TempDir& dir,
                  const std::string& name, std::chrono::milliseconds timeout = 10s) {
    ChildProcess::Options options;
    options.argv = {TestEnv::get().pgtether_bin};
    for (const auto& a : args) options.argv.push_back(a);
    options.log_path = dir.path() + "/" + name + ".out";
    options.as_daemon_user = true;
    ChildProcess child(options);
    Exit result;
    result.status = child.wait_exit(timeout);
    if (!result.status) child.stop(2s);
    result.output = read_file(options.log_path);
    return result;
}

int exit_code(const Exit& e) {
    return e.status && WIFEXITED(*e.status) ? WEXITSTATUS(*e.status) : -1;
}

std::string database_line(const std::string& name) {
    const TestEnv& env = TestEnv::get();
    return name + " = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
           " dbname=" + env.database;
}

// conf/pgtether.ini with every commented-out "key = value" of [pgbouncer] turned on (they
// document the defaults), pointed at the test PostgreSQL and at our port and files.
std::string adapted_example_ini(const TempDir& dir, int port) {
    std::ifstream in(std::string(PGT_SOURCE_DIR) + "/conf/pgtether.ini");
    REQUIRE(in.good());
    std::ostringstream out;
    std::string line, section;
    std::regex commented_setting("^;([a-z_]+) =(.*)$");
    std::smatch m;
    while (std::getline(in, line)) {
        if (!line.empty() && line[0] == '[') section = line;
        if (section == "[databases]" && line.rfind("app =", 0) == 0) {
            line = database_line("app");
        } else if (section == "[pgbouncer]" && std::regex_match(line, m, commented_setting)) {
            line = m[1].str() + " =" + m[2].str();
        }
        if (section == "[pgbouncer]") {
            auto set = [&](const std::string& key, const std::string& value) {
                if (line.rfind(key + " =", 0) == 0) line = key + " = " + value;
            };
            set("listen_port", std::to_string(port));
            set("listen_addr", "127.0.0.1");
            set("unix_socket_dir", dir.path());
            set("auth_file", dir.path() + "/userlist.txt");
            set("logfile", dir.path() + "/example.log");
            set("pidfile", dir.path() + "/example.pid");
        }
        out << line << "\n";
    }
    return out.str();
}

}  // namespace

TEST_CASE("conf/pgtether.ini with every documented setting starts and serves md5 clients") {
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-startup", env.tmp_dir);
    const int port = free_port();
    const std::string ini = dir.write_file("pgtether.ini", adapted_example_ini(dir, port));
    // The example userlist plus a user of ours with a plain password.
    dir.write_file("userlist.txt", read_file(std::string(PGT_SOURCE_DIR) + "/conf/userlist.txt") +
                                       "\"" + env.superuser + "\" \"example-pw\"\n");
    ChildProcess::Options options;
    options.argv = {env.pgtether_bin, ini};
    options.log_path = dir.path() + "/stderr.log";
    options.as_daemon_user = true;
    ChildProcess daemon(options);
    REQUIRE_MESSAGE(eventually([&] { return port_accepts("127.0.0.1", port); }),
                    read_file(options.log_path));
    Conn conn(make_conninfo("127.0.0.1", port, env.superuser, "app", "example-pw"));
    REQUIRE_MESSAGE(conn.ok(), (conn.error() + "\n" + read_file(options.log_path)));
    CHECK(scalar(conn, "SELECT current_database()") == env.database);
    std::string log = read_file(dir.path() + "/example.log");
    CHECK(read_file(dir.path() + "/example.pid") == std::to_string(daemon.pid()) + "\n");
    Conn wrong(make_conninfo("127.0.0.1", port, env.superuser, "app", "wrong"));
    CHECK_FALSE(wrong.ok());
    // SIGTERM waits for the connected client (PgBouncer 1.23+), then exits on its own.
    REQUIRE(daemon.signal(SIGTERM));
    REQUIRE(eventually([&] { return read_file(options.log_path).find("got SIGTERM") !=
                                    std::string::npos; }, 5s));
    std::this_thread::sleep_for(300ms);
    CHECK(daemon.running());
    CHECK(scalar(conn, "SELECT 'still served'") == "still served");
    conn.close();
    auto status = daemon.wait_exit(10s);
    REQUIRE(status.has_value());
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
    CHECK(read_file(dir.path() + "/example.pid").empty());  // removed on exit
}

TEST_CASE("a realistic production pgbouncer.ini starts without edits") {
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-startup", env.tmp_dir);
    const int port = free_port();
    dir.write_file("databases.ini", "[databases]\n" + database_line("app") +
                                        " pool_size=5 connect_query='SELECT 1'\n" +
                                        database_line("reports") + " pool_mode=session\n" +
                                        database_line("*") + "\n");
    dir.write_file("userlist.txt", "\"" + env.superuser + "\" \"prod-pw\"\n\"stats\" \"\"\n");
    const std::string ini = dir.write_file(
        "pgbouncer.ini",
        ";; pgbouncer.ini as found on a production host\n"
        "%include " + dir.path() + "/databases.ini\n"
        "\n"
        "[users]\n" + env.superuser + " = max_user_connections=50\n"
        "\n"
        "[pgbouncer]\n"
        "logfile = " + dir.path() + "/pgbouncer.log\n"
        "pidfile = " + dir.path() + "/pgbouncer.pid\n"
        "listen_addr = 127.0.0.1\n"
        "listen_port = " + std::to_string(port) + "\n"
        "unix_socket_dir = " + dir.path() + "\n"
        "auth_type = md5\n"
        "auth_file = " + dir.path() + "/userlist.txt\n"
        "admin_users = " + env.superuser + "\n"
        "stats_users = stats, " + env.superuser + "\n"
        "pool_mode = transaction\n"
        "server_reset_query = DISCARD ALL\n"
        "ignore_startup_parameters = extra_float_digits, search_path\n"
        "max_client_conn = 500\n"
        "default_pool_size = 10\n"
        "min_pool_size = 1\n"
        "reserve_pool_size = 2\n"
        "reserve_pool_timeout = 3\n"
        "server_lifetime = 1800\n"
        "server_idle_timeout = 300\n"
        "server_connect_timeout = 5\n"
        "server_login_retry = 5\n"
        "query_wait_timeout = 60\n"
        "client_login_timeout = 30\n"
        "log_connections = 0\n"
        "log_disconnections = 0\n"
        "stats_period = 60\n"
        "tcp_keepalive = 1\n"
        "tcp_keepidle = 60\n"
        "application_name_add_host = 1\n"
        "server_tls_sslmode = prefer\n"
        "max_prepared_statements = 0\n"
        "dns_max_ttl = 30\n");
    ChildProcess::Options options;
    options.argv = {env.pgtether_bin, ini};
    options.log_path = dir.path() + "/stderr.log";
    options.as_daemon_user = true;
    ChildProcess daemon(options);
    REQUIRE_MESSAGE(eventually([&] { return port_accepts("127.0.0.1", port); }),
                    read_file(options.log_path));
    for (const char* db : {"app", "reports", env.database.c_str()}) {
        CAPTURE(db);
        Conn conn(make_conninfo("127.0.0.1", port, env.superuser, db, "prod-pw"));
        REQUIRE_MESSAGE(conn.ok(), conn.error());
        CHECK(scalar(conn, "SELECT current_database()") == env.database);
    }
    // Every setting of it is acted on (dns_max_ttl too: pgtether resolves at every connect,
    // within any cache bound). server_tls_sslmode = prefer asks the server for TLS and, as this
    // server has ssl = off, goes on in plaintext (the connections above).
    std::string log = read_file(dir.path() + "/pgbouncer.log");
    INFO(log);
    CHECK(read_file(ini).find("dns_max_ttl") != std::string::npos);
    // ignore_startup_parameters: a JDBC-style start-up with extra_float_digits is let in.
    RawConn raw("127.0.0.1", port);
    REQUIRE(raw.send(wire::startup(
        {{"user", env.superuser}, {"database", "app"}, {"extra_float_digits", "3"}})));
    auto reply = raw.read_message();
    REQUIRE(reply.has_value());
    CHECK(reply->type == 'R');  // asked for a password, not refused
}

TEST_CASE("an invalid value or unknown key: non-zero exit and FILE:LINE: KEY on stderr") {
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-startup", env.tmp_dir);
    struct Bad {
        std::string line;
        std::string key;
    };
    for (const Bad& bad : {Bad{"listen_port = 99999", "listen_port"},
                           Bad{"pool_mode = sometimes", "pool_mode"},
                           Bad{"server_idle_timeout = 10s", "server_idle_timeout"},
                           Bad{"default_pool_size = many", "default_pool_size"},
                           Bad{"no_such_setting = 1", "no_such_setting"}}) {
        CAPTURE(bad.line);
        const std::string ini = dir.write_file(
            "bad.ini", "[databases]\n" + database_line("app") +
                           "\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " +
                           std::to_string(free_port()) + "\n" + bad.line + "\n");
        Exit e = run_pgtether({ini}, dir, "bad-" + bad.key);
        INFO(e.output);
        CHECK(exit_code(e) != 0);
        CHECK(exit_code(e) != -1);
        CHECK(e.output.find(ini + ":7: " + bad.key + ": ") != std::string::npos);
    }
    // A missing file is reported too.
    Exit missing = run_pgtether({dir.path() + "/nope.ini"}, dir, "missing");
    CHECK(exit_code(missing) != 0);
    CHECK(missing.output.find("nope.ini") != std::string::npos);
}

TEST_CASE("-V, -h and bad command lines") {
    TempDir dir("pgt-startup", TestEnv::get().tmp_dir);
    Exit version = run_pgtether({"-V"}, dir, "version");
    CHECK(exit_code(version) == 0);
    CHECK(std::regex_search(version.output, std::regex("^pgtether [0-9]+\\.[0-9]+")));
    Exit help = run_pgtether({"-h"}, dir, "help");
    CHECK(exit_code(help) == 0);
    CHECK(help.output.find("Usage:") != std::string::npos);
    Exit none = run_pgtether({}, dir, "none");
    CHECK(exit_code(none) != 0);
    Exit unknown = run_pgtether({"-Z", "x.ini"}, dir, "unknown");
    CHECK(exit_code(unknown) != 0);
    CHECK(unknown.output.find("unknown option") != std::string::npos);
}

TEST_CASE("-d with a pidfile daemonizes; SIGTERM stops it and removes the pidfile") {
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-startup", env.tmp_dir);
    const int port = free_port();
    const std::string pidfile = dir.path() + "/daemon.pid";
    const std::string ini = dir.write_file(
        "daemon.ini", "[databases]\n" + database_line("app") +
                          "\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " +
                          std::to_string(port) + "\nunix_socket_dir = " + dir.path() +
                          "\nauth_type = trust\npidfile = " + pidfile + "\nlogfile = " +
                          dir.path() + "/daemon.log\n");
    Exit launcher = run_pgtether({"-d", ini}, dir, "daemon");
    CHECK(exit_code(launcher) == 0);  // the foreground process returns at once
    REQUIRE_MESSAGE(eventually([&] { return !read_file(pidfile).empty(); }),
                    (launcher.output + read_file(dir.path() + "/daemon.log")));
    const pid_t pid = std::stoi(read_file(pidfile));
    // Make sure it goes away even if a check below fails.
    struct Reaper {
        pid_t pid;
        ~Reaper() { kill(pid, SIGKILL); }
    } reaper{pid};
    CHECK(kill(pid, 0) == 0);
    REQUIRE(eventually([&] { return port_accepts("127.0.0.1", port); }));
    Conn conn = Conn::must(make_conninfo("127.0.0.1", port, env.superuser, "app"));
    CHECK(scalar(conn, "SELECT 'daemonized'") == "daemonized");
    conn.close();
    // Detached into a session of its own.
    CHECK(getsid(pid) != getsid(0));

    REQUIRE(kill(pid, SIGTERM) == 0);
    CHECK(eventually([&] { return kill(pid, 0) != 0; }, 15s));
    CHECK(access(pidfile.c_str(), F_OK) != 0);
    CHECK(read_file(dir.path() + "/daemon.log").find("shutdown complete") != std::string::npos);

    // -d without a pidfile is refused.
    const std::string no_pid = dir.write_file(
        "nopid.ini", "[databases]\n" + database_line("app") +
                         "\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nauth_type = trust\n"
                         "listen_port = " + std::to_string(free_port()) + "\n");
    Exit refused = run_pgtether({"-d", no_pid}, dir, "nopid");
    CHECK(exit_code(refused) != 0);
    CHECK(refused.output.find("pidfile") != std::string::npos);
}

TEST_CASE("SIGHUP: a changed pool size takes effect; a broken config keeps the old one") {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "1"}};
    Pgtether pooler(config);
    const std::string conninfo = pooler.conninfo();
    CHECK(second_transaction_waits(conninfo));

    config.settings["default_pool_size"] = "2";
    pooler.reload(config);
    REQUIRE(pooler.wait_for_log("configuration reloaded"));
    CHECK(two_transactions_fit(conninfo));

    // A broken file: the error is logged with file, line and key; the running config stays.
    std::ofstream(pooler.ini_path(), std::ios::app) << "default_pool_size = lots\n";
    pooler.reload();
    REQUIRE(pooler.wait_for_log("reload failed"));
    CHECK(pooler.log().find(pooler.ini_path() + ":") != std::string::npos);
    CHECK(pooler.log().find("default_pool_size") != std::string::npos);
    CHECK(pooler.running());
    CHECK(two_transactions_fit(conninfo));
    Conn conn = Conn::must(conninfo);
    CHECK(scalar(conn, "SELECT 'still serving'") == "still serving");
}

TEST_CASE("SIGINT: a running transaction may finish, new connections are refused, then exit") {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "2"}};
    Pgtether pooler(config);
    Conn in_tx = Conn::must(pooler.conninfo());
    Conn idle = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(in_tx.exec("BEGIN"));
    CHECK(scalar(in_tx, "SELECT 1") == "1");

    REQUIRE(kill(pooler.pid(), SIGINT) == 0);
    REQUIRE(pooler.wait_for_log("shutting down"));
    // New connections are refused.
    CHECK(eventually([&] { return !Conn(pooler.conninfo()).ok(); }, 3s));
    // The transaction carries on and commits.
    CHECK(scalar(in_tx, "SELECT 'finishing'") == "finishing");
    PGT_CHECK_OK(in_tx.exec("COMMIT"));
    // With no transaction left, pgtether exits on its own.
    CHECK(eventually([&] { return !pooler.running(); }, 10s));
    auto status = pooler.stop();
    REQUIRE(status.has_value());
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("SIGINT waits for a transaction that never ends; a second SIGINT cuts it off") {
    // PgBouncer 1.23+: SIGINT is SHUTDOWN WAIT_FOR_SERVERS (no time bound); a second SIGINT (or
    // SIGTERM) while shutting down is the fast exit.
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "1"}};
    Pgtether pooler(config);
    Conn stuck = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(stuck.exec("BEGIN"));
    REQUIRE(kill(pooler.pid(), SIGINT) == 0);
    REQUIRE(pooler.wait_for_log("got SIGINT, shutting down"));
    std::this_thread::sleep_for(1500ms);
    CHECK(pooler.running());
    CHECK(scalar(stuck, "SELECT 'still in it'") == "still in it");
    auto started = std::chrono::steady_clock::now();
    REQUIRE(kill(pooler.pid(), SIGINT) == 0);
    CHECK(pooler.wait_for_log("got SIGINT while shutting down, fast exit"));
    CHECK(eventually([&] { return !pooler.running(); }, 10s));
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    // The client was told (57P01 admin_shutdown) rather than just cut.
    Result r = first_error(stuck.exec_all("SELECT 1"));
    CHECK(r.is_error());
}

TEST_CASE("SIGTERM waits for every client to leave (PgBouncer 1.23+); SIGQUIT exits at once") {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "2"}};
    SUBCASE("SIGTERM: connected clients are served, new ones refused, exit when they leave") {
        Pgtether pooler(config);
        Conn idle = Conn::must(pooler.conninfo());
        Conn in_tx = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(in_tx.exec("BEGIN"));
        REQUIRE(kill(pooler.pid(), SIGTERM) == 0);
        REQUIRE(pooler.wait_for_log("got SIGTERM, shutting down, waiting for all clients"));
        CHECK(eventually([&] { return !Conn(pooler.conninfo()).ok(); }, 3s));
        std::this_thread::sleep_for(1500ms);
        CHECK(pooler.running());
        // Both keep their sessions: the transaction goes on, the idle client starts new ones.
        CHECK(scalar(in_tx, "SELECT 'in tx'") == "in tx");
        PGT_CHECK_OK(in_tx.exec("COMMIT"));
        CHECK(scalar(idle, "SELECT 'idle'") == "idle");
        CHECK(scalar(in_tx, "SELECT 'after commit'") == "after commit");
        idle.close();
        CHECK(pooler.running());
        in_tx.close();
        CHECK(eventually([&] { return !pooler.running(); }, 10s));
        auto status = pooler.stop();
        REQUIRE(status.has_value());
        CHECK(WIFEXITED(*status));
        CHECK(WEXITSTATUS(*status) == 0);
    }
    SUBCASE("SIGQUIT: every client is closed at once") {
        Pgtether pooler(config);
        Conn in_tx = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(in_tx.exec("BEGIN"));
        auto started = std::chrono::steady_clock::now();
        REQUIRE(kill(pooler.pid(), SIGQUIT) == 0);
        CHECK(pooler.wait_for_log("got SIGQUIT, fast exit"));
        CHECK(eventually([&] { return !pooler.running(); }, 10s));
        CHECK(std::chrono::steady_clock::now() - started < 5s);
        CHECK(first_error(in_tx.exec_all("SELECT 1")).is_error());
        auto status = pooler.stop();
        REQUIRE(status.has_value());
        CHECK(WIFEXITED(*status));
        CHECK(WEXITSTATUS(*status) == 0);
    }
}

TEST_CASE("--check: exit 0 or 1, every problem as FILE:LINE: KEY, and what a RELOAD would change") {
    TempDir dir("pgt-check", TestEnv::get().tmp_dir);
    const std::string included = dir.write_file("more.ini", "pool_mode = sometimes\n");
    const std::string bad = dir.write_file("bad.ini",
                                           "[pgbouncer]\n"               // 1
                                           "listen_port = 99999\n"       // 2
                                           "default_pool_size = many\n"  // 3
                                           "no_such_setting = 1\n"       // 4
                                           "%include " +
                                               included +
                                               "\n"                                    // 5
                                               "[databases]\n"                         // 6
                                               "app = host=127.0.0.1 colour=blue\n");  // 7
    Exit e = run_pgtether({"--check", bad}, dir, "check-bad");
    INFO(e.output);
    CHECK(exit_code(e) == 1);
    for (const std::string& expected :
         {bad + ":2: listen_port: ", bad + ":3: default_pool_size: ", bad + ":4: no_such_setting: ",
          included + ":1: pool_mode: ", bad + ":7: app: "}) {
        CHECK_MESSAGE(e.output.find(expected) != std::string::npos, expected);
    }
    CHECK(e.output.find("5 problems, the configuration is not valid") != std::string::npos);

    // Valid ini, but an auth_file that does not parse: a start would fail, so does the check.
    const std::string userlist = dir.write_file("users.txt", "\"bob\" \"secret\"\nnot a line\n");
    const std::string bad_users = dir.write_file(
        "bad-users.ini", "[pgbouncer]\nauth_type = md5\nauth_file = " + userlist + "\n");
    Exit users = run_pgtether({"--check", bad_users}, dir, "check-users");
    INFO(users.output);
    CHECK(exit_code(users) == 1);
    CHECK(users.output.find(userlist + ":2") != std::string::npos);

    // Valid: exit 0, and compared with the running file, the changes a RELOAD would make.
    const std::string running = dir.write_file(
        "running.ini",
        "[pgbouncer]\nauth_type = trust\nlisten_port = 6432\ndefault_pool_size = 20\n"
        "[databases]\napp = host=a password=old\n");
    const std::string next = dir.write_file(
        "next.ini",
        "[pgbouncer]\nauth_type = trust\nlisten_port = 6433\ndefault_pool_size = 40\n"
        "[databases]\napp = host=a password=new\nreports = host=b\n");
    Exit ok = run_pgtether({"--check", next, running}, dir, "check-ok");
    INFO(ok.output);
    CHECK(exit_code(ok) == 0);
    CHECK(ok.output.find("the configuration is valid") != std::string::npos);
    CHECK(ok.output.find("  default_pool_size: 20 -> 40\n") != std::string::npos);
    CHECK(ok.output.find("  listen_port: 6432 -> 6433 (needs a restart") != std::string::npos);
    CHECK(ok.output.find("  [databases] reports: added (host=b)\n") != std::string::npos);
    CHECK(ok.output.find("password changed") != std::string::npos);
    CHECK(ok.output.find("new") == std::string::npos);  // no password shown
    Exit same = run_pgtether({"--check", running, running}, dir, "check-same");
    CHECK(exit_code(same) == 0);
    CHECK(same.output.find("would change nothing") != std::string::npos);
    // A running file that does not load cannot be compared with.
    Exit against_bad = run_pgtether({"--check", running, bad}, dir, "check-against-bad");
    CHECK(exit_code(against_bad) == 1);
    CHECK(against_bad.output.find("cannot compare with it") != std::string::npos);
    // Nothing was started: no pidfile, no listener.
    Exit missing = run_pgtether({"--check", dir.path() + "/nope.ini"}, dir, "check-missing");
    CHECK(exit_code(missing) == 1);
    CHECK(missing.output.find("nope.ini: cannot read config file") != std::string::npos);
}

namespace {

// The receive and send buffer sizes (ss's skmem rb and tb) of the established TCP socket whose
// local port is `port`, as the kernel reports them.
std::pair<long, long> socket_buffers(int port) {
    const std::string out = run_command("ss -tmnH state established '( sport = :" +
                                        std::to_string(port) + " )'");
    std::smatch rb, tb;
    if (!std::regex_search(out, rb, std::regex("rb([0-9]+)")) ||
        !std::regex_search(out, tb, std::regex("tb([0-9]+)"))) {
        throw std::runtime_error("no socket on local port " + std::to_string(port) + ": " + out);
    }
    return {std::stol(rb[1]), std::stol(tb[1])};
}

}  // namespace

TEST_CASE("tcp_socket_buffer: the clients' and the servers' sockets get that buffer size") {
    // The kernel doubles the value it is given (socket(7)); left alone, the buffers start at
    // tcp_rmem's and tcp_wmem's defaults and are tuned from there, never at 2 x 40000.
    Pgtether pooler(pool_config("session", 1, {{"tcp_socket_buffer", "40000"}}));
    Conn conn = Conn::must(pooler.conninfo());
    const int server_side_port =
        std::stoi(scalar(conn, "SELECT client_port FROM pg_stat_activity "
                               "WHERE pid = pg_backend_pid()"));
    CHECK(socket_buffers(pooler.port()) == std::pair<long, long>{80000, 80000});
    CHECK(socket_buffers(server_side_port) == std::pair<long, long>{80000, 80000});

    // 0 (the default) leaves them to the kernel.
    Pgtether plain(pool_config("session", 1));
    Conn other = Conn::must(plain.conninfo());
    PGT_CHECK_OK(other.exec("SELECT 1"));
    CHECK(socket_buffers(plain.port()) != std::pair<long, long>{80000, 80000});
}

namespace {

// Whether process `pid` holds the server end of the loopback TCP connection from `client_port`
// to `listen_port`: the connection's socket inode (/proc/net/tcp; 0 while the kernel keeps it as
// a request not yet accepted) among the process's descriptors.
bool holds_connection(pid_t pid, int listen_port, int client_port) {
    std::ifstream tcp("/proc/net/tcp");
    std::string line;
    std::getline(tcp, line);  // the header
    std::string inode;
    while (std::getline(tcp, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
        fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
            timeout >> inode;
        auto port_of = [](const std::string& address) {
            return std::stoi(address.substr(address.find(':') + 1), nullptr, 16);
        };
        if (port_of(local) == listen_port && port_of(remote) == client_port) break;
        inode.clear();
    }
    if (inode.empty() || inode == "0") return false;
    const std::string target = "socket:[" + inode + "]";
    for (const auto& fd :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(fd.path(), ec).string() == target) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("tcp_defer_accept: a TCP client that says nothing is not taken in until it speaks") {
    // PgBouncer's default on Linux: TCP_DEFER_ACCEPT (1 s) on the TCP listeners, so a connection
    // that sends nothing stays with the kernel and holds no descriptor, client slot or login
    // timer of pgtether's; a client that speaks is served at once. A RELOAD applies a change.
    const TestEnv& env = TestEnv::get();
    auto config = pool_config("transaction", 1);
    Pgtether pooler(config);
    auto held = [&](const RawConn& conn) {
        return holds_connection(pooler.pid(), pooler.port(), conn.local_port());
    };
    RawConn silent("127.0.0.1", pooler.port());
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(held(silent));  // still with the kernel
    // Once it speaks it is accepted and answered like any client.
    REQUIRE(silent.send(wire::startup({{"user", env.superuser}, {"database", env.database}})));
    const auto reply = silent.read_message();
    REQUIRE(reply.has_value());
    CHECK(reply->type == 'R');
    CHECK(held(silent));

    // tcp_defer_accept = 0: a silent connection is accepted at once.
    config.settings["tcp_defer_accept"] = "0";
    pooler.reload(config);
    REQUIRE(pooler.wait_for_log("configuration reloaded"));
    RawConn accepted("127.0.0.1", pooler.port());
    CHECK(eventually([&] { return held(accepted); }));
    // And back: a RELOAD to 1 defers again.
    config.settings["tcp_defer_accept"] = "1";
    pooler.reload(config);
    REQUIRE(eventually([&] {
        const std::string log = pooler.log();
        return log.find("configuration reloaded") != log.rfind("configuration reloaded");
    }));
    RawConn deferred("127.0.0.1", pooler.port());
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(held(deferred));
    Conn conn = Conn::must(pooler.conninfo());
    PGT_CHECK_OK(conn.exec("SELECT 1"));
}
