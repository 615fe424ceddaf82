#include "proxy/net/stream.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>

#include <arpa/inet.h>

#include "proxy/net/tls.hpp"

namespace pgtether {

namespace {

Stream* stream_of(uv_handle_t* handle) { return static_cast<Stream*>(handle->data); }

}  // namespace

Stream::Stream(LoopContext& context, Handler& handler) : context_(context), handler_(handler) {}

Stream::~Stream() = default;

int Stream::init_tcp() {
    is_tcp_ = true;
    int rc = uv_tcp_init(context_.loop(), &handle_.tcp);
    if (rc == 0) {
        initialized_ = true;
        handle_.tcp.data = this;
    }
    return rc;
}

int Stream::init_pipe() {
    is_tcp_ = false;
    int rc = uv_pipe_init(context_.loop(), &handle_.pipe, 0);
    if (rc == 0) {
        initialized_ = true;
        handle_.pipe.data = this;
    }
    return rc;
}

int Stream::adopt(int fd) {
    int rc = is_tcp_ ? uv_tcp_open(&handle_.tcp, fd) : uv_pipe_open(&handle_.pipe, fd);
    if (rc != 0) ::close(fd);
    return rc;
}

int Stream::connect_tcp(const sockaddr* address) {
    // tcp_socket_buffer is set before the SYN, as PgBouncer does: the handshake agrees on a
    // window scale from the receive buffer at that moment. A buffer shrunk afterwards leaves a
    // window of a few scaled units that the kernel announced late (a replication stream through
    // 4096-byte buffers moved 8 KB per 200 ms).
    if (const int size = context_.tcp_options().socket_buffer; size > 0) {
        const int fd = ::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        if (const int rc = uv_tcp_open(&handle_.tcp, fd); rc != 0) {
            ::close(fd);
            return rc;
        }
    }
    auto* req = new uv_connect_t;
    req->data = this;
    int rc = uv_tcp_connect(req, &handle_.tcp, address, on_connect);
    if (rc != 0) delete req;
    return rc;
}

int Stream::connect_pipe(const std::string& path) {
    auto* req = new uv_connect_t;
    req->data = this;
    uv_pipe_connect(req, &handle_.pipe, path.c_str(), on_connect);
    return 0;
}

void Stream::on_connect(uv_connect_t* req, int status) {
    auto* self = static_cast<Stream*>(req->data);
    delete req;
    if (status == UV_ECANCELED || self->closing_) return;
    self->handler_.on_stream_connected(status);
}

void Stream::apply_tcp_settings() {
    if (!is_tcp_) return;
    const TcpOptions& tcp = context_.tcp_options();
    // Small request/response messages dominate: never let Nagle delay them.
    uv_tcp_nodelay(&handle_.tcp, 1);
    uv_os_fd_t fd;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(&handle_.tcp), &fd) != 0) return;
    // 0 means "keep the operating system's default", as in PgBouncer. Failures are ignored as
    // there: a socket option the kernel refuses changes how fast a fault is seen, nothing else.
    auto set = [fd](int level, int option, int value) {
        (void)setsockopt(fd, level, option, &value, sizeof value);
    };
    // Data unacknowledged this long (milliseconds) makes the kernel drop the connection with
    // ETIMEDOUT; this also bounds keepalive probing (tcp(7), TCP_USER_TIMEOUT).
    if (tcp.user_timeout > 0) set(IPPROTO_TCP, TCP_USER_TIMEOUT, tcp.user_timeout);
    // tcp_socket_buffer: both buffers, as PgBouncer sets them (the kernel doubles the value for
    // its bookkeeping and stops autotuning them). Already set before the handshake on sockets
    // pgtether connects or accepts (connect_tcp, Listener); again here for adopted ones.
    if (tcp.socket_buffer > 0) {
        set(SOL_SOCKET, SO_SNDBUF, tcp.socket_buffer);
        set(SOL_SOCKET, SO_RCVBUF, tcp.socket_buffer);
    }
    if (!tcp.keepalive) return;
    set(SOL_SOCKET, SO_KEEPALIVE, 1);
    if (tcp.keepidle > 0) set(IPPROTO_TCP, TCP_KEEPIDLE, tcp.keepidle);
    if (tcp.keepintvl > 0) set(IPPROTO_TCP, TCP_KEEPINTVL, tcp.keepintvl);
    if (tcp.keepcnt > 0) set(IPPROTO_TCP, TCP_KEEPCNT, tcp.keepcnt);
}

bool Stream::peer_address(sockaddr_storage& out) const {
    if (!is_tcp_) return false;
    int len = sizeof out;
    return uv_tcp_getpeername(&handle_.tcp, reinterpret_cast<sockaddr*>(&out), &len) == 0;
}

std::string address_text(const sockaddr_storage& ss) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (ss.ss_family == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
        uv_ip4_name(sin, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(sin->sin_port));
    }
    if (ss.ss_family == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
        uv_ip6_name(sin6, host, sizeof host);
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(sin6->sin6_port));
    }
    return "?";
}

std::string Stream::peer_name() const {
    if (!is_tcp_) return "unix";
    sockaddr_storage ss{};
    int len = sizeof ss;
    if (uv_tcp_getpeername(&handle_.tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
    return address_text(ss);
}

std::optional<ucred> Stream::peer_credentials() const {
    uv_os_fd_t fd = -1;
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (is_tcp_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(&handle_), &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
        return std::nullopt;
    }
    return credentials;
}

std::string Stream::local_name() const {
    if (!is_tcp_) return "unix";
    sockaddr_storage ss{};
    int len = sizeof ss;
    if (uv_tcp_getsockname(&handle_.tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
    return address_text(ss);
}

bool Stream::peer_spoke() const {
    if (!input_.empty()) return true;
    uv_os_fd_t fd;
    if (uv_fileno(reinterpret_cast<const uv_handle_t*>(&handle_), &fd) != 0) return false;
    char byte;
    ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    // Data (> 0), an orderly close (0) or an error such as ECONNRESET: all something to read.
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

std::string Stream::peer_host() const {
    sockaddr_storage ss{};
    if (!peer_address(ss)) return {};
    char host[INET6_ADDRSTRLEN] = "";
    if (ss.ss_family == AF_INET) {
        uv_ip4_name(reinterpret_cast<const sockaddr_in*>(&ss), host, sizeof host);
    } else if (ss.ss_family == AF_INET6) {
        uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(&ss), host, sizeof host);
    }
    return host;
}

void Stream::start_reading() {
    if (reading_ || closing_ || lingering_) return;
    if (uv_read_start(handle(), on_alloc, on_read) == 0) reading_ = true;
}

void Stream::stop_reading() {
    if (!reading_) return;
    uv_read_stop(handle());
    reading_ = false;
}

void Stream::on_alloc(uv_handle_t* handle, std::size_t /*suggested*/, uv_buf_t* buf) {
    auto* self = stream_of(handle);
    auto scratch = self->context_.scratch();
    // With TLS, input_ holds plaintext; ciphertext always lands in the scratch buffer.
    if (self->input_.empty() || self->tls_) {
        *buf = uv_buf_init(reinterpret_cast<char*>(scratch.data()),
                           static_cast<unsigned>(scratch.size()));
    } else {
        // Append directly behind the kept tail so a long message is assembled without extra copies.
        auto room = self->input_.prepare(scratch.size());
        *buf = uv_buf_init(reinterpret_cast<char*>(room.data()), static_cast<unsigned>(room.size()));
    }
}

void Stream::on_read(uv_stream_t* handle, ssize_t nread, const uv_buf_t* buf) {
    auto* self = stream_of(reinterpret_cast<uv_handle_t*>(handle));
    if (nread == 0) return;  // EAGAIN: nothing to do
    if (nread < 0) {
        self->stop_reading();
        if (self->lingering_) {
            self->lingering_ = false;
            self->close();
            return;
        }
        if (!self->closing_) self->handler_.on_stream_end(static_cast<int>(nread));
        return;
    }
    if (self->lingering_ || self->closing_) return;  // discarding input while closing
    auto n = static_cast<std::size_t>(nread);
    auto scratch = self->context_.scratch();
    if (self->tls_) {
        self->tls_receive({scratch.data(), n});
        return;
    }
    if (reinterpret_cast<std::uint8_t*>(buf->base) == scratch.data()) {
        self->dispatch({scratch.data(), n}, true);
    } else {
        self->input_.commit(n);
        self->dispatch(self->input_.data(), false);
    }
}

void Stream::dispatch(protocol::ByteSpan data, bool from_scratch) {
    dispatching_ = true;
    const bool was_plaintext = !tls_;
    std::size_t consumed = handler_.on_stream_data(data);
    if (closing_ || lingering_) {
        dispatching_ = false;
        input_.clear();
        return;
    }
    if (was_plaintext && tls_ && consumed < data.size()) {
        // TLS started while plaintext bytes were still waiting behind the request for it. They
        // arrived unencrypted, so anyone on the path could have put them there
        // (CVE-2021-23214, CVE-2021-23222): never hand them to the handler.
        dispatching_ = false;
        input_.clear();
        tls_fail("unencrypted data received before the TLS handshake", true);
        return;
    }
    if (from_scratch) {
        input_.append(data.subspan(consumed));
    } else {
        input_.consume(consumed);
    }
    // The handler asked for its kept input to be offered again (its state changed while it ran).
    while (redeliver_ && !input_.empty() && !closing_ && !lingering_) {
        redeliver_ = false;
        consumed = handler_.on_stream_data(input_.data());
        if (closing_ || lingering_) {
            input_.clear();
            break;
        }
        input_.consume(consumed);
    }
    redeliver_ = false;
    dispatching_ = false;
}

void Stream::prepend_input(protocol::ByteSpan bytes) {
    assert(!dispatching_);
    ByteBuffer joined;
    joined.append(bytes);
    joined.append(input_.data());
    input_ = std::move(joined);
}

void Stream::redeliver_pending_input() {
    if (dispatching_) {
        redeliver_ = true;
        return;
    }
    if (input_.empty() || closing_ || lingering_) return;
    dispatch(input_.data(), false);
}

bool Stream::write(protocol::ByteSpan data) {
    uv_buf_t buf = uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(data.data())),
                               static_cast<unsigned>(data.size()));
    return writev(&buf, 1);
}

bool Stream::writev(const uv_buf_t* bufs, unsigned count) {
    if (tls_) return tls_writev(bufs, count);
    return raw_writev(bufs, count);
}

bool Stream::raw_write(const std::string& bytes) {
    if (bytes.empty()) return !write_pending();
    uv_buf_t buf =
        uv_buf_init(const_cast<char*>(bytes.data()), static_cast<unsigned>(bytes.size()));
    return raw_writev(&buf, 1);
}

bool Stream::raw_writev(const uv_buf_t* bufs, unsigned count) {
    if (closing_ || lingering_) return true;
    std::size_t total = 0;
    for (unsigned i = 0; i < count; ++i) total += bufs[i].len;
    if (total == 0) return !write_pending();
    std::size_t written = 0;
    if (!write_pending()) {
        int rc = uv_try_write(handle(), bufs, count);
        if (rc >= 0) {
            written = static_cast<std::size_t>(rc);
        } else if (rc != UV_EAGAIN) {
            // The socket is broken; the read side reports it (EOF or reset), so just drop the data.
            return true;
        }
    }
    if (written == total) return true;
    // Copy what the kernel did not take, skipping the part that was written.
    for (unsigned i = 0; i < count; ++i) {
        std::size_t len = bufs[i].len;
        if (written >= len) {
            written -= len;
            continue;
        }
        pending_write().queued.append(protocol::ByteSpan(
            reinterpret_cast<const std::uint8_t*>(bufs[i].base) + written, len - written));
        written = 0;
    }
    if (!write_in_flight_) start_write();
    return false;
}

// ---------------------------------------------------------------------------------------------
// TLS

bool Stream::start_tls(const TlsContext& context, const std::string& server_host,
                       protocol::ByteSpan initial) {
    tls_ = std::make_unique<TlsSession>(context, server_host);
    if (!tls_->error().empty()) {
        tls_failed_ = true;
        return false;
    }
    // The connecting side speaks first (ClientHello); the accepting side may already hold the
    // peer's first flight (direct TLS). Neither can complete the handshake yet, so the outcome is
    // reported later, from tls_receive(), never from inside this call.
    std::string out;
    tls_->set_output(&out);
    tls_->set_input(initial);
    auto status = tls_->handshake();
    tls_->set_input({});
    tls_->set_output(nullptr);
    raw_write(out);
    if (status == TlsSession::Status::Failed) {
        tls_failed_ = true;
        return false;
    }
    return true;
}

bool Stream::tls_handshaking() const { return tls_ && !tls_->established(); }

void Stream::tls_fail(const std::string& error, bool in_handshake) {
    if (tls_failed_) return;
    tls_failed_ = true;
    if (tls_ && error != tls_->error()) tls_->set_error(error);
    stop_reading();
    if (in_handshake) {
        handler_.on_stream_tls_ready(error);
    } else {
        handler_.on_stream_end(UV_EPROTO);
    }
    if (!closing_ && !lingering_) close();
}

void Stream::tls_receive(protocol::ByteSpan ciphertext) {
    if (tls_failed_) return;
    // The ciphertext stays in the loop's scratch buffer while OpenSSL consumes it; plaintext
    // goes to the loop's TLS buffer (or behind input_ kept from earlier), and ciphertext
    // OpenSSL wants to send (handshake, alerts, key updates) is flushed before the handler runs,
    // because the handler's own writes reuse the staging buffer.
    std::string& staging = context_.tls_staging();
    tls_->set_input(ciphertext);
    if (!tls_->established()) {
        staging.clear();
        tls_->set_output(&staging);
        auto status = tls_->handshake();
        tls_->set_output(nullptr);
        raw_write(staging);
        if (status == TlsSession::Status::Failed) {
            tls_->set_input({});
            tls_fail(tls_->error(), true);
            return;
        }
        if (status != TlsSession::Status::Ok) {
            tls_->set_input({});
            return;  // WantInput: everything was consumed
        }
        auto rest = ciphertext.last(tls_->input_left());
        tls_->set_input({});
        handler_.on_stream_tls_ready({});
        if (closing_ || lingering_ || tls_failed_) return;
        // Application data may follow the handshake in the same read (TLS 1.3: the client's
        // Finished and its StartupMessage).
        tls_->set_input(rest);
    }
    constexpr std::size_t kGrowBy = 16 * 1024;
    for (;;) {
        const bool to_scratch = input_.empty();
        std::span<std::uint8_t> room =
            to_scratch ? context_.tls_plaintext() : input_.prepare(kGrowBy);
        std::size_t got = 0;
        auto status = TlsSession::Status::Ok;
        staging.clear();
        tls_->set_output(&staging);
        while (got < room.size()) {
            if (!tls_->readable()) {
                status = TlsSession::Status::WantInput;
                break;
            }
            auto [s, n] = tls_->read(room.subspan(got));
            got += n;
            if (s != TlsSession::Status::Ok) {
                status = s;
                break;
            }
        }
        tls_->set_output(nullptr);
        raw_write(staging);
        if (got > 0) {
            // A handler that stopped reading (back-pressure, waiting for a server) gets the rest
            // later through redeliver_pending_input(), exactly like unconsumed plaintext.
            if (to_scratch) {
                if (reading_) {
                    dispatch({room.data(), got}, true);
                } else {
                    input_.append(protocol::ByteSpan(room.data(), got));
                }
            } else {
                input_.commit(got);
                if (reading_) dispatch(input_.data(), false);
            }
        }
        if (closing_ || lingering_ || tls_failed_) break;
        if (status == TlsSession::Status::WantInput) break;
        if (status == TlsSession::Status::Closed) {
            tls_->set_input({});
            stop_reading();
            handler_.on_stream_end(UV_EOF);
            return;
        }
        if (status == TlsSession::Status::Failed) {
            tls_->set_input({});
            tls_fail(tls_->error(), false);
            return;
        }
        // The room filled up: there is more plaintext.
    }
    tls_->set_input({});
}

bool Stream::tls_writev(const uv_buf_t* bufs, unsigned count) {
    if (closing_ || lingering_) return true;
    // Before the handshake completes nothing can be sent securely, and after a TLS failure
    // nothing at all; the connection is on its way to being closed in both cases.
    if (tls_failed_ || !tls_->established()) return true;
    std::string& staging = context_.tls_staging();
    staging.clear();
    tls_->set_output(&staging);
    bool ok = true;
    std::size_t total = 0;
    for (unsigned i = 0; i < count; ++i) total += bufs[i].len;
    auto span_of = [](const uv_buf_t& b) {
        return protocol::ByteSpan(reinterpret_cast<const std::uint8_t*>(b.base), b.len);
    };
    // Every SSL_write becomes at least one record (header, MAC, an encryption pass): gather small
    // scattered pieces into one record instead of sending a record per piece.
    constexpr std::size_t kMaxRecord = 16 * 1024;
    if (count > 1 && total <= kMaxRecord) {
        std::string& gather = context_.tls_gather();
        gather.clear();
        for (unsigned i = 0; i < count; ++i) gather.append(bufs[i].base, bufs[i].len);
        ok = tls_->write(protocol::as_bytes(gather));
    } else {
        for (unsigned i = 0; i < count && ok; ++i) ok = tls_->write(span_of(bufs[i]));
    }
    tls_->set_output(nullptr);
    // A failed write (!ok) broke the session: the peer will see garbage or nothing. Its reason
    // is the session's error (tls_error()), which the read side reports (the owner closes).
    return raw_write(staging);
}

void Stream::send_close_notify() {
    if (!tls_ || tls_failed_ || !tls_->established()) return;
    std::string out;
    tls_->set_output(&out);
    tls_->shutdown();
    tls_->set_output(nullptr);
    raw_write(out);
}

Stream::PendingWrite& Stream::pending_write() {
    if (!write_) write_ = std::make_unique<PendingWrite>();
    return *write_;
}

const std::string& Stream::tls_error() const {
    static const std::string none;
    return tls_ ? tls_->error() : none;
}

void Stream::start_write() {
    PendingWrite& pending = pending_write();
    std::swap(pending.data, pending.queued);
    write_->req.data = this;
    auto data = write_->data.data();
    uv_buf_t buf = uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(data.data())),
                               static_cast<unsigned>(data.size()));
    if (uv_write(&write_->req, handle(), &buf, 1, on_write) == 0) {
        write_in_flight_ = true;
    } else {
        write_->data.clear();
    }
}

void Stream::on_write(uv_write_t* req, int status) {
    auto* self = static_cast<Stream*>(req->data);
    self->write_in_flight_ = false;
    self->write_->data.clear();
    if (status == UV_ECANCELED || self->closing_) return;
    if (status < 0) self->write_->queued.clear();  // broken socket: the read side reports it
    if (!self->write_->queued.empty()) {
        self->start_write();
        return;
    }
    if (self->close_when_drained_) {
        self->begin_linger();
        return;
    }
    self->write_.reset();
    self->handler_.on_stream_drained();
}

void Stream::close_after_flush() {
    if (closing_ || lingering_ || close_when_drained_) return;
    if (write_pending()) {
        close_when_drained_ = true;
        stop_reading();
        return;
    }
    begin_linger();
}

void Stream::begin_linger() {
    close_when_drained_ = false;
    send_close_notify();
    auto* req = new uv_shutdown_t;
    req->data = this;
    if (uv_shutdown(req, handle(), on_shutdown) != 0) {
        delete req;
        close();
        return;
    }
    lingering_ = true;
    input_.clear();
}

void Stream::on_shutdown(uv_shutdown_t* req, int status) {
    auto* self = static_cast<Stream*>(req->data);
    delete req;
    if (status == UV_ECANCELED || self->closing_) return;
    if (status < 0) {
        self->lingering_ = false;
        self->close();
        return;
    }
    // Read (and discard) until the peer closes; the owner's janitor bounds how long this may take.
    self->reading_ = false;
    if (uv_read_start(self->handle(), on_alloc, on_read) == 0) {
        self->reading_ = true;
    } else {
        self->lingering_ = false;
        self->close();
    }
}

void Stream::close() {
    if (closing_) return;
    // A polite close_notify when it can go right away; an abrupt close needs no more than that.
    if (!lingering_ && initialized_ && !write_pending()) send_close_notify();
    closing_ = true;
    lingering_ = false;
    input_.clear();
    // The PendingWrite itself stays: libuv still owns its request until on_write(ECANCELED).
    if (write_) write_->queued.clear();
    if (!initialized_) {
        handler_.on_stream_closed();
        return;
    }
    stop_reading();
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_), on_close);
}

void Stream::on_close(uv_handle_t* handle) {
    auto* self = stream_of(handle);
    self->handler_.on_stream_closed();
}

}  // namespace pgtether
