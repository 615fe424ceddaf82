#include "proxy/net/listener.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "core/fd_budget.hpp"
#include "proxy/net/log.hpp"

namespace pgtether {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name, int rc) {
    throw std::runtime_error("cannot " + what + " " + name + ": " + uv_strerror(rc));
}

// Connections accepted per wake-up before the loop serves others again.
constexpr int kAcceptBatch = 256;

bool out_of_descriptors(int error) {
    return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

}  // namespace

void Listener::listen_tcp(const sockaddr* address, const std::string& name, int backlog,
                          bool reuseport) {
    tcp_ = true;
    name_ = name;
    fd_ = ::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fail("create socket for", name, -errno);
    open_ = true;
    int on = 1;
    // As libuv's uv_tcp_bind: a restart may bind while old connections are in TIME_WAIT.
    if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) {
        fail("set SO_REUSEADDR on", name, -errno);
    }
    if (reuseport && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
        fail("set SO_REUSEPORT on", name, -errno);
    }
    // IPv6 sockets only take IPv6 so that "*" can bind 0.0.0.0 and :: side by side.
    if (address->sa_family == AF_INET6 &&
        ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) {
        fail("set IPV6_V6ONLY on", name, -errno);
    }
    // tcp_socket_buffer on the listening socket, as PgBouncer sets it: accepted connections
    // inherit it before their handshake, whose window scale depends on it (Stream::connect_tcp).
    if (const int size = context_.tcp_options().socket_buffer; size > 0) {
        (void)::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        (void)::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    const socklen_t length =
        address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::bind(fd_, address, length) != 0 || ::listen(fd_, backlog) != 0) {
        fail("listen on", name, -errno);
    }
    watch(name);
}

void Listener::set_defer_accept(bool on) {
    if (!tcp_ || !open_) return;
    const int seconds = on ? 1 : 0;
    if (::setsockopt(fd_, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof seconds) != 0) {
        spdlog::warn("tune_accept: {} TCP_DEFER_ACCEPT on {}: {}", on ? "install" : "uninstall",
                     name_, std::strerror(errno));
    }
}

void Listener::listen_unix(const std::string& path, int mode, int backlog) {
    tcp_ = false;
    name_ = path;
    unix_path_ = path;
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path) fail("listen on", path, UV_ENAMETOOLONG);
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fail("create socket for", path, -errno);
    open_ = true;
    // A socket file left by a crashed process would make bind fail; PostgreSQL and PgBouncer
    // remove it too (a live process on it would own the TCP port as well, which we bind first).
    ::unlink(path.c_str());
    // The socket file gets its mode from the umask at bind: a chmod by name afterwards could
    // follow a link planted in its place (as root, on any file). The threads of other workers do
    // not run yet while the Unix socket is bound (only worker 0 binds one), so the process-wide
    // umask is ours for a moment.
    const mode_t previous_umask = ::umask(static_cast<mode_t>(~mode & 0777));
    int rc = ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    int saved = errno;
    ::umask(previous_umask);
    if (rc != 0 || ::listen(fd_, backlog) != 0) fail("listen on", path, -(rc != 0 ? saved : errno));
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        unix_dev_ = st.st_dev;
        unix_ino_ = st.st_ino;
    }
    watch(path);
}

void Listener::listen_shared(const Listener& other) {
    tcp_ = other.tcp_;
    name_ = other.name_;
    fd_ = ::fcntl(other.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) fail("share the socket of", name_, -errno);
    open_ = true;
    watch(name_);
}

void Listener::watch(const std::string& name) {
    int rc = uv_poll_init_socket(context_.loop(), &poll_, fd_);
    if (rc != 0) fail("watch", name, rc);
    uv_timer_init(context_.loop(), &pause_timer_);
    watching_ = true;
    poll_.data = this;
    pause_timer_.data = this;
    rc = uv_poll_start(&poll_, UV_READABLE, on_readable);
    if (rc != 0) fail("watch", name, rc);
}

void Listener::on_readable(uv_poll_t* handle, int status, int) {
    auto* self = static_cast<Listener*>(handle->data);
    if (status < 0) return;  // an error on a listening socket shows again at accept()
    self->accept_queued();
}

void Listener::accept_queued() {
    for (int i = 0; i < kAcceptBatch && open_; ++i) {
        int client_fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client_fd >= 0) {
            acceptor_.accept_client(client_fd, tcp_, false);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (out_of_descriptors(errno)) {
            pause_accepting(errno);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            spdlog::warn("accept() failed on {}: {}", name_, std::strerror(errno));
        }
        return;
    }
}

void Listener::pause_accepting(int error) {
    acceptor_.on_accept_out_of_descriptors(std::strerror(error));
    uv_poll_stop(&poll_);
    uv_timer_start(&pause_timer_, on_pause_over, kAcceptPauseMs, 0);
}

void Listener::on_pause_over(uv_timer_t* handle) {
    auto* self = static_cast<Listener*>(handle->data);
    if (!self->open_) return;
    uv_poll_start(&self->poll_, UV_READABLE, on_readable);
}

bool Listener::local_address(sockaddr_storage& out) const {
    socklen_t len = sizeof out;
    return open_ && tcp_ && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&out), &len) == 0;
}

void Listener::close() {
    if (!open_) return;
    open_ = false;
    if (watching_) {
        uv_close(reinterpret_cast<uv_handle_t*>(&poll_), nullptr);
        uv_close(reinterpret_cast<uv_handle_t*>(&pause_timer_), nullptr);
    }
    // uv_close has taken the descriptor out of the loop's epoll set; the socket is ours to close.
    ::close(fd_);
    struct stat st {};
    if (!unix_path_.empty() && ::stat(unix_path_.c_str(), &st) == 0 && st.st_dev == unix_dev_ &&
        st.st_ino == unix_ino_) {
        ::unlink(unix_path_.c_str());
    }
}

void Listener::drain_and_close() {
    if (!open_) return;
    // Bounded, so that a flood of connections cannot keep the loop here.
    constexpr int kMaxDrained = 10'000;
    for (int i = 0; i < kMaxDrained; ++i) {
        int client_fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client_fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (out_of_descriptors(errno)) {
                // What is still queued is reset at close: say so rather than drop it unseen.
                acceptor_.on_accept_out_of_descriptors(std::strerror(errno));
            }
            break;  // EAGAIN: the queue is empty (or an error we cannot help)
        }
        acceptor_.accept_client(client_fd, tcp_, true);
    }
    close();
}

std::vector<std::string> listen_hosts(const std::string& spec) {
    if (spec == "*") return {"0.0.0.0", "::"};
    return {spec};
}

AddrinfoList resolve_listen_address(const std::string& host, const std::string& port,
                                    const char* key) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* result = nullptr;
    if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result); rc != 0) {
        throw std::runtime_error(std::string("cannot resolve ") + key + " " + host + ": " +
                                 gai_strerror(rc));
    }
    return AddrinfoList(result);
}

}  // namespace pgtether
