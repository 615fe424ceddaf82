// A listening socket (TCP address or Unix socket) that hands accepted connections to its Acceptor
// (the worker).
#pragma once

#include <netdb.h>
#include <sys/types.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "proxy/net/loop_context.hpp"

namespace pgtether {

// Who takes the connections a listener accepts (the worker that owns it).
class Acceptor {
public:
    // A connection accepted (`drained`: while the listener drains before closing, SHUTDOWN
    // WAIT_FOR_CLIENTS).
    virtual void accept_client(int fd, bool tcp, bool drained) = 0;
    // accept() failed for want of descriptors; the listener pauses.
    virtual void on_accept_out_of_descriptors(const std::string& error) = 0;
    virtual ~Acceptor() = default;
};

// The listening socket is pgtether's own descriptor, watched with a uv_poll handle, and accepted
// from with accept4 here: libuv's own accept path, at EMFILE, accepts and closes the pending
// connections to make room (its "EMFILE trick"), which dropped clients without a word. Here, when
// accept fails for want of descriptors, the listener counts it, logs it (rate-limited) and stops
// watching the socket for kAcceptPauseMs; the connections stay queued in the kernel.
class Listener {
public:
    Listener(LoopContext& context, Acceptor& acceptor) : context_(context), acceptor_(acceptor) {}
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // Throw std::runtime_error naming the address when binding or listening fails. With
    // `reuseport` the socket gets SO_REUSEPORT first, so that other processes (a second
    // pgtether, PgBouncer) may listen on the same address and the kernel spreads connections.
    void listen_tcp(const sockaddr* address, const std::string& name, int backlog, bool reuseport);
    void listen_unix(const std::string& path, int mode, int backlog);
    // TCP_DEFER_ACCEPT (tcp_defer_accept, PgBouncer's 1 s): the kernel hands over a connection
    // once its first bytes arrived, so a client that connects and says nothing takes no slot
    // until it speaks (or the kernel gives up waiting). No-op on a Unix socket. A failure is
    // logged, as PgBouncer does, and the listener works on without it.
    void set_defer_accept(bool on);
    // Watches a duplicate of `other`'s listening socket (another worker's): workers > 1 without
    // so_reuseport share one socket per address, each loop accepting from it. Throws
    // std::runtime_error.
    void listen_shared(const Listener& other);
    // Stops accepting; the object may be destroyed after the loop ran once more.
    void close();
    // Stops accepting without dropping anyone: first accepts, as clients, the connections the
    // kernel has already queued for this socket (closing a listening socket resets them), then
    // closes it. With SO_REUSEPORT, connections arriving afterwards go to the other listeners.
    void drain_and_close();
    [[nodiscard]] const std::string& name() const { return name_; }
    // The listening socket's descriptor, -1 once closed (SHOW FDS).
    [[nodiscard]] int fd() const { return open_ ? fd_ : -1; }
    [[nodiscard]] bool is_tcp() const { return tcp_; }
    // The bound TCP address (false for a Unix socket or when unknown).
    [[nodiscard]] bool local_address(sockaddr_storage& out) const;

private:
  static void on_readable(uv_poll_t* handle, int status, int events);
  static void on_pause_over(uv_timer_t* handle);
  // Starts watching `fd_` (bound and listening).
  void watch(const std::string& name);
  // Accepts what is queued, at most a batch (so that a flood cannot hold the loop).
  void accept_queued();
  // accept() failed with EMFILE / ENFILE (or ENOBUFS / ENOMEM): count, report, pause.
  void pause_accepting(int error);

  LoopContext& context_;
  Acceptor& acceptor_;
  uv_poll_t poll_{};
  uv_timer_t pause_timer_{};
  int fd_ = -1;
  bool tcp_ = true;
  bool open_ = false;
  bool watching_ = false;  // poll_ and pause_timer_ are initialized (and closed by close())
  std::string name_;
  std::string unix_path_;
  // The socket file we bound (device, inode): at close it is removed only if it is still
  // ours, not one a successor bound at the same path meanwhile.
  dev_t unix_dev_ = 0;
  ino_t unix_ino_ = 0;
};

// The hosts one entry of listen_addr or metrics_listen_addr stands for: "*" is every IPv4 and
// every IPv6 address.
[[nodiscard]] std::vector<std::string> listen_hosts(const std::string& spec);

struct AddrinfoFree {
    void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
using AddrinfoList = std::unique_ptr<addrinfo, AddrinfoFree>;

// The TCP addresses to listen on for `host` and `port` (never empty); throws
// std::runtime_error naming `key` (the configuration key) when the name does not resolve.
[[nodiscard]] AddrinfoList resolve_listen_address(const std::string& host,
                                                  const std::string& port, const char* key);

}  // namespace pgtether
