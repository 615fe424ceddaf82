// What every socket of one event loop shares (docs/architecture.md, "Workers"): the libuv loop and
// its clock, the buffers every read and every TLS record pass through, and the TCP socket options
// of the configuration in force. A Worker is one (it derives from it); net/ needs nothing else of
// the worker, so Stream and Listener do not depend on the layers above them.
#pragma once

#include <uv.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pgtether {

// The tcp_* keys of the configuration (PgBouncer's; 0: the operating system's default).
struct TcpOptions {
    int user_timeout = 0;  // milliseconds (TCP_USER_TIMEOUT)
    bool keepalive = true;
    int keepidle = 0;
    int keepintvl = 0;
    int keepcnt = 0;
    int socket_buffer = 0;  // bytes, SO_SNDBUF and SO_RCVBUF (tcp_socket_buffer)
};

class LoopContext {
public:
    // `read_buffer`: the size of the buffer every socket read lands in (pkt_buf). Throws
    // std::runtime_error when the loop cannot be created.
    explicit LoopContext(std::size_t read_buffer);
    // Closes the loop. Its owner has closed every handle and run the loop until they were gone
    // (a handle left open leaves the loop unfreed: uv_loop_close's EBUSY, never a hang).
    ~LoopContext();
    LoopContext(const LoopContext&) = delete;
    LoopContext& operator=(const LoopContext&) = delete;

    [[nodiscard]] uv_loop_t* loop() { return &loop_; }
    [[nodiscard]] std::uint64_t now_ms() const { return uv_now(&loop_); }
    // A precise monotonic clock for query and transaction times (uv_now() has ms resolution).
    [[nodiscard]] static std::uint64_t now_us() { return uv_hrtime() / 1000; }

    // Every socket read of this loop lands here first (proxy/net/stream.cpp); nothing stays in it
    // across callbacks.
    [[nodiscard]] std::span<std::uint8_t> scratch() { return scratch_; }
    // Buffers for TLS (proxy/net/stream.cpp): decrypted input, encrypted output, scattered
    // plaintext gathered into one record. Shared by all streams of this loop, like scratch().
    [[nodiscard]] std::span<std::uint8_t> tls_plaintext() { return tls_plaintext_; }
    [[nodiscard]] std::string& tls_staging() { return tls_staging_; }
    [[nodiscard]] std::string& tls_gather() { return tls_gather_; }

    // Applied to every TCP socket when it connects or is accepted (a reload changes them for
    // sockets from then on).
    [[nodiscard]] const TcpOptions& tcp_options() const { return tcp_options_; }
    void set_tcp_options(const TcpOptions& options) { tcp_options_ = options; }

private:
    uv_loop_t loop_{};
    std::vector<std::uint8_t> scratch_;
    std::vector<std::uint8_t> tls_plaintext_;
    std::string tls_staging_;
    std::string tls_gather_;
    TcpOptions tcp_options_;
};

}  // namespace pgtether
