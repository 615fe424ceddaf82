// Poolers under test as RAII processes: pgtether, and Debian's PgBouncer as the reference.
//
// Both are configured the same way: a generated PgBouncer-format ini and userlist.txt in a fresh
// temp dir, listening on 127.0.0.1 at a free port. The constructor returns once the port accepts
// TCP connections; the destructor stops it with SIGTERM (twice if clients are still connected,
// SIGKILL after a bound).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

namespace pgtether::itest {

struct PoolerConfig {
    // [pgbouncer] keys. They override the defaults: listen_addr = 127.0.0.1, listen_port = a free
    // port, unix_socket_dir = the temp dir, auth_type = trust, auth_file = the generated
    // userlist.txt, admin_users = postgres. Keys are written in map order.
    std::map<std::string, std::string> settings;
    // [databases] lines ("name = host=... port=..."). Empty: one fallback line
    // "* = host=<PostgreSQL> port=<port>" (every database name maps to the same-named database).
    std::vector<std::string> databases;
    // [users] lines; the section is omitted when empty.
    std::vector<std::string> users;
    // [peers] lines ("1 = host=127.0.0.1 port=..."); the section is omitted when empty.
    std::vector<std::string> peers;
    // userlist.txt entries (user, password as PgBouncer accepts it: plain, md5...,
    // SCRAM-SHA-256$...). nullopt: the superuser with an empty password plus every auth-test role
    // with its password.
    std::optional<std::vector<std::pair<std::string, std::string>>> userlist;
    // Extra command-line arguments before the ini path (e.g. "-v").
    std::vector<std::string> extra_args;
    // Run the pooler inside this network namespace (support/netns.hpp; not owned). Its TCP
    // listener is then reachable only from inside; its Unix socket from anywhere.
    int netns_fd = -1;
    // RLIMIT_NOFILE (soft and hard) to start the pooler with; nullopt: the test's own.
    std::optional<unsigned long> fd_limit = std::nullopt;
};

// The usual test pool: `pool_mode = mode`, `default_pool_size = size`, then `extra` (which may
// override both); pgtether runs with -v so that failed tests leave a useful log.
PoolerConfig pool_config(const std::string& mode, int size,
                         const std::map<std::string, std::string>& extra = {});

// Renders the ini text; exposed so tests can check what a pooler was started with.
std::string render_ini(const PoolerConfig& config,
                       const std::map<std::string, std::string>& defaults, const TestEnv& env);
std::string render_userlist(const PoolerConfig& config, const TestEnv& env);

class PoolerProcess {
  public:
    PoolerProcess(const PoolerProcess&) = delete;
    PoolerProcess& operator=(const PoolerProcess&) = delete;
    virtual ~PoolerProcess();

    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] const std::string& host() const { return host_; }
    [[nodiscard]] int port() const { return port_; }
    [[nodiscard]] const std::string& dir() const { return dir_.path(); }
    [[nodiscard]] std::string ini_path() const { return dir() + "/" + name_ + ".ini"; }
    [[nodiscard]] pid_t pid() const { return process_->pid(); }
    [[nodiscard]] bool running() { return process_ && process_->running(); }

    // Everything the process wrote to stdout and stderr so far (while it runs, up to the last
    // whole line).
    [[nodiscard]] std::string log() const;
    // Polls the log until it contains `needle`; false on timeout.
    [[nodiscard]] bool wait_for_log(const std::string& needle,
                                    std::chrono::milliseconds timeout = 5s) const;

    // Rewrites the ini (same port and dir) and sends SIGHUP.
    void reload(const PoolerConfig& config);
    // Sends SIGHUP without touching the ini.
    void reload();
    // SIGTERM; a second SIGTERM if clients are still connected after kClientsLeaveMs (SIGTERM
    // waits for them to leave); SIGKILL after `grace`. The wait status. Idempotent.
    std::optional<int> stop(std::chrono::milliseconds grace = 10s);
    static constexpr std::chrono::milliseconds kClientsLeaveMs{2000};

    // libpq conninfo for connecting through this pooler over TCP (sslmode/gssencmode disabled).
    [[nodiscard]] std::string conninfo(const std::string& user = "", const std::string& dbname = "",
                                       const std::string& password = "",
                                       const std::string& extra = "") const;
    // The same over the pooler's Unix socket (in dir()).
    [[nodiscard]] std::string unix_conninfo(const std::string& user = "",
                                            const std::string& dbname = "",
                                            const std::string& extra = "") const;

  protected:
    PoolerProcess(std::string name, std::string binary, const TestEnv& env, PoolerConfig config,
                  std::chrono::milliseconds start_timeout);

  private:
    void write_config(const PoolerConfig& config);
    void start(std::chrono::milliseconds timeout);

    std::string name_;
    std::string binary_;
    const TestEnv& env_;
    PoolerConfig config_;
    TempDir dir_;
    std::string host_ = "127.0.0.1";
    int port_ = 0;
    std::unique_ptr<ChildProcess> process_;
};

// The workers every pgtether of this run has unless a test sets its own: PGT_WORKERS (the
// *_workers2 ctest entries set 2), else 1. What only one worker does by design is asserted only
// when this is 1: consecutive clients of a small pool meeting the same backend, no backend ever
// closed, exact per-pool counts and log lines. With two, a client's worker holds its own share
// of the pool, and a backend one worker lends to the other is closed and opened anew.
int workers_in_this_run();

// pgtether from $PGTETHER_BIN.
class Pgtether : public PoolerProcess {
  public:
    explicit Pgtether(PoolerConfig config = {}, std::chrono::milliseconds start_timeout = 10s,
                      const TestEnv& env = TestEnv::get());
};

// Debian's PgBouncer ($PGT_PGBOUNCER_BIN), the reference implementation for differential tests.
class Pgbouncer : public PoolerProcess {
  public:
    explicit Pgbouncer(PoolerConfig config = {}, std::chrono::milliseconds start_timeout = 10s,
                       const TestEnv& env = TestEnv::get());
};

}  // namespace pgtether::itest
