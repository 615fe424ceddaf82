#include "proxy/daemon/daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "proxy/net/log.hpp"

#include "core/config.hpp"
#include "core/fd_budget.hpp"

namespace pgtether {

namespace {

PathFacts facts_of(const struct stat& st) {
    return {st.st_uid, st.st_gid, st.st_mode, st.st_nlink};
}

// The pid an existing pidfile names, 0 if none. A symbolic link is not read (rename replaces it).
long pid_in_pidfile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[32] = {};
    struct stat st {};
    ssize_t n =
        ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? ::read(fd, text, sizeof text - 1) : 0;
    ::close(fd);
    return n > 0 ? std::strtol(text, nullptr, 10) : 0;
}

// Creates `tmp` afresh: never through a link, never an existing file. A leftover from a crash
// (or anything else under that name) is removed first; unlink never follows a link.
int create_pidfile_tmp(const std::string& tmp) {
    constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::open(tmp.c_str(), kFlags, 0644);
    if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) {
        fd = ::open(tmp.c_str(), kFlags, 0644);
    }
    return fd;
}

}  // namespace

void write_pidfile(const std::string& path, const std::optional<FileOwner>& owner) {
    long pid = pid_in_pidfile(path);
    if (pid > 0 && pid != getpid() && kill(static_cast<pid_t>(pid), 0) == 0) {
        throw std::runtime_error("pidfile " + path + " exists and process " +
                                 std::to_string(pid) + " is running");
    }
    std::string tmp = path + ".tmp";
    int fd = create_pidfile_tmp(tmp);
    if (fd < 0) {
        throw std::runtime_error("cannot create pidfile " + tmp + ": " + strerror(errno));
    }
    std::string text = std::to_string(getpid()) + "\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    // Handed over on the descriptor, so that the user can remove it at exit.
    if (ok && owner) ok = ::fchown(fd, owner->uid, owner->gid) == 0;
    int saved = errno;
    ::close(fd);
    // rename replaces whatever `path` is, a link included, and never follows it.
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) saved = errno;
        ::unlink(tmp.c_str());
        throw std::runtime_error("cannot write pidfile " + path + ": " + strerror(saved));
    }
}

void check_root_paths(const Config& config, const FileOwner& owner) {
    struct Checked {
        const char* what;
        std::string path;
    };
    std::vector<Checked> paths;
    if (!config.pidfile.empty()) {
        // The pidfile itself is replaced by rename, whatever it is.
        paths.push_back({"pidfile directory", parent_directory(config.pidfile)});
    }
    if (!config.logfile.empty()) {
        paths.push_back({"logfile directory", parent_directory(config.logfile)});
        paths.push_back({"logfile", config.logfile});
    }
    if (!config.unix_socket_dir.empty()) {
        paths.push_back({"unix_socket_dir", config.unix_socket_dir});
    }
    for (const auto& [what, path] : paths) {
        struct stat st {};
        // A file that is not there yet is created safely; a link is refused when opened.
        if (::lstat(path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
        if (S_ISDIR(st.st_mode) || what == std::string_view("logfile")) {
            if (auto hazard = root_path_hazard(what, path, facts_of(st), owner)) {
                throw std::runtime_error("refusing to start as root: " + *hazard);
            }
        }
    }
}

void raise_fd_limit(const Config& config, std::size_t auth_file_users) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        spdlog::warn("could not get RLIMIT_NOFILE: {}", strerror(errno));
        return;
    }
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            spdlog::info("raised the file descriptor limit from {} to {} (the hard limit)",
                         limit.rlim_cur, raised.rlim_cur);
            limit = raised;
        } else {
            spdlog::warn("could not raise the file descriptor limit from {} to {}: {}",
                         limit.rlim_cur, limit.rlim_max, strerror(errno));
        }
    }
    const FdBudget budget = expected_fd_use(config, auth_file_users);
    spdlog::info("{}", fd_budget_line(limit.rlim_cur, limit.rlim_max, config, budget));
    if (auto warning = fd_budget_warning(limit.rlim_cur, budget)) spdlog::warn("{}", *warning);
}

void remove_pidfile(const std::string& path) {
    if (!path.empty()) ::unlink(path.c_str());
}

void daemonize() {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + strerror(errno));
    if (pid > 0) _exit(0);
    setsid();
    // Fork again so the daemon can never reacquire a controlling terminal.
    pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + strerror(errno));
    if (pid > 0) _exit(0);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        if (devnull > STDERR_FILENO) ::close(devnull);
    }
}

}  // namespace pgtether
