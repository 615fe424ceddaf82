// Running where PgBouncer runs (issue "A true drop-in"): systemd's notify protocol through a real
// notify socket, starting as root with -u (and refusing root without a user), start-up errors in
// the logfile, a missing auth_file, application_name_add_host and the warning about "options" in
// ignore_startup_parameters.
#include <doctest/doctest.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
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

namespace {

// A root-owned 0600 file with known contents: what a planted link must not reach.
struct Victim {
    std::string path;
    explicit Victim(std::string at) : path(std::move(at)) {
        std::ofstream(path) << "root's secret\n";
        REQUIRE(::chown(path.c_str(), 0, 0) == 0);
        REQUIRE(::chmod(path.c_str(), 0600) == 0);
    }
    // Untouched: same contents, still root's, still 0600.
    [[nodiscard]] bool untouched() const {
        struct stat st {};
        return ::stat(path.c_str(), &st) == 0 && st.st_uid == 0 && (st.st_mode & 0777) == 0600 &&
               read_file(path) == "root's secret\n";
    }
};

// A symbolic link `link` -> `target` as the service account would plant it (owned by it).
void plant_link(const std::string& target, const std::string& link, const DaemonUser& user) {
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    REQUIRE(::lchown(link.c_str(), user.uid, user.gid) == 0);
}

struct Stat {
    uid_t uid = 0;
    mode_t mode = 0;
    gid_t gid = 0;
};
std::optional<Stat> lstat_of(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
    return Stat{st.st_uid, st.st_mode, st.st_gid};
}

}  // namespace

TEST_CASE("started as root: links planted where root writes reach nothing; unsafe places refused") {
    auto user = daemon_user();
    if (!user) {
        MESSAGE("not root: nothing to plant links against (skipped)");
        return;
    }
    // `dir` is the service account's, as /run/pgbouncer and /var/log/pgbouncer usually are.
    TempDir dir("pgt-links", TestEnv::get().tmp_dir);
    TempDir elsewhere("pgt-victims", TestEnv::get().tmp_dir);
    dir.write_file("userlist.txt", "\"postgres\" \"\"\n");
    const std::string pidfile = dir.path() + "/pgtether.pid";
    const std::string logfile = dir.path() + "/pgtether.log";
    auto start_as_root = [&](const std::string& name, int port, const std::string& extra = "") {
        ChildProcess::Options options;
        options.argv = {
            TestEnv::get().pgtether_bin,
            dir.write_file(name + ".ini", hand_ini(dir, port, "user = postgres\n" + extra))};
        options.log_path = dir.path() + "/" + name + ".out";
        return std::make_unique<ChildProcess>(options);
    };

    SUBCASE("<pidfile>.tmp linked to a root file: a fresh file is made, the target untouched") {
        Victim victim(elsewhere.path() + "/shadow");
        plant_link(victim.path, pidfile + ".tmp", *user);
        int port = free_port();
        auto child = start_as_root("tmp", port);
        REQUIRE(eventually([&] { return port_accepts("127.0.0.1", port); }));
        CHECK(victim.untouched());
        auto pid_stat = lstat_of(pidfile);
        REQUIRE(pid_stat);
        CHECK(S_ISREG(pid_stat->mode));
        CHECK(pid_stat->uid == user->uid);  // handed over, so that the user removes it at exit
        CHECK(read_file(pidfile) == std::to_string(child->pid()) + "\n");
        // The logfile it created: the user's, 0640 (statement text may end up in it).
        auto log_stat = lstat_of(logfile);
        REQUIRE(log_stat);
        CHECK(log_stat->uid == user->uid);
        CHECK((log_stat->mode & 0777) == 0640);
        // The Unix socket: the user's too, with unix_socket_mode's 0777. It is given away after
        // the port accepts, just before the process switches user (as in the unix_socket_group
        // case below: under load, with two workers, a check in between saw root's).
        REQUIRE(eventually([&] { return uid_of(child->pid()) == user->uid; }));
        auto socket_stat = lstat_of(dir.path() + "/.s.PGSQL." + std::to_string(port));
        REQUIRE(socket_stat);
        CHECK(S_ISSOCK(socket_stat->mode));
        CHECK(socket_stat->uid == user->uid);
        CHECK((socket_stat->mode & 0777) == 0777);
        CHECK(exit_code(child->stop()) == 0);
        CHECK_FALSE(lstat_of(pidfile).has_value());
        CHECK(victim.untouched());
    }
    SUBCASE("logfile linked to a root file: refused with a clear error, the target untouched") {
        Victim victim(elsewhere.path() + "/secret.log");
        plant_link(victim.path, logfile, *user);
        auto child = start_as_root("log", free_port());
        CHECK(exit_code(child->wait_exit(10s)) == 1);
        CHECK(read_file(dir.path() + "/log.out")
                  .find("cannot open logfile " + logfile +
                        ": it is a symbolic link, which pgtether does not follow while it runs "
                        "as root") != std::string::npos);
        CHECK(victim.untouched());
        CHECK_FALSE(lstat_of(pidfile).has_value());
    }
    SUBCASE("a logfile with a second (hard) link is refused") {
        dir.write_file("pgtether.log", "");
        REQUIRE(::link(logfile.c_str(), (dir.path() + "/other-name").c_str()) == 0);
        auto child = start_as_root("hard", free_port());
        CHECK(exit_code(child->wait_exit(10s)) == 1);
        CHECK(read_file(dir.path() + "/hard.out")
                  .find("refusing to start as root: logfile " + logfile + " has 2 hard links") !=
              std::string::npos);
    }
    SUBCASE("unix_socket_group: the Unix socket's group, with unix_socket_mode's mode") {
        const ::group* daemon_group = ::getgrnam("daemon");
        REQUIRE(daemon_group != nullptr);
        const gid_t gid = daemon_group->gr_gid;
        REQUIRE(gid != user->gid);
        int port = free_port();
        auto child =
            start_as_root("group", port, "unix_socket_group = daemon\nunix_socket_mode = 0770\n");
        REQUIRE(eventually([&] { return port_accepts("127.0.0.1", port); }));
        // The port accepts once the sockets are bound; the Unix socket is given away after that,
        // just before the process switches user (under load, a check in between saw root's).
        REQUIRE(eventually([&] { return uid_of(child->pid()) == user->uid; }));
        const std::string socket_path = dir.path() + "/.s.PGSQL." + std::to_string(port);
        REQUIRE(lstat_of(socket_path).has_value());
        auto socket_stat = lstat_of(socket_path);
        CHECK(S_ISSOCK(socket_stat->mode));
        CHECK(socket_stat->uid == user->uid);
        CHECK(socket_stat->gid == gid);
        CHECK((socket_stat->mode & 0777) == 0770);
        CHECK(exit_code(child->stop()) == 0);
    }
    SUBCASE("unix_socket_group naming no group: start-up refused, naming the key") {
        int port = free_port();
        auto child = start_as_root("nogroup", port, "unix_socket_group = pgt_no_such_group\n");
        CHECK(exit_code(child->wait_exit(10s)) == 1);
        CHECK(read_file(dir.path() + "/nogroup.out")
                  .find("unix_socket_group: group \"pgt_no_such_group\" does not exist") !=
              std::string::npos);
        CHECK_FALSE(port_accepts("127.0.0.1", port));
    }
    SUBCASE("a unix_socket_dir that every user may write (no sticky bit) is refused") {
        TempDir open_dir("pgt-open", TestEnv::get().tmp_dir);
        REQUIRE(::chmod(open_dir.path().c_str(), 0777) == 0);
        int port = free_port();
        auto child = start_as_root("open", port, "unix_socket_dir = " + open_dir.path() + "\n");
        CHECK(exit_code(child->wait_exit(10s)) == 1);
        CHECK(read_file(dir.path() + "/open.out")
                  .find("refusing to start as root: unix_socket_dir " + open_dir.path() +
                        " is writable by every user") != std::string::npos);
        CHECK_FALSE(port_accepts("127.0.0.1", port));
    }
    SUBCASE("a logfile directory of another user is refused") {
        TempDir foreign("pgt-foreign", TestEnv::get().tmp_dir);
        REQUIRE(::chown(foreign.path().c_str(), 65534, 65534) == 0);  // nobody
        auto child = start_as_root("foreign", free_port(),
                                   "logfile = " + foreign.path() + "/pgtether.log\n");
        CHECK(exit_code(child->wait_exit(10s)) == 1);
        CHECK(read_file(dir.path() + "/foreign.out")
                  .find("refusing to start as root: logfile directory " + foreign.path() +
                        " is writable by uid 65534") != std::string::npos);
        CHECK_FALSE(lstat_of(foreign.path() + "/pgtether.log").has_value());
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

TEST_CASE("with -d, an ini that does not load still gets its error into the logfile it names") {
    TempDir dir("pgt-starterr-ini", TestEnv::get().tmp_dir);
    dir.write_file("userlist.txt", "\"postgres\" \"\"\n");
    std::string ini = dir.write_file(
        "bad.ini", hand_ini(dir, free_port(), "default_pool_size = many\nno_such_key = 1\n"));
    ChildProcess::Options options;
    options.argv = {TestEnv::get().pgtether_bin, "-d", ini};
    options.log_path = dir.path() + "/bad.out";
    options.as_daemon_user = true;
    ChildProcess child(options);
    CHECK(exit_code(child.wait_exit(10s)) == 1);
    const std::string expected = ini + ":11: default_pool_size: invalid value \"many\"";
    CHECK(read_file(options.log_path).find(expected) != std::string::npos);
    const std::string logged = read_file(dir.path() + "/pgtether.log");
    INFO(logged);
    CHECK(std::regex_search(logged, std::regex("UTC \\[[0-9]+\\] FATAL " + std::string("[^\n]*") +
                                               ":11: default_pool_size: invalid value")));
}

TEST_CASE("log lines: PgBouncer's text (level words, UTC), and log_format = json") {
    // The reserve pool (a WARNING, as in PgBouncer), a refused client (a pooler error with its
    // SQLSTATE) and an ordinary client that leaves (LOG lines only).
    auto drive = [](Pgtether& pooler) {
        Conn first = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(first.exec("BEGIN"));
        PGT_REQUIRE_OK(first.exec("SELECT 1"));
        Conn second = Conn::must(pooler.conninfo());
        CHECK(scalar(second, "SELECT 2") == "2");  // from the reserve pool after 0.2 s
        PGT_REQUIRE_OK(first.exec("COMMIT"));
        Conn third = Conn::must(pooler.conninfo());
        Conn fourth(pooler.conninfo());  // over max_client_conn = 3
        CHECK_FALSE(fourth.ok());
    };
    std::map<std::string, std::string> settings = {{"reserve_pool_size", "1"},
                                                   {"reserve_pool_timeout", "0.2"},
                                                   {"max_client_conn", "3"},
                                                   {"workers", "1"}};
    SUBCASE("text") {
        Pgtether pooler(pool_config("transaction", 1, settings));
        drive(pooler);
        REQUIRE(pooler.wait_for_log("taking connection from reserve_pool"));
        REQUIRE(pooler.wait_for_log("pooler error"));
        const std::string log = pooler.log();
        INFO(log);
        const std::regex line(
            "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} [A-Z]+ \\[" +
            std::to_string(pooler.pid()) + "\\] (NOISE|DEBUG|LOG|WARNING|ERROR|FATAL) ");
        std::istringstream lines(log);
        std::string text;
        int count = 0;
        while (std::getline(lines, text)) {
            if (text.empty() || text.rfind("20", 0) != 0) continue;  // the harness's own lines
            CAPTURE(text);
            CHECK(std::regex_search(text, line));
            ++count;
        }
        CHECK(count > 5);
        CHECK(log.find(" UTC [") != std::string::npos);  // the tests run with TZ unset: UTC
        CHECK(std::regex_search(log,
                                std::regex("WARNING [^\n]*taking connection from reserve_pool")));
        CHECK(std::regex_search(
            log, std::regex("WARNING C-[0-9]+[ @][^\n]*pooler error: no more connections")));
        CHECK(log.find("] info ") == std::string::npos);
        CHECK(log.find("+00:00") == std::string::npos);
    }
    SUBCASE("json") {
        settings["log_format"] = "json";
        Pgtether pooler(pool_config("transaction", 1, settings));
        drive(pooler);
        REQUIRE(pooler.wait_for_log("taking connection from reserve_pool"));
        REQUIRE(pooler.wait_for_log("pooler error"));
        const std::string log = pooler.log();
        INFO(log);
        std::istringstream lines(log);
        std::string text;
        int objects = 0;
        bool refusal = false;
        bool reserve = false;
        const std::regex object(
            "^\\{\"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z\",\"level\":\"("
            "NOISE|DEBUG|LOG|WARNING|ERROR|FATAL)\",\"pid\":" +
            std::to_string(pooler.pid()) + "(,\"[a-z_]+\":\"([^\"\\\\]|\\\\.)*\")+\\}$");
        while (std::getline(lines, text)) {
            if (text.empty() || text[0] != '{') continue;
            CAPTURE(text);
            CHECK(std::regex_match(text, object));
            ++objects;
            if (text.find("pooler error: no more connections") != std::string::npos) {
                refusal = text.find("\"level\":\"WARNING\"") != std::string::npos &&
                          text.find("\"sqlstate\":\"53300\"") != std::string::npos &&
                          std::regex_search(text, std::regex("\"client_id\":\"C-[0-9]+\""));
            }
            if (text.find("taking connection from reserve_pool") != std::string::npos) {
                reserve = text.find("\"level\":\"WARNING\"") != std::string::npos;
            }
        }
        CHECK(objects > 5);
        CHECK(refusal);
        CHECK(reserve);
        // Lines about a logged-in client carry its database and user.
        CHECK(std::regex_search(
            log, std::regex("\"client_id\":\"C-[0-9]+\",\"database\":\"[^\"]+\",\"user\":\"")));
    }
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

TEST_CASE("options is read as PgBouncer 1.24 reads it, whatever ignore_startup_parameters lists") {
    // PgBouncer applies the parameters it tracks (TimeZone, DateStyle, ...) from options even
    // when "options" is listed, ignores listed names, and refuses other names with its own
    // words unless "options" is listed. The common extra_float_digits,options must not lose a
    // client's time zone.
    const std::string kOptions =
        "options='-c timezone=Pacific/Chatham -c extra_float_digits=2 -c work_mem=7MB'";
    SUBCASE("session_settings = replay, options listed: tracked applied, the rest ignored") {
        Pgtether pooler(pool_config("transaction", 2,
                                    {{"ignore_startup_parameters", "extra_float_digits,options"}}));
        Conn conn = Conn::must(pooler.conninfo("", "", "", kOptions));
        CHECK(scalar(conn, "SHOW timezone") == "Pacific/Chatham");
        CHECK(scalar(conn, "SHOW extra_float_digits") == "1");
        CHECK(scalar(conn, "SHOW work_mem") != "7MB");
    }
    SUBCASE("session_settings = ignore, options listed: the same") {
        Pgtether pooler(pool_config("transaction", 2,
                                    {{"session_settings", "ignore"},
                                     {"ignore_startup_parameters", "extra_float_digits,options"}}));
        Conn conn = Conn::must(pooler.conninfo("", "", "", kOptions));
        CHECK(scalar(conn, "SHOW timezone") == "Pacific/Chatham");
        CHECK(scalar(conn, "SHOW extra_float_digits") == "1");
        CHECK(scalar(conn, "SHOW work_mem") != "7MB");
    }
    SUBCASE("session_settings = ignore, options not listed: unknown names refused") {
        Pgtether pooler(pool_config("transaction", 2,
                                    {{"session_settings", "ignore"},
                                     {"ignore_startup_parameters", "extra_float_digits"}}));
        Conn conn = Conn::must(pooler.conninfo(
            "", "", "", "options='-c TimeZone=Pacific/Chatham -c extra_float_digits=2'"));
        CHECK(scalar(conn, "SHOW timezone") == "Pacific/Chatham");
        CHECK(scalar(conn, "SHOW extra_float_digits") == "1");
        Conn refused(pooler.conninfo("", "", "", kOptions));
        REQUIRE_FALSE(refused.ok());
        CHECK_MESSAGE(refused.error().find("unsupported startup parameter in options: work_mem") !=
                          std::string::npos,
                      refused.error());
    }
    SUBCASE("a listed parameter PostgreSQL reports is applied all the same, as in PgBouncer") {
        Pgtether pooler(pool_config(
            "transaction", 2,
            {{"ignore_startup_parameters", "extra_float_digits,application_name,TimeZone"}}));
        Conn conn = Conn::must(pooler.conninfo(
            "", "", "", "application_name=listed_app options='-c timezone=Pacific/Chatham'"));
        CHECK(scalar(conn, "SHOW application_name") == "listed_app");
        CHECK(scalar(conn, "SHOW timezone") == "Pacific/Chatham");
    }
    SUBCASE("malformed options are refused in PgBouncer's words, whatever is listed") {
        Pgtether pooler(pool_config("transaction", 2,
                                    {{"ignore_startup_parameters", "extra_float_digits,options"}}));
        for (const std::string options : {"-d", "-c timezone"}) {
            Conn refused(pooler.conninfo("", "", "", "options='" + options + "'"));
            REQUIRE_FALSE(refused.ok());
            CHECK_MESSAGE(refused.error().find("unsupported options startup parameter: only "
                                               "'-c config=val' and '--config=val' are allowed") !=
                              std::string::npos,
                          refused.error());
        }
    }
}

TEST_CASE("a parameter ignore_startup_parameters names is ignored inside options too") {
    // PgBouncer's meaning: extra_float_digits listed, options not: `-c extra_float_digits=2`
    // inside options is ignored, the rest of options is applied.
    Pgtether pooler(
        pool_config("transaction", 2, {{"ignore_startup_parameters", "extra_float_digits"}}));
    Conn conn = Conn::must(
        pooler.conninfo("", "", "", "options='-c extra_float_digits=2 -c work_mem=7MB'"));
    CHECK(scalar(conn, "SHOW extra_float_digits") == "1");
    CHECK(scalar(conn, "SHOW work_mem") == "7MB");
    // A value PostgreSQL would refuse is ignored just as well, not a failure at the first query.
    Conn bad = Conn::must(pooler.conninfo("", "", "", "options='-c extra_float_digits=99'"));
    CHECK(scalar(bad, "SELECT 1") == "1");
}
