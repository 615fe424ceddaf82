// Running where PgBouncer runs (issue "A true drop-in"): systemd's notify protocol through a real
// notify socket, starting as root with -u (and refusing root without a user), start-up errors in
// the logfile, a missing auth_file, application_name_add_host and the warning about "options" in
// ignore_startup_parameters.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

// A Unix datagram socket playing systemd's notify socket, bound in `dir`.
class NotifySocket {
  public:
    explicit NotifySocket(const std::string& dir) : path_(dir + "/notify") {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd_ >= 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, path_.c_str(), sizeof address.sun_path - 1);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        // pgtether runs as the daemon user when we are root: it must be able to send to it.
        ::chmod(path_.c_str(), 0666);
    }
    ~NotifySocket() {
        ::close(fd_);
        ::unlink(path_.c_str());
    }
    [[nodiscard]] const std::string& path() const { return path_; }

    // The next datagram, or nullopt after `timeout`.
    std::optional<std::string> next(std::chrono::milliseconds timeout = 10s) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
        char buf[4096];
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n < 0) return std::nullopt;
        return std::string(buf, static_cast<std::size_t>(n));
    }
    // Datagrams until one contains `needle` (true), or none came within `timeout` (false).
    bool wait_for(const std::string& needle, std::vector<std::string>& seen,
                  std::chrono::milliseconds timeout = 10s) {
        while (auto message = next(timeout)) {
            seen.push_back(*message);
            if (message->find(needle) != std::string::npos) return true;
        }
        return false;
    }

  private:
    std::string path_;
    int fd_ = -1;
};

// A minimal ini for a pgtether started by hand (not through PoolerProcess).
std::string hand_ini(const TempDir& dir, int port, const std::string& extra = "") {
    const auto& env = TestEnv::get();
    return "[databases]\n* = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
           "\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " + std::to_string(port) +
           "\nunix_socket_dir = " + dir.path() + "\nauth_type = trust\nauth_file = " + dir.path() +
           "/userlist.txt\nlogfile = " + dir.path() + "/pgtether.log\npidfile = " + dir.path() +
           "/pgtether.pid\n" + extra;
}

int exit_code(const std::optional<int>& status) {
    return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

// The real uid of a process, from /proc.
std::optional<uid_t> uid_of(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Uid:", 0) == 0) return static_cast<uid_t>(std::stoul(line.substr(4)));
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("systemd notify: READY, STATUS, RELOADING and STOPPING over $NOTIFY_SOCKET") {
    TempDir dir("pgt-notify", TestEnv::get().tmp_dir);
    NotifySocket notify(dir.path());
    ::setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
    std::optional<Pgtether> pooler;
    pooler.emplace(pool_config("transaction", 2));
    ::unsetenv("NOTIFY_SOCKET");
    std::vector<std::string> seen;
    REQUIRE(notify.wait_for("READY=1", seen));
    CHECK(seen.back().find("STATUS=0 clients, 0 servers, 0 pools") != std::string::npos);
    pooler->reload();
    seen.clear();
    CHECK(notify.wait_for("RELOADING=1", seen));
    CHECK(notify.wait_for("READY=1", seen));
    pooler->stop();
    CHECK(notify.wait_for("STOPPING=1", seen));
}

TEST_CASE("started as root: -u switches user once the sockets are bound; no user, no start") {
    auto user = daemon_user();
    if (!user) {
        MESSAGE("not root: nothing to switch from (skipped)");
        return;
    }
    TempDir dir("pgt-root", TestEnv::get().tmp_dir);
    dir.write_file("userlist.txt", "\"postgres\" \"\"\n");
    {
        int port = free_port();
        std::string ini = dir.write_file("u.ini", hand_ini(dir, port));
        ChildProcess::Options options;
        options.argv = {TestEnv::get().pgtether_bin, "-u", "postgres", ini};
        options.log_path = dir.path() + "/u.out";
        ChildProcess child(options);  // as root
        REQUIRE(eventually([&] { return port_accepts("127.0.0.1", port); }));
        CHECK(eventually([&] { return uid_of(child.pid()) == user->uid; }));
        Conn conn = Conn::must("host=127.0.0.1 port=" + std::to_string(port) +
                               " user=postgres dbname=postgres sslmode=disable");
        CHECK(scalar(conn, "SELECT 1") == "1");
        conn.close();
        CHECK(exit_code(child.stop()) == 0);
        // As the user it could still remove what it made as root.
        CHECK_FALSE(std::ifstream(dir.path() + "/pgtether.pid").good());
        CHECK_FALSE(std::ifstream(dir.path() + "/.s.PGSQL." + std::to_string(port)).good());
        CHECK(read_file(dir.path() + "/pgtether.log").find("switched to user postgres") !=
              std::string::npos);
    }
    {
        std::string ini = dir.write_file("root.ini", hand_ini(dir, free_port()));
        ChildProcess::Options options;
        options.argv = {TestEnv::get().pgtether_bin, ini};
        options.log_path = dir.path() + "/root.out";
        ChildProcess child(options);
        CHECK(exit_code(child.wait_exit(10s)) == 1);
        CHECK(read_file(options.log_path).find("should not run as root") != std::string::npos);
    }
}

TEST_CASE("start-up errors reach the logfile, also with -d; TLS file errors say why") {
    TempDir dir("pgt-starterr", TestEnv::get().tmp_dir);
    dir.write_file("userlist.txt", "\"postgres\" \"\"\n");
    std::string ini = dir.write_file(
        "bad.ini", hand_ini(dir, free_port(),
                            "client_tls_sslmode = require\nclient_tls_key_file = " + dir.path() +
                                "/nope.key\nclient_tls_cert_file = " + dir.path() + "/nope.crt\n"));
    ChildProcess::Options options;
    options.argv = {TestEnv::get().pgtether_bin, "-d", ini};
    options.log_path = dir.path() + "/bad.out";
    options.as_daemon_user = true;
    ChildProcess child(options);
    CHECK(exit_code(child.wait_exit(10s)) == 1);
    const std::string expected =
        "cannot read certificate \"" + dir.path() + "/nope.crt\": No such file or directory";
    CHECK(read_file(options.log_path).find(expected) != std::string::npos);
    CHECK(read_file(dir.path() + "/pgtether.log").find(expected) != std::string::npos);
}

TEST_CASE("a missing auth_file does not stop start-up; a reload reads it once it exists") {
    PoolerConfig config = pool_config("transaction", 2);
    Pgtether pooler(config);
    // Start again without the userlist the harness wrote.
    PoolerConfig missing = config;
    missing.settings["auth_file"] = pooler.dir() + "/later.txt";
    Pgtether without(missing);
    CHECK(without.wait_for_log("later.txt\": No such file or directory"));
    CHECK_FALSE(Conn(without.conninfo()).ok());  // trust needs the user listed
    {
        std::ofstream out(pooler.dir() + "/later.txt");
        out << "\"postgres\" \"\"\n";
    }
    ::chmod((pooler.dir() + "/later.txt").c_str(), 0644);
    without.reload();
    CHECK(eventually([&] { return Conn(without.conninfo()).ok(); }));
}

TEST_CASE("application_name_add_host: the client's address after its application_name") {
    Pgtether pooler(pool_config("transaction", 2, {{"application_name_add_host", "1"}}));
    Conn named = Conn::must(pooler.conninfo("", "", "", "application_name=myapp"));
    auto value = scalar(named, "SHOW application_name");
    CHECK(value.rfind("myapp - 127.0.0.1:", 0) == 0);
    Conn unnamed = Conn::must(pooler.conninfo());
    CHECK(scalar(unnamed, "SHOW application_name").rfind("app - 127.0.0.1:", 0) == 0);
    // Only at start-up: a later SET is the client's.
    named.exec_ok("SET application_name = 'other'");
    CHECK(scalar(named, "SHOW application_name") == "other");
}

TEST_CASE("ignore_startup_parameters = extra_float_digits,options warns that options is ignored") {
    Pgtether pooler(pool_config("transaction", 2,
                                {{"ignore_startup_parameters", "extra_float_digits,options"}}));
    CHECK(pooler.wait_for_log("ignore_startup_parameters lists \"options\""));
    // And it does what it says: the options are accepted and not applied.
    Conn conn = Conn::must(pooler.conninfo("", "", "", "options='-c work_mem=7MB'"));
    CHECK(scalar(conn, "SHOW work_mem") != "7MB");
}
