// Live reload (SIGHUP and the console's RELOAD / SET) while clients keep running, and logging:
// the stats summary line, verbosity, logfile reopening, syslog.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

PoolerConfig reload_config(std::map<std::string, std::string> extra = {}) {
    PoolerConfig config;
    config.databases = {isolated_database("*")};
    config.settings = {
        {"pool_mode", "transaction"}, {"default_pool_size", "2"}, {"query_wait_timeout", "30"}};
    for (auto& [key, value] : extra)
        config.settings[key] = value;
    return config;
}

// Rewrites `key = ...` in the pooler's ini without signalling it (for RELOAD on the console).
void edit_ini(const PoolerProcess& pooler, const std::string& key, const std::string& value) {
    std::string text = read_file(pooler.ini_path());
    std::regex line("(^|\n)" + key + " = [^\n]*");
    REQUIRE_MESSAGE(std::regex_search(text, line), key << " not in\n" << text);
    text = std::regex_replace(text, line, "$1" + key + " = " + value);
    std::ofstream(pooler.ini_path(), std::ios::trunc) << text;
}

std::string setting(Conn& admin, const std::string& key) {
    auto row = find_row(admin.exec("SHOW CONFIG"), "key", key);
    REQUIRE_MESSAGE(row.has_value(), key);
    return cell(*row, "value");
}

// Clients that run queries and short transactions until stopped, counting what fails.
class Load {
  public:
    Load(const PoolerProcess& pooler, int clients) {
        for (int i = 0; i < clients; ++i) {
            threads_.emplace_back([this, &pooler] {
                Conn conn(pooler.conninfo());
                if (!conn.ok()) {
                    ++errors_;
                    return;
                }
                while (!stop_) {
                    bool ok = conn.exec("SELECT 1").ok() && conn.exec("BEGIN").ok() &&
                              conn.exec("SELECT pg_sleep(0.002)").ok() && conn.exec("COMMIT").ok();
                    if (ok) {
                        ++rounds_;
                    } else {
                        ++errors_;
                        last_error_ = conn.error();
                    }
                }
            });
        }
    }
    ~Load() { stop(); }
    void stop() {
        stop_ = true;
        for (auto& t : threads_) {
            if (t.joinable()) t.join();
        }
    }
    [[nodiscard]] int rounds() const { return rounds_; }
    [[nodiscard]] int errors() const { return errors_; }
    [[nodiscard]] std::string last_error() const { return last_error_; }

  private:
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
    std::atomic<int> rounds_{0};
    std::atomic<int> errors_{0};
    std::string last_error_;
};

// A login by a user who is not in the auth_file fails (the error is logged as a pooler error).
bool login_refused(const PoolerProcess& pooler, const std::string& user) {
    RawConn raw(pooler.host(), pooler.port());
    return wire::first_error_sqlstate(raw.startup(user, TestEnv::get().database)).has_value();
}

}  // namespace

TEST_CASE("SIGHUP and RELOAD apply a new configuration under load; a broken one is refused") {
    auto config = reload_config();
    Pgtether pooler(config);
    Conn admin = console(pooler);
    Load load(pooler, 4);
    CHECK(eventually([&] { return load.rounds() > 20; }));

    // SIGHUP with a bigger pool and a new database entry.
    config.settings["default_pool_size"] = "5";
    config.databases = {isolated_database("*"), isolated_database("added")};
    pooler.reload(config);
    CHECK(eventually([&] { return setting(admin, "default_pool_size") == "5"; }));
    CHECK(pooler.wait_for_log("configuration reloaded"));
    CHECK(pooler.log().find("reload: default_pool_size: 2 -> 5") != std::string::npos);
    CHECK(pooler.log().find("reload: [databases] added: added (host=") != std::string::npos);
    Conn added = Conn::must(pooler.conninfo("", "added"));
    PGT_CHECK_OK(added.exec("SELECT 1"));
    int before = load.rounds();
    CHECK(eventually([&] { return load.rounds() > before + 20; }));

    // A broken file by SIGHUP: refused, the running configuration stays.
    config.settings["default_pool_size"] = "lots";
    pooler.reload(config);
    CHECK(pooler.wait_for_log("reload failed, keeping the running configuration"));
    CHECK(pooler.log().find("default_pool_size: invalid value \"lots\"") != std::string::npos);
    CHECK(setting(admin, "default_pool_size") == "5");

    // The same file by RELOAD: the console gets the error.
    auto failed = admin.exec("RELOAD");
    PGT_CHECK_SQLSTATE(failed, "F0000");
    CHECK(failed.message.find("RELOAD failed: ") == 0);
    CHECK(failed.message.find("default_pool_size: invalid value \"lots\"") != std::string::npos);
    CHECK(setting(admin, "default_pool_size") == "5");

    // Fixed, a plain RELOAD (no signal) applies it.
    edit_ini(pooler, "default_pool_size", "3");
    auto reloaded = admin.exec("RELOAD");
    PGT_CHECK_OK(reloaded);
    CHECK(reloaded.command_tag == "RELOAD");
    CHECK(setting(admin, "default_pool_size") == "3");
    auto db = find_row(admin.exec("SHOW DATABASES"), "name", "added");
    REQUIRE(db.has_value());
    CHECK(cell(*db, "pool_size") == "3");

    before = load.rounds();
    CHECK(eventually([&] { return load.rounds() > before + 20; }));
    load.stop();
    CHECK_MESSAGE(load.errors() == 0, load.last_error());
    PGT_CHECK_OK(added.exec("SELECT 1"));  // connected before the reloads, still there
}

TEST_CASE("an unknown key at RELOAD: PgBouncer 1.18 applies the lines above it, pgtether none") {
    auto config = reload_config();
    Pgtether pgt(config);
    Pgbouncer pgb(config);
    for (PoolerProcess* pooler :
         {static_cast<PoolerProcess*>(&pgt), static_cast<PoolerProcess*>(&pgb)}) {
        CAPTURE(pooler->name());
        Conn admin = console(*pooler);
        REQUIRE_MESSAGE(admin.ok(), admin.error());
        REQUIRE(setting(admin, "default_pool_size") == "2");
        REQUIRE(setting(admin, "max_client_conn") == "100");
        // [pgbouncer] is the file's last section: these lines land in it.
        std::ofstream(pooler->ini_path(), std::ios::app)
            << "default_pool_size = 7\nfrobnicate = 1\nmax_client_conn = 33\n";
        auto reload = admin.exec("RELOAD");
        if (pooler == &pgb) {
            // PgBouncer answers RELOAD, keeps what it read above the bad line and skips the rest.
            PGT_CHECK_OK(reload);
            CHECK(reload.command_tag == "RELOAD");
            CHECK(setting(admin, "default_pool_size") == "7");
            CHECK(setting(admin, "max_client_conn") == "100");
            CHECK(pooler->wait_for_log("unknown parameter: pgbouncer/frobnicate"));
            CHECK(pooler->wait_for_log("config file loading failed"));
        } else {
            // pgtether refuses the whole file, says where, and keeps the running configuration.
            PGT_CHECK_SQLSTATE(reload, "F0000");
            CHECK(reload.message.find(pooler->ini_path() + ":") != std::string::npos);
            CHECK(reload.message.find("frobnicate: unknown configuration key") !=
                  std::string::npos);
            CHECK(setting(admin, "default_pool_size") == "2");
            CHECK(setting(admin, "max_client_conn") == "100");
        }
    }
}

TEST_CASE("a smaller pool after reload: idle servers beyond it are closed") {
    auto config = reload_config({{"default_pool_size", "4"}});
    Pgtether pooler(config);
    Conn admin = console(pooler);
    std::vector<Conn> clients;
    for (int i = 0; i < 4; ++i) {
        clients.emplace_back(Conn::must(pooler.conninfo()));
        PGT_REQUIRE_OK(clients.back().exec("BEGIN"));
        PGT_REQUIRE_OK(clients.back().exec("SELECT 1"));
    }
    for (auto& c : clients)
        PGT_REQUIRE_OK(c.exec("COMMIT"));
    auto pool = [&] {
        return *find_row(admin.exec("SHOW POOLS"), "database", TestEnv::get().database);
    };
    CHECK(cell_int(pool(), "sv_idle") == 4);
    PGT_REQUIRE_OK(admin.exec("SET default_pool_size = 1"));
    CHECK(eventually([&] { return cell_int(pool(), "sv_idle") == 1; }));
    CHECK(pooler.wait_for_log("pool size reduced"));
    for (auto& c : clients)
        PGT_CHECK_OK(c.exec("SELECT 1"));
}

TEST_CASE("auth_file changes take effect at RELOAD; connected clients stay") {
    const auto& env = TestEnv::get();
    const auto& md5 = env.auth_user("md5");
    auto config = reload_config({{"auth_type", "md5"}});
    config.userlist = std::vector<std::pair<std::string, std::string>>{{env.superuser, "adminpw"}};
    Pgtether pooler(config);
    Conn admin = Conn::must(pooler.conninfo("", "pgbouncer", "adminpw"));
    CHECK_FALSE(Conn(pooler.conninfo(md5.name, "", md5.password)).ok());

    std::string userlist = pooler.dir() + "/userlist.txt";
    std::ofstream(userlist, std::ios::app) << "\"" << md5.name << "\" \"" << md5.password << "\"\n";
    PGT_REQUIRE_OK(admin.exec("RELOAD"));
    Conn user = Conn(pooler.conninfo(md5.name, "", md5.password));
    REQUIRE_MESSAGE(user.ok(), user.error());
    PGT_CHECK_OK(user.exec("SELECT 1"));

    // Removed again: new logins fail, the connected client goes on.
    std::ofstream(userlist, std::ios::trunc) << "\"" << env.superuser << "\" \"adminpw\"\n";
    PGT_REQUIRE_OK(admin.exec("RELOAD"));
    Conn refused(pooler.conninfo(md5.name, "", md5.password));
    CHECK_FALSE(refused.ok());
    CHECK(refused.error().find("password authentication failed") != std::string::npos);
    PGT_CHECK_OK(user.exec("SELECT 2"));

    // A broken auth_file is refused as a whole: the previous user list stays.
    std::ofstream(userlist, std::ios::trunc) << "not a userlist line\n";
    PGT_CHECK_SQLSTATE(admin.exec("RELOAD"), "F0000");
    Conn still = Conn(pooler.conninfo("", "pgbouncer", "adminpw"));
    CHECK_MESSAGE(still.ok(), still.error());
}

TEST_CASE("settings that need a restart keep their running values on reload") {
    auto config = reload_config();
    Pgtether pooler(config);
    int port = pooler.port();
    config.settings["listen_port"] = std::to_string(free_port());
    config.settings["default_pool_size"] = "7";
    pooler.reload(config);
    CHECK(pooler.wait_for_log(
        "listen_port: cannot be changed while pgtether runs; keeping the running value"));
    // The reload says what it changed, old -> new; the kept setting is not among the changes.
    CHECK(pooler.wait_for_log("reload: default_pool_size: 2 -> 7"));
    CHECK(pooler.log().find("reload: listen_port") == std::string::npos);
    Conn admin = console(pooler);
    CHECK(setting(admin, "listen_port") == std::to_string(port));
    CHECK(setting(admin, "default_pool_size") == "7");  // the rest of the file applies
    PGT_CHECK_OK(Conn::must(pooler.conninfo()).exec("SELECT 1"));
}

TEST_CASE("RELOAD and SIGHUP reopen the logfile, so logrotate works") {
    TempDir logs("pgt-logs", TestEnv::get().tmp_dir);
    std::string logfile = logs.path() + "/pgtether.log";
    Pgtether pooler(reload_config({{"logfile", logfile}}));
    CHECK(eventually([&] { return read_file(logfile).find("started") != std::string::npos; }));
    // logrotate: move the file away, then signal.
    REQUIRE(std::rename(logfile.c_str(), (logfile + ".1").c_str()) == 0);
    pooler.reload();
    CHECK(eventually(
        [&] { return read_file(logfile).find("configuration reloaded") != std::string::npos; }));
    CHECK(read_file(logfile + ".1").find("started") != std::string::npos);
    CHECK(read_file(logfile + ".1").find("configuration reloaded") == std::string::npos);
    // And through the console.
    REQUIRE(std::rename(logfile.c_str(), (logfile + ".2").c_str()) == 0);
    Conn admin = console(pooler);
    PGT_REQUIRE_OK(admin.exec("RELOAD"));
    CHECK(eventually(
        [&] { return read_file(logfile).find("configuration reloaded") != std::string::npos; }));
    CHECK(read_file(logfile + ".2").find("RELOAD command issued") != std::string::npos);
}

TEST_CASE("log_stats writes PgBouncer's summary line every stats_period") {
    Pgtether pooler(reload_config({{"stats_period", "1"}}));
    Conn a = Conn::must(pooler.conninfo());
    std::atomic<bool> stop{false};
    std::thread load([&] {
        Conn c = Conn::must(pooler.conninfo());
        while (!stop)
            (void)c.exec("SELECT 1");
    });
    PGT_REQUIRE_OK(a.exec("SELECT pg_advisory_lock(9191)"));
    std::regex line(
        "stats: ([0-9]+) xacts/s, ([0-9]+) queries/s, in ([0-9]+) B/s, out ([0-9]+) B/s, "
        "xact ([0-9]+) us, query ([0-9]+) us, wait ([0-9]+) us");
    bool busy_line = eventually(
        [&] {
            std::string log = pooler.log();
            for (auto it = std::sregex_iterator(log.begin(), log.end(), line);
                 it != std::sregex_iterator(); ++it) {
                if (std::stoll((*it)[2]) > 0 && std::stoll((*it)[3]) > 0) return true;
            }
            return false;
        },
        5s);
    stop = true;
    load.join();
    CHECK(busy_line);
    CHECK(pooler.wait_for_log("tether: 1 tethered clients; in the last period"));

    // log_stats = 0: no more lines.
    Conn admin = console(pooler);
    PGT_REQUIRE_OK(admin.exec("SET log_stats = 0"));
    auto count = [&] {
        std::string log = pooler.log();
        return std::distance(std::sregex_iterator(log.begin(), log.end(), line),
                             std::sregex_iterator());
    };
    auto lines = count();
    std::this_thread::sleep_for(2500ms);
    CHECK(count() == lines);
}

TEST_CASE("verbose: SET verbose raises the level at once, RELOAD restores the file's") {
    Pgtether pooler(reload_config());
    Conn admin = console(pooler);
    PGT_REQUIRE_OK(admin.exec("SHOW VERSION"));
    CHECK(pooler.log().find("admin query: SHOW VERSION") == std::string::npos);  // debug
    PGT_REQUIRE_OK(admin.exec("SET verbose = 1"));
    PGT_REQUIRE_OK(admin.exec("SHOW LISTS"));
    CHECK(pooler.wait_for_log("admin query: SHOW LISTS"));
    PGT_REQUIRE_OK(admin.exec("RELOAD"));
    PGT_REQUIRE_OK(admin.exec("SHOW MEM"));
    std::this_thread::sleep_for(200ms);
    CHECK(pooler.log().find("admin query: SHOW MEM") == std::string::npos);
}

TEST_CASE("disconnects and pooler errors are logged, unless switched off") {
    Pgtether pooler(reload_config({{"client_idle_timeout", "0.3"}}));
    {
        Conn a = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(a.exec("SELECT 1"));
    }
    CHECK(pooler.wait_for_log("closing because: client close request"));
    Conn idle = Conn::must(pooler.conninfo());
    CHECK(pooler.wait_for_log("closing because: client_idle_timeout"));
    CHECK(pooler.wait_for_log("pooler error: client_idle_timeout"));
    // The console is a client too: end the idle timeout before it strikes the console.
    Conn admin = console(pooler);
    PGT_REQUIRE_OK(admin.exec("SET client_idle_timeout = 0"));
    PGT_CHECK_SQLSTATE(admin.exec("SHOW NOSUCH"), "42601");
    CHECK(pooler.wait_for_log("pooler error: invalid command 'SHOW NOSUCH'"));
    PGT_REQUIRE_OK(admin.exec("SET log_pooler_errors = 0"));
    PGT_CHECK_SQLSTATE(admin.exec("SHOW NOSUCH2"), "42601");
    CHECK(login_refused(pooler, "nobody"));
    std::this_thread::sleep_for(300ms);
    CHECK(pooler.log().find("NOSUCH2") == std::string::npos);
    CHECK(pooler.log().find("\"nobody\"") == std::string::npos);
    PGT_REQUIRE_OK(admin.exec("SET log_disconnections = 0"));
    auto before = pooler.log().size();
    {
        Conn b = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(b.exec("SELECT 1"));
    }
    std::this_thread::sleep_for(300ms);
    CHECK(pooler.log().substr(before).find("closing because") == std::string::npos);
}

TEST_CASE("syslog: lines go to /dev/log with syslog_ident and syslog_facility") {
    // glibc's syslog() always writes to /dev/log. When the machine has no syslog daemon this test
    // stands in for one (a datagram socket at /dev/log, removed afterwards); it needs root.
    struct stat st {};
    if (geteuid() != 0 || lstat("/dev/log", &st) == 0) {
        MESSAGE("skipped: /dev/log exists (a real syslog daemon) or not root");
        return;
    }
    int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "/dev/log");
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    struct Cleanup {
        int fd;
        ~Cleanup() {
            ::close(fd);
            ::unlink("/dev/log");
        }
    } cleanup{fd};
    ::chmod("/dev/log", 0666);

    Pgtether pooler(reload_config(
        {{"syslog", "1"}, {"syslog_ident", "pgt-itest"}, {"syslog_facility", "local3"}}));
    // <PRI> = facility local3 (19) * 8 + severity info (6) = 158.
    std::string wanted = "<158>";
    bool found = false;
    std::string seen;
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!found && std::chrono::steady_clock::now() < deadline) {
        pollfd pfd{fd, POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0) continue;
        char buf[2048];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) continue;
        std::string datagram(buf, static_cast<std::size_t>(n));
        seen += datagram + "\n";
        found = datagram.rfind(wanted, 0) == 0 &&
                datagram.find("pgt-itest[" + std::to_string(pooler.pid()) + "]: ") !=
                    std::string::npos &&
                datagram.find("LOG pgtether") != std::string::npos;
    }
    CHECK_MESSAGE(found, seen);
}
