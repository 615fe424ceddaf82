// One socket (TCP or Unix) with pgtether's read and write discipline:
//
// * Reads go into the loop's shared scratch buffer (LoopContext); the handler consumes whole
//   messages straight from it and only an unfinished tail is copied into this stream's own
//   buffer. An idle connection therefore owns no buffer memory at all.
// * Writes are tried synchronously (uv_try_write); only what the kernel does not take is copied and
//   queued. write() reports whether anything is still queued so the caller can stop reading the
//   other side until on_stream_drained() (back-pressure).
// * Closing goes through uv_close; the owner is told in on_stream_closed() and frees itself there,
//   never earlier, because libuv may still hold the handle.
// * TLS, once started with start_tls(), lives entirely in here (proxy/net/tls.hpp): ciphertext read
//   from the socket is decrypted before the handler sees it, and what the handler writes is
//   encrypted on its way out. The handler keeps its plaintext view; a stream without TLS takes
//   exactly the paths it took before TLS existed.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <uv.h>

#include "protocol/bytes.hpp"
#include "proxy/net/byte_buffer.hpp"
#include "proxy/net/loop_context.hpp"

namespace pgtether {

class TlsContext;
class TlsSession;

// "1.2.3.4:5432" or "[::1]:5432" (PgBouncer's notation in logs); "?" for other families.
[[nodiscard]] std::string address_text(const sockaddr_storage& address);

class Stream {
public:
    class Handler {
    public:
        // Bytes are available: everything not yet consumed, oldest first. Returns how many bytes
        // were consumed; the rest is offered again with the next call.
        virtual std::size_t on_stream_data(protocol::ByteSpan data) = 0;
        // The peer closed the connection (status == UV_EOF) or the socket failed.
        virtual void on_stream_end(int status) = 0;
        // Every queued write has been handed to the kernel.
        virtual void on_stream_drained() = 0;
        // An outgoing connect finished (status 0) or failed.
        virtual void on_stream_connected(int status) = 0;
        // The handle is closed; the owner may now free itself.
        virtual void on_stream_closed() = 0;
        // The TLS handshake begun with start_tls() completed (`error` empty) or failed. Only
        // handlers that start TLS are ever told, hence the empty default.
        virtual void on_stream_tls_ready(const std::string& error) { (void)error; }

    protected:
        ~Handler() = default;
    };

    Stream(LoopContext& context, Handler& handler);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Set up the handle as TCP or as a Unix-domain pipe.
    [[nodiscard]] int init_tcp();
    [[nodiscard]] int init_pipe();
    // Takes an already accepted socket (closed here if libuv cannot take it).
    [[nodiscard]] int adopt(int fd);
    [[nodiscard]] int connect_tcp(const sockaddr* address);
    [[nodiscard]] int connect_pipe(const std::string& path);
    // TCP_NODELAY, and the configuration's tcp_keepalive, tcp_keepidle, tcp_keepintvl,
    // tcp_keepcnt and tcp_user_timeout, as PgBouncer tunes its client and server sockets. They
    // bound how long a peer that vanished without FIN or RST goes unnoticed (docs/deployment.md,
    // "Network faults"). No-op for Unix sockets.
    void apply_tcp_settings();

    void start_reading();
    void stop_reading();
    [[nodiscard]] bool reading() const { return reading_; }
    // Offers input kept from earlier reads to the handler again (after it was unable to consume it,
    // e.g. while a client waited for a server). Safe to call from inside on_stream_data.
    void redeliver_pending_input();
    // Puts `bytes` in front of the kept input, as if they had arrived again (a batch pgtether
    // sends once more: Server, a statement the backend lost). Not while the handler runs: its
    // view of the input would no longer match (dispatching()).
    void prepend_input(protocol::ByteSpan bytes);
    [[nodiscard]] bool dispatching() const { return dispatching_; }
    [[nodiscard]] std::size_t pending_input_size() const { return input_.size(); }
    // Whether the peer sent anything the loop has not read yet, or closed the connection: kept
    // input, or a non-blocking peek at the socket (one system call).
    [[nodiscard]] bool peer_spoke() const;

    // Queue bytes for the peer. Returns true when everything went to the kernel right away.
    bool write(protocol::ByteSpan data);
    bool write(std::string_view data) { return write(protocol::as_bytes(data)); }
    bool writev(const uv_buf_t* bufs, unsigned count);
    // Bytes written and not yet taken by the kernel.
    [[nodiscard]] std::size_t pending_output_size() const {
        return write_ ? write_->data.size() + write_->queued.size() : 0;
    }
    [[nodiscard]] bool write_pending() const {
        return write_in_flight_ || (write_ && !write_->queued.empty());
    }
    // Adds the memory this connection's buffers hold now -- input kept between reads, output
    // the kernel has not taken -- to `total` (SHOW MEM).
    void add_buffer_memory(BufferMemory& total) const {
        total.add(input_);
        if (write_) {
            total.add(write_->data);
            total.add(write_->queued);
        }
    }

    // Closes now; queued output is dropped.
    void close();
    // Sends what is queued, half-closes, discards further input until the peer closes, then closes.
    // This lets a final ErrorResponse reach a client that still has unread bytes in flight (closing
    // with unread input would make the kernel send RST and the client could lose the error).
    void close_after_flush();
    [[nodiscard]] bool closing() const { return closing_ || lingering_; }

    // Switches the connection to TLS from now on. `server_host` is the host a connecting side
    // expects (SNI, verify-full). `initial` holds bytes already received that open the handshake
    // (a direct-TLS ClientHello); the handler must consume them and everything else it was given,
    // because bytes that arrived in plaintext before the handshake are never trusted: should any be
    // left unconsumed, the stream ends with UV_EPROTO. The outcome arrives in
    // on_stream_tls_ready(); false here means the session could not even start (tls_error()).
    [[nodiscard]] bool start_tls(const TlsContext& context, const std::string& server_host,
                                 protocol::ByteSpan initial = {});
    [[nodiscard]] bool tls_active() const { return tls_ != nullptr; }
    // TLS has started and its handshake is not done: a handler must stop reading the plaintext
    // it was given (whatever is left is refused, see start_tls()).
    [[nodiscard]] bool tls_handshaking() const;
    // The session (nullptr without TLS), for its version, cipher and peer certificate.
    [[nodiscard]] const TlsSession* tls() const { return tls_.get(); }
    // Why TLS failed, once it has (the stream then ends with UV_EPROTO); kept by the session, so
    // that a plaintext connection carries no string for it.
    [[nodiscard]] const std::string& tls_error() const;

    [[nodiscard]] uv_stream_t* handle() { return reinterpret_cast<uv_stream_t*>(&handle_); }
    [[nodiscard]] bool is_tcp() const { return is_tcp_; }
    // "address:port" ("[v6address]:port") or "unix" of the peer, for logs.
    [[nodiscard]] std::string peer_name() const;
    // The peer's IP address without the port (TCP only); empty when unknown.
    [[nodiscard]] std::string peer_host() const;
    // The same for our own end.
    [[nodiscard]] std::string local_name() const;
    // The process at the other end of a Unix socket (SO_PEERCRED); nullopt for TCP or unknown.
    [[nodiscard]] std::optional<ucred> peer_credentials() const;
    // The peer's address (TCP only); false when unknown.
    [[nodiscard]] bool peer_address(sockaddr_storage& out) const;

private:
    static void on_alloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf);
    static void on_read(uv_stream_t* handle, ssize_t nread, const uv_buf_t* buf);
    static void on_write(uv_write_t* req, int status);
    static void on_connect(uv_connect_t* req, int status);
    static void on_shutdown(uv_shutdown_t* req, int status);
    static void on_close(uv_handle_t* handle);

    void dispatch(protocol::ByteSpan data, bool from_scratch);
    void start_write();
    void begin_linger();
    // The socket-level write path (ciphertext when TLS is on).
    bool raw_writev(const uv_buf_t* bufs, unsigned count);
    bool raw_write(const std::string& bytes);
    // TLS: ciphertext that arrived; plaintext to send; close_notify.
    void tls_receive(protocol::ByteSpan ciphertext);
    bool tls_writev(const uv_buf_t* bufs, unsigned count);
    void tls_fail(const std::string& error, bool in_handshake);
    void send_close_notify();

    LoopContext& context_;
    Handler& handler_;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } handle_;
    ByteBuffer input_;  // unconsumed input kept between reads
    // Output the kernel did not take at once: the uv_write in flight with its bytes, and what
    // queued up behind it. Allocated only while the kernel is behind, so that an idle connection
    // carries one pointer (idle memory per client, docs/benchmarks.md).
    struct PendingWrite {
        uv_write_t req;
        ByteBuffer data;    // handed to libuv (write_in_flight_)
        ByteBuffer queued;  // not handed to libuv yet
    };
    std::unique_ptr<PendingWrite> write_;
    PendingWrite& pending_write();  // allocates on first use
    std::unique_ptr<TlsSession> tls_;
    // One bit each: thousands of idle connections carry them.
    bool is_tcp_ : 1 = true;
    bool initialized_ : 1 = false;
    bool reading_ : 1 = false;
    bool dispatching_ : 1 = false;
    bool redeliver_ : 1 = false;
    bool write_in_flight_ : 1 = false;
    bool closing_ : 1 = false;
    bool lingering_ : 1 = false;
    bool close_when_drained_ : 1 = false;
    bool tls_failed_ : 1 = false;
};

}  // namespace pgtether
