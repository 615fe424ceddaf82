// Network fault injection for integration tests: a network namespace of the test's own, nftables
// rules inside it, and a TCP relay whose listening end lives inside it.
//
// The namespace is anonymous (unshare(CLONE_NEWNET) on a helper thread) and kept alive only by
// the file descriptor NetNamespace holds and by the processes started inside it (whose
// PR_SET_PDEATHSIG ends them with the test). It has nothing but its own loopback, and every nft
// table lives inside it, so no rule can reach another address of the machine, and a test that
// fails, throws or is killed leaves no namespace and no table behind: the kernel frees both with
// the last reference. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and the `nft` command (Debian
// package nftables, installed by scripts/lib/deps.sh).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pgtether::itest {

// Why network-fault tests cannot run here ("not root", "no nft command", ...), or nullopt.
std::optional<std::string> network_faults_unavailable();

// Runs `fn` on a new thread that first entered the namespace `netns_fd`, and waits for it. Sockets
// `fn` creates (libpq connections included) belong to that namespace for good and may be used
// from any thread afterwards. An exception `fn` throws is rethrown here.
void run_in_network_namespace(int netns_fd, const std::function<void()>& fn);

class NetNamespace {
  public:
    // Creates the namespace and brings its loopback up; throws std::runtime_error on failure.
    NetNamespace();
    ~NetNamespace();
    NetNamespace(const NetNamespace&) = delete;
    NetNamespace& operator=(const NetNamespace&) = delete;

    [[nodiscard]] int fd() const { return fd_; }
    void run_inside(const std::function<void()>& fn) const { run_in_network_namespace(fd_, fn); }
    // Runs `nft -f` on `script` inside the namespace; throws with nft's output on failure.
    void nft(const std::string& script) const;

  private:
    int fd_ = -1;
};

// One filter table inside a NetNamespace, hooked on output (loopback traffic passes output once
// per packet, so one hook sees both directions). Rules are added and flushed as a test goes.
class NftFilter {
  public:
    explicit NftFilter(const NetNamespace& ns);
    // Drops every TCP packet to or from `port` (a peer that vanished without FIN or RST).
    void blackhole(int port);
    // Drops about `percent`% of the TCP packets to or from `port`, at random.
    void lose(int port, int percent);
    // Removes every rule (the path is healthy again).
    void clear();

  private:
    const NetNamespace& ns_;
};

// A TCP relay: listens on 127.0.0.1 (inside a namespace, or in the test's own) and forwards
// every connection to a Unix socket (PostgreSQL's), optionally holding each chunk `delay` before
// passing it on (added latency, both directions). The relay's own end of each connection is a
// user-space process, so a blackhole on its port looks to the connecting side like a peer that
// vanished.
//
// With `HideParameter`, it stands for an older server instead: the ParameterStatus messages of
// that name are taken out of what the server sends (PostgreSQL 13 and older send no
// in_hot_standby). It reads the server's side as a stream of messages from the first byte, so the
// connecting side must not ask for TLS (server_tls_sslmode = disable).
class TcpRelay {
  public:
    TcpRelay(const NetNamespace& ns, std::string unix_path,
             std::chrono::milliseconds delay = std::chrono::milliseconds{0});
    // The same on this process's own loopback (no namespace, no root needed): a slow server.
    explicit TcpRelay(std::string unix_path,
                      std::chrono::milliseconds delay = std::chrono::milliseconds{0});
    struct HideParameter {
        std::string name;
    };
    TcpRelay(std::string unix_path, HideParameter hide);
    ~TcpRelay();
    TcpRelay(const TcpRelay&) = delete;
    TcpRelay& operator=(const TcpRelay&) = delete;

    [[nodiscard]] int port() const { return port_; }
    // Connections accepted so far.
    [[nodiscard]] int accepted() const { return accepted_.load(); }

  private:
    void listen_on_loopback();
    void accept_loop();
    void pump(int from, int to, bool from_server);
    // The whole messages at the front of the server's bytes `pending`, without those hidden;
    // they leave `pending`, an incomplete one stays.
    std::string filter_server_messages(std::string& pending) const;

    std::string unix_path_;
    std::chrono::milliseconds delay_;
    std::string hidden_parameter_;  // empty: bytes pass as they are
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> accepted_{0};
    std::mutex mutex_;
    std::vector<int> fds_;
    std::vector<std::thread> threads_;
    std::thread acceptor_;
};

}  // namespace pgtether::itest
