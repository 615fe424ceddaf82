// Network fault injection: a namespace of the test's own, nftables inside it, a TCP relay.
#include "tests/integration/support/netns.hpp"
#include "tests/integration/support/raw_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string_view>

#include "tests/integration/support/process.hpp"

namespace pgtether::itest {

namespace {

std::string errno_text(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

std::string nft_binary() {
    for (const char* path : {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"}) {
        if (::access(path, X_OK) == 0) return path;
    }
    return "";
}

// Inside a fresh namespace the loopback is down; a socket ioctl brings it up (no `ip` needed).
void loopback_up() {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(errno_text("socket"));
    ifreq request{};
    std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    bool ok = ::ioctl(fd, SIOCGIFFLAGS, &request) == 0;
    if (ok) {
        request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP | IFF_RUNNING);
        ok = ::ioctl(fd, SIOCSIFFLAGS, &request) == 0;
    }
    int saved = errno;
    ::close(fd);
    errno = saved;
    if (!ok) throw std::runtime_error(errno_text("bringing up lo in the test namespace"));
}

bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace

std::optional<std::string> network_faults_unavailable() {
    if (::geteuid() != 0) return "not root (network namespaces and nftables need it)";
    if (nft_binary().empty()) {
        return "no nft command (Debian package nftables; scripts/lib/deps.sh installs it)";
    }
    try {
        NetNamespace probe;
        probe.nft("table inet pgt_probe {}\n");
    } catch (const std::exception& e) {
        return std::string("no network namespace with nftables here: ") + e.what();
    }
    return std::nullopt;
}

void run_in_network_namespace(int netns_fd, const std::function<void()>& fn) {
    std::exception_ptr failure;
    std::thread thread([&] {
        try {
            // setns() moves only this thread; it ends afterwards, so nobody else runs in there.
            if (::setns(netns_fd, CLONE_NEWNET) != 0) {
                throw std::runtime_error(errno_text("setns into the test namespace"));
            }
            fn();
        } catch (...) {
            failure = std::current_exception();
        }
    });
    thread.join();
    if (failure) std::rethrow_exception(failure);
}

NetNamespace::NetNamespace() {
    std::exception_ptr failure;
    std::thread thread([&] {
        try {
            if (::unshare(CLONE_NEWNET) != 0) throw std::runtime_error(errno_text("unshare"));
            fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
            if (fd_ < 0) throw std::runtime_error(errno_text("open /proc/thread-self/ns/net"));
            loopback_up();
        } catch (...) {
            failure = std::current_exception();
        }
    });
    thread.join();
    if (failure) {
        if (fd_ >= 0) ::close(fd_);
        std::rethrow_exception(failure);
    }
}

NetNamespace::~NetNamespace() {
    if (fd_ >= 0) ::close(fd_);
}

void NetNamespace::nft(const std::string& script) const {
    TempDir dir("pgt-nft");
    std::string path = dir.write_file("rules.nft", script);
    ChildProcess::Options options;
    options.argv = {nft_binary(), "-f", path};
    options.log_path = dir.path() + "/nft.log";
    options.netns_fd = fd_;
    ChildProcess nft(options);
    auto status = nft.wait_exit(10s);
    if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
        throw std::runtime_error("nft -f failed (" +
                                 (status ? describe_status(*status) : std::string("timeout")) +
                                 "):\n" + script + read_file(options.log_path));
    }
}

NftFilter::NftFilter(const NetNamespace& ns) : ns_(ns) {
    ns_.nft(
        "table inet pgt_faults {\n"
        "    chain output { type filter hook output priority 0; policy accept; }\n"
        "}\n");
}

void NftFilter::blackhole(int port) {
    std::string p = std::to_string(port);
    ns_.nft("add rule inet pgt_faults output tcp dport " + p + " drop\n" +
            "add rule inet pgt_faults output tcp sport " + p + " drop\n");
}

void NftFilter::lose(int port, int percent) {
    std::string p = std::to_string(port);
    std::string chance = " numgen random mod 100 < " + std::to_string(percent) + " drop\n";
    ns_.nft("add rule inet pgt_faults output tcp dport " + p + chance +
            "add rule inet pgt_faults output tcp sport " + p + chance);
}

void NftFilter::clear() {
    ns_.nft("flush chain inet pgt_faults output\n");
}

TcpRelay::TcpRelay(const NetNamespace& ns, std::string unix_path, std::chrono::milliseconds delay)
    : unix_path_(std::move(unix_path)), delay_(delay) {
    ns.run_inside([&] { listen_on_loopback(); });
    acceptor_ = std::thread([this] { accept_loop(); });
}

TcpRelay::TcpRelay(std::string unix_path, std::chrono::milliseconds delay)
    : unix_path_(std::move(unix_path)), delay_(delay) {
    listen_on_loopback();
    acceptor_ = std::thread([this] { accept_loop(); });
}

TcpRelay::TcpRelay(std::string unix_path, HideParameter hide)
    : unix_path_(std::move(unix_path)), delay_(0), hidden_parameter_(std::move(hide.name)) {
    listen_on_loopback();
    acceptor_ = std::thread([this] { accept_loop(); });
}

void TcpRelay::listen_on_loopback() {
    listen_fd_ = itest::listen_on_loopback(64, port_, "relay listen");
}

TcpRelay::~TcpRelay() {
    stop_ = true;
    {
        // Wakes pumps blocked in send() towards a peer that no longer reads.
        std::lock_guard lock(mutex_);
        for (int fd : fds_)
            ::shutdown(fd, SHUT_RDWR);
    }
    acceptor_.join();
    for (auto& thread : threads_)
        thread.join();
    for (int fd : fds_)
        ::close(fd);
    ::close(listen_fd_);
}

void TcpRelay::accept_loop() {
    while (!stop_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) continue;
        int upstream = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, unix_path_.c_str(), sizeof address.sun_path - 1);
        if (upstream < 0 ||
            ::connect(upstream, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
            ::close(client);
            if (upstream >= 0) ::close(upstream);
            continue;
        }
        ++accepted_;
        std::lock_guard lock(mutex_);
        fds_.push_back(client);
        fds_.push_back(upstream);
        threads_.emplace_back([this, client, upstream] { pump(client, upstream, false); });
        threads_.emplace_back([this, client, upstream] { pump(upstream, client, true); });
    }
}

std::string TcpRelay::filter_server_messages(std::string& pending) const {
    std::string out;
    std::size_t at = 0;
    while (pending.size() - at >= 5) {
        const auto* p = reinterpret_cast<const unsigned char*>(pending.data() + at);
        const std::size_t length = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) |
                                   (std::size_t{p[3]} << 8) | std::size_t{p[4]};
        if (length < 4 || pending.size() - at < 1 + length) break;
        // ParameterStatus: its body is the name, NUL, the value, NUL.
        const std::string_view body(pending.data() + at + 5, length - 4);
        const bool hidden = p[0] == 'S' && body.substr(0, body.find('\0')) == hidden_parameter_;
        if (!hidden) out.append(pending, at, 1 + length);
        at += 1 + length;
    }
    pending.erase(0, at);
    return out;
}

void TcpRelay::pump(int from, int to, bool from_server) {
    const bool filter = from_server && !hidden_parameter_.empty();
    std::string pending;  // the server's bytes not yet a whole message (filtering)
    std::vector<char> buffer(64 * 1024);
    while (!stop_) {
        pollfd p{from, POLLIN, 0};
        int ready = ::poll(&p, 1, 100);
        if (ready < 0 && errno != EINTR) break;
        if (ready <= 0) continue;
        ssize_t n = ::recv(from, buffer.data(), buffer.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
        if (filter) {
            pending.append(buffer.data(), static_cast<std::size_t>(n));
            const std::string out = filter_server_messages(pending);
            if (!out.empty() && !write_all(to, out.data(), out.size())) break;
            continue;
        }
        if (!write_all(to, buffer.data(), static_cast<std::size_t>(n))) break;
    }
    // Pass the end on (EOF or error): the other direction's pump sees it and ends too.
    ::shutdown(to, SHUT_WR);
}

}  // namespace pgtether::itest
