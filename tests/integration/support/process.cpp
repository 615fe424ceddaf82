// Child processes, temporary directories and free ports for integration tests.
#include "tests/integration/support/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace pgtether::itest {

namespace {

std::string errno_text(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

sockaddr_in loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

// Whether we can bind 127.0.0.1:port right now. SO_REUSEADDR as the daemons use it: a port in
// TIME_WAIT is fine for them too, one with a listener is not.
bool can_bind(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto addr = loopback(port);
    bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

std::pair<int, int> ephemeral_range() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 32768, high = 60999;
    in >> low >> high;
    return {low, high};
}

}  // namespace

std::optional<DaemonUser> daemon_user() {
    if (::geteuid() != 0) return std::nullopt;
    const char* name = std::getenv("PGT_DAEMON_USER");
    if (name == nullptr || *name == '\0') name = "postgres";
    const passwd* pw = ::getpwnam(name);
    if (pw == nullptr) {
        throw std::runtime_error(std::string("running as root, but there is no user ") + name +
                                 " to run daemons as");
    }
    return DaemonUser{pw->pw_uid, pw->pw_gid};
}

TempDir::TempDir(const std::string& prefix, const std::string& base) {
    std::string tmpl = base + "/" + prefix + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error(errno_text("mkdtemp"));
    path_ = tmpl;
    // World-traversable: clients running as another user must reach Unix sockets in here.
    ::chmod(path_.c_str(), 0755);
    if (auto user = daemon_user()) {
        if (::chown(path_.c_str(), user->uid, user->gid) != 0) {
            throw std::runtime_error(errno_text("chown " + path_));
        }
    }
}

TempDir::~TempDir() {
    const char* keep = std::getenv("PGT_KEEP_TMP");
    if (keep != nullptr && *keep != '\0') return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write_file(const std::string& name, const std::string& content) const {
    std::string path = path_ + "/" + name;
    {
        std::ofstream out(path, std::ios::trunc);
        out << content;
        if (!out) throw std::runtime_error("cannot write " + path);
    }
    ::chmod(path.c_str(), 0644);
    if (auto user = daemon_user()) {
        if (::chown(path.c_str(), user->uid, user->gid) != 0) {
            throw std::runtime_error(errno_text("chown " + path));
        }
    }
    return path;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

int free_port() {
    static std::set<int> handed_out;
    static std::mt19937 rng{std::random_device{}()};
    auto [low, high] = ephemeral_range();
    (void)high;
    if (low <= 20000) low = 61000;  // unusual range: fall back to the ports above the default one
    std::uniform_int_distribution<int> pick(15000, low - 1);
    for (int attempt = 0; attempt < 1000; ++attempt) {
        int port = pick(rng);
        if (handed_out.count(port) != 0) continue;
        if (can_bind(port)) {
            handed_out.insert(port);
            return port;
        }
    }
    throw std::runtime_error("no free TCP port found");
}

bool port_accepts(const std::string& host, int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
        ::close(fd);
        return false;
    }
    bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

ChildProcess::ChildProcess(const Options& options) {
    if (options.argv.empty()) throw std::runtime_error("ChildProcess: empty argv");

    // Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
    std::vector<char*> argv;
    for (const auto& arg : options.argv)
        argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::optional<DaemonUser> user;
    if (options.as_daemon_user) user = daemon_user();

    int log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error(errno_text("open " + options.log_path));
    int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int status_pipe[2];
    if (null_fd < 0 || ::pipe2(status_pipe, O_CLOEXEC) != 0) {
        ::close(log_fd);
        if (null_fd >= 0) ::close(null_fd);
        throw std::runtime_error(errno_text("pipe"));
    }
    pid_t parent = ::getpid();

    pid_t pid = ::fork();
    if (pid < 0) {
        ::close(log_fd);
        ::close(null_fd);
        ::close(status_pipe[0]);
        ::close(status_pipe[1]);
        throw std::runtime_error(errno_text("fork"));
    }
    if (pid == 0) {
        // Child. On any failure report errno over the pipe and _exit.
        auto fail = [&](int err) {
            ssize_t ignored = ::write(status_pipe[1], &err, sizeof err);
            (void)ignored;
            ::_exit(127);
        };
        ::setpgid(0, 0);  // a terminal's Ctrl-C reaches the test, which then stops us itself
        // Before the credential change: entering a namespace needs CAP_SYS_ADMIN.
        if (options.netns_fd >= 0 && ::setns(options.netns_fd, CLONE_NEWNET) != 0) fail(errno);
        if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(log_fd, STDOUT_FILENO) < 0 ||
            ::dup2(log_fd, STDERR_FILENO) < 0) {
            fail(errno);
        }
        if (options.fd_limit) {
            const rlimit limit{*options.fd_limit, *options.fd_limit};
            if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) fail(errno);
        }
        if (user) {
            if (::setgroups(1, &user->gid) != 0 || ::setgid(user->gid) != 0 ||
                ::setuid(user->uid) != 0) {
                fail(errno);
            }
        }
        // After the credential change, which would clear it (prctl(2)).
        if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) fail(errno);
        if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
        ::execv(argv[0], argv.data());
        fail(errno);
    }

    ::close(log_fd);
    ::close(null_fd);
    ::close(status_pipe[1]);
    int child_errno = 0;
    ssize_t n;
    do {
        n = ::read(status_pipe[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    ::close(status_pipe[0]);
    pid_ = pid;
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        status_ = status;
        throw std::runtime_error("cannot start " + options.argv[0] + ": " +
                                 std::strerror(child_errno));
    }
}

ChildProcess::~ChildProcess() {
    stop();
}

bool ChildProcess::running() {
    if (status_ || pid_ <= 0) return false;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
        status_ = status;
        return false;
    }
    return r == 0;
}

bool ChildProcess::signal(int sig) {
    if (!running()) return false;
    return ::kill(pid_, sig) == 0;
}

std::optional<int> ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(10ms);
    }
    return status_;
}

std::optional<int> ChildProcess::stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return status_;
    if (signal(SIGTERM)) {
        if (!wait_exit(grace)) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            if (::waitpid(pid_, &status, 0) == pid_) status_ = status;
        }
    }
    return status_;
}

std::string describe_status(int wait_status) {
    if (WIFEXITED(wait_status))
        return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
    if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        return "killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
    }
    return "wait status " + std::to_string(wait_status);
}

}  // namespace pgtether::itest
