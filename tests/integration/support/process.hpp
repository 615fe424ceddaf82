// Child processes, temporary directories and TCP ports for integration tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pgtether::itest {

using namespace std::chrono_literals;

// The account daemons run as when the test runs as root (PostgreSQL and PgBouncer refuse root):
// $PGT_DAEMON_USER, default "postgres". nullopt when not root: then daemons run as ourselves.
struct DaemonUser {
    uid_t uid;
    gid_t gid;
};
std::optional<DaemonUser> daemon_user();

// A fresh directory under `base`, deleted on destruction unless $PGT_KEEP_TMP is set (handy for
// reading a failed test's logs). Owned by the daemon user when there is one, so daemons can create
// their Unix sockets in it. Tests pass TestEnv::tmp_dir as base: it is deleted together with the
// throwaway PostgreSQL, so a test killed before its destructors ran leaves nothing behind either.
class TempDir {
  public:
    explicit TempDir(const std::string& prefix = "pgt-test", const std::string& base = "/tmp");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    [[nodiscard]] const std::string& path() const { return path_; }
    // Writes `content` to path()/name, readable by the daemon user; returns the full path.
    std::string write_file(const std::string& name, const std::string& content) const;

  private:
    std::string path_;
};

// Reads a whole file; "" if it cannot be read.
std::string read_file(const std::string& path);

// A TCP port on 127.0.0.1 that nothing is bound to right now, drawn at random below the kernel's
// ephemeral range so client sockets cannot occupy it. Never returns the same port twice in one
// process, so two daemons configured before either binds do not collide.
int free_port();

// True if a TCP connection to host:port succeeds (closed again at once).
bool port_accepts(const std::string& host, int port);

// A spawned program with stdout and stderr appended to a log file. Killed with SIGTERM (then
// SIGKILL) on destruction; it also gets SIGTERM if the test process dies (PR_SET_PDEATHSIG), so a
// crashed or killed test does not leave daemons behind.
class ChildProcess {
  public:
    struct Options {
        std::vector<std::string> argv;  // argv[0] is the program path
        std::string log_path;
        bool as_daemon_user = false;  // drop to daemon_user() when running as root
        // A network namespace (an open /proc/.../ns/net) the child enters before exec; -1: ours.
        int netns_fd = -1;
        // RLIMIT_NOFILE, soft and hard, for the child (nullopt: inherited).
        std::optional<unsigned long> fd_limit = std::nullopt;
    };

    // Throws std::runtime_error if fork or exec fails (exec errors are reported back over a
    // close-on-exec pipe, so a wrong path fails here rather than as "exited with 127").
    explicit ChildProcess(const Options& options);
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    [[nodiscard]] pid_t pid() const { return pid_; }
    // Reaps the child if it has exited; false from then on.
    [[nodiscard]] bool running();
    // Sends `sig` if still running; false if it had already exited.
    bool signal(int sig);
    // SIGTERM, wait up to `grace`, then SIGKILL. Returns the wait status (see describe_status).
    std::optional<int> stop(std::chrono::milliseconds grace = 10s);
    // Waits up to `timeout` for the child to exit on its own; the wait status, or nullopt.
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);
    [[nodiscard]] std::optional<int> exit_status() const { return status_; }

  private:
    pid_t pid_ = -1;
    std::optional<int> status_;
};

// "exited with status 1", "killed by signal 9 (Killed)".
std::string describe_status(int wait_status);

}  // namespace pgtether::itest
