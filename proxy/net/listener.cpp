#include "proxy/net/listener.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "proxy/daemon/worker.hpp"

namespace pgtether {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name, int rc) {
    throw std::runtime_error("cannot " + what + " " + name + ": " + uv_strerror(rc));
}

}  // namespace

void Listener::listen_tcp(const sockaddr* address, const std::string& name, int backlog,
                          bool reuseport) {
    tcp_ = true;
    name_ = name;
    // uv_tcp_init_ex creates the socket now, so that options can be set before bind (libuv 1.44
    // has no UV_TCP_REUSEPORT flag).
    int rc = uv_tcp_init_ex(worker_.loop(), &handle_.tcp, address->sa_family);
    if (rc != 0) fail("create socket for", name, rc);
    open_ = true;
    handle_.tcp.data = this;
    if (reuseport) {
        int on = 1;
        if (::setsockopt(fd(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
            fail("set SO_REUSEPORT on", name, -errno);
        }
    }
    // IPv6 sockets only take IPv6 so that "*" can bind 0.0.0.0 and :: side by side.
    unsigned flags = address->sa_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0;
    rc = uv_tcp_bind(&handle_.tcp, address, flags);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&handle_.tcp), backlog, on_connection);
    if (rc != 0) fail("listen on", name, rc);
}

void Listener::listen_unix(const std::string& path, int mode, int backlog) {
    tcp_ = false;
    name_ = path;
    unix_path_ = path;
    int rc = uv_pipe_init(worker_.loop(), &handle_.pipe, 0);
    if (rc != 0) fail("create socket for", path, rc);
    open_ = true;
    handle_.pipe.data = this;
    // A socket file left by a crashed process would make bind fail; PostgreSQL and PgBouncer
    // remove it too (a live process on it would own the TCP port as well, which we bind first).
    ::unlink(path.c_str());
    // The socket file gets its mode from the umask at bind: a chmod by name afterwards could
    // follow a link planted in its place (as root, on any file). The threads of other workers do
    // not run yet while the Unix socket is bound (only worker 0 binds one), so the process-wide
    // umask is ours for a moment.
    const mode_t previous_umask = ::umask(static_cast<mode_t>(~mode & 0777));
    rc = uv_pipe_bind(&handle_.pipe, path.c_str());
    ::umask(previous_umask);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&handle_.pipe), backlog, on_connection);
    if (rc != 0) fail("listen on", path, rc);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        unix_dev_ = st.st_dev;
        unix_ino_ = st.st_ino;
    }
}

void Listener::on_connection(uv_stream_t* handle, int status) {
    auto* self = static_cast<Listener*>(handle->data);
    if (status < 0) return;  // e.g. EMFILE: libuv retries on the next event
    self->worker_.accept_client(handle, self->tcp_);
}

int Listener::fd() const {
    uv_os_fd_t fd = -1;
    if (!open_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(&handle_), &fd) != 0) return -1;
    return fd;
}

bool Listener::local_address(sockaddr_storage& out) const {
    int len = sizeof out;
    return open_ && tcp_ &&
           uv_tcp_getsockname(&handle_.tcp, reinterpret_cast<sockaddr*>(&out), &len) == 0;
}

void Listener::close() {
    if (!open_) return;
    open_ = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_), nullptr);
    struct stat st {};
    if (!unix_path_.empty() && ::stat(unix_path_.c_str(), &st) == 0 && st.st_dev == unix_dev_ &&
        st.st_ino == unix_ino_) {
        ::unlink(unix_path_.c_str());
    }
}

void Listener::drain_and_close() {
    int listen_fd = fd();
    if (listen_fd < 0) return;
    // Bounded, so that a flood of connections cannot keep the loop here.
    constexpr int kMaxDrained = 10'000;
    for (int i = 0; i < kMaxDrained; ++i) {
        int client_fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client_fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            break;  // EAGAIN: the queue is empty (or an error we cannot help)
        }
        worker_.accept_client(reinterpret_cast<uv_stream_t*>(&handle_), tcp_, client_fd);
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
