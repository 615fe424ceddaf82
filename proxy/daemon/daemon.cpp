#include "proxy/daemon/daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace pgtether {

void write_pidfile(const std::string& path) {
    std::ifstream existing(path);
    long pid = 0;
    if (existing >> pid && pid > 0 && pid != getpid() && kill(static_cast<pid_t>(pid), 0) == 0) {
        throw std::runtime_error("pidfile " + path + " exists and process " +
                                 std::to_string(pid) + " is running");
    }
    std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error("cannot write pidfile " + path + ": " + strerror(errno));
    std::string text = std::to_string(getpid()) + "\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        throw std::runtime_error("cannot write pidfile " + path + ": " + strerror(errno));
    }
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
