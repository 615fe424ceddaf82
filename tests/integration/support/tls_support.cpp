// TLS helpers for integration tests.
#include "tests/integration/support/tls_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tests/integration/support/pq.hpp"

namespace pgtether::itest {

namespace {

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out += c;
        }
    }
    return out + "'";
}

void give_to_daemon(const std::string& path, mode_t mode) {
    ::chmod(path.c_str(), mode);
    if (auto user = daemon_user()) {
        if (::chown(path.c_str(), user->uid, user->gid) != 0) {
            throw std::runtime_error("chown " + path + ": " + std::strerror(errno));
        }
    }
}

// A private key both libpq (in this process) and the daemons must read. libpq accepts a key
// readable by others only when root owns it with mode 0640 at most; the daemon user reads it
// through the group.
void share_key(const std::string& path) {
    ::chmod(path.c_str(), 0640);
    if (auto user = daemon_user()) {
        if (::chown(path.c_str(), 0, user->gid) != 0) {
            throw std::runtime_error("chown " + path + ": " + std::strerror(errno));
        }
    }
}

std::string openssl_errors() {
    std::string out;
    while (unsigned long code = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(code, buf, sizeof buf);
        if (!out.empty()) out += "; ";
        out += buf;
    }
    return out.empty() ? "no details" : out;
}

}  // namespace

std::string run_command(const std::string& command) {
    std::string full = command + " 2>&1";
    FILE* pipe = ::popen(full.c_str(), "r");
    if (!pipe) throw std::runtime_error("cannot run: " + command);
    std::string output;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe))
        output.append(buf, n);
    int status = ::pclose(pipe);
    if (status != 0) {
        throw std::runtime_error("command failed (" + describe_status(status) + "): " + command +
                                 "\n" + output);
    }
    return output;
}

// ---------------------------------------------------------------------------------------------
// TestPki

TestPki::TestPki(const std::string& base_dir) : dir_("pgt-pki", base_dir) {
    const std::string d = dir();
    // Elliptic-curve keys: quick to make, and what managed services increasingly use.
    run_command(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout " +
        shell_quote(d + "/ca.key") + " -out " + shell_quote(d + "/ca.crt") +
        " -days 2 -subj '/CN=pgtether test CA'");
    run_command(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout " +
        shell_quote(d + "/rogue-ca.key") + " -out " + shell_quote(d + "/rogue-ca.crt") +
        " -days 2 -subj '/CN=nobody trusts this CA'");
    make_leaf("server", "localhost", "ca", "DNS:localhost");
    give_to_daemon(d + "/ca.crt", 0644);
    give_to_daemon(d + "/rogue-ca.crt", 0644);
}

std::string TestPki::make_leaf(const std::string& file, const std::string& cn,
                               const std::string& ca, const std::string& san) {
    const std::string d = dir();
    const std::string base = d + "/" + file;
    if (std::filesystem::exists(base + ".crt")) return base;
    run_command(
        "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout " +
        shell_quote(base + ".key") + " -out " + shell_quote(base + ".csr") + " -subj " +
        shell_quote("/CN=" + cn));
    std::string ext;
    if (!san.empty()) {
        std::ofstream(base + ".ext") << "subjectAltName=" << san << "\n";
        ext = " -extfile " + shell_quote(base + ".ext");
    }
    run_command("openssl x509 -req -in " + shell_quote(base + ".csr") + " -CA " +
                shell_quote(d + "/" + ca + ".crt") + " -CAkey " +
                shell_quote(d + "/" + ca + ".key") + " -CAcreateserial -out " +
                shell_quote(base + ".crt") + " -days 2" + ext);
    give_to_daemon(base + ".crt", 0644);
    share_key(base + ".key");
    return base;
}

std::string TestPki::client_cert(const std::string& name) {
    return make_leaf("client-" + name, name, "ca", "");
}

std::string TestPki::rogue_cert(const std::string& name) {
    return make_leaf("rogue-" + name, name, "rogue-ca", "");
}

// ---------------------------------------------------------------------------------------------
// TlsPostgres

TlsPostgres::TlsPostgres(const TestPki& pki) {
    const TestEnv& shared = TestEnv::get();
    state_dir_ = pki.dir() + "/pg-state";
    run_command(std::string(PGT_SOURCE_DIR) + "/scripts/lib/pg.sh start " +
                shell_quote(state_dir_) + " --ssl " + shell_quote(pki.dir()) +
                " --pgbench-scale 0 --max-connections 100");
    env_ = TestEnv::load(state_dir_ + "/pg.env");
    env_.pgtether_bin = shared.pgtether_bin;
    env_.pgbouncer_bin = shared.pgbouncer_bin;
}

TlsPostgres::~TlsPostgres() {
    try {
        run_command(std::string(PGT_SOURCE_DIR) + "/scripts/lib/pg.sh stop " +
                    shell_quote(state_dir_));
    } catch (const std::exception&) {
        // Nothing sensible to do in a destructor; the temp dir goes with the shared server.
    }
}

void TlsPostgres::prepend_hba(const std::string& lines) {
    const std::string path = env_.pg_data + "/pg_hba.conf";
    std::string text = lines + "\n" + read_file(path);
    {
        std::ofstream out(path, std::ios::trunc);
        out << text;
    }
    auto conn = Conn::must(direct_conninfo("", "", "", "", env_));
    conn.exec_ok("SELECT pg_reload_conf()");
    // The postmaster reloads asynchronously; new connections see the file once it has.
    std::this_thread::sleep_for(300ms);
}

// ---------------------------------------------------------------------------------------------
// DirectTlsConn

DirectTlsConn::DirectTlsConn(const std::string& host, int port, bool alpn,
                             const std::string& ca_file) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        error_ = std::string("connect: ") + std::strerror(errno);
        return;
    }
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
    if (alpn) {
        static const unsigned char kAlpn[] = {10, 'p', 'o', 's', 't', 'g', 'r', 'e', 's', 'q', 'l'};
        SSL_CTX_set_alpn_protos(ctx_, kAlpn, sizeof kAlpn);
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) {
        error_ = "TLS handshake failed: " + openssl_errors();
        return;
    }
    connected_ = true;
}

DirectTlsConn::~DirectTlsConn() {
    if (ssl_) SSL_free(ssl_);
    if (ctx_) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
}

bool DirectTlsConn::send(std::string_view bytes) {
    if (!connected_) return false;
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
}

std::optional<BackendMessage> DirectTlsConn::read_message(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (buffer_.size() >= 5) {
            std::uint32_t len = (std::uint32_t(std::uint8_t(buffer_[1])) << 24) |
                                (std::uint32_t(std::uint8_t(buffer_[2])) << 16) |
                                (std::uint32_t(std::uint8_t(buffer_[3])) << 8) |
                                std::uint32_t(std::uint8_t(buffer_[4]));
            if (len < 4) return std::nullopt;
            if (buffer_.size() >= 1 + len) {
                BackendMessage msg{buffer_[0], buffer_.substr(5, len - 4)};
                buffer_.erase(0, 1 + len);
                return msg;
            }
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        char buf[16384];
        int n = SSL_read(ssl_, buf, sizeof buf);
        if (n <= 0) return std::nullopt;
        buffer_.append(buf, static_cast<std::size_t>(n));
    }
}

std::vector<BackendMessage> DirectTlsConn::read_until_ready_or_error(
    std::chrono::milliseconds timeout) {
    std::vector<BackendMessage> out;
    if (!connected_) return out;
    while (auto msg = read_message(timeout)) {
        out.push_back(*msg);
        if (msg->type == 'Z' || msg->type == 'E') break;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// FakeServer

FakeServer::FakeServer(std::string answer, std::string later)
    : answer_(std::move(answer)), later_(std::move(later)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 8) != 0) {
        throw std::runtime_error(std::string("fake server: ") + std::strerror(errno));
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
}

FakeServer::~FakeServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
}

void FakeServer::serve() {
    pollfd lp{listen_fd_, POLLIN, 0};
    while (!stop_ && ::poll(&lp, 1, 100) == 0) {
    }
    if (stop_) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto read_some = [&](std::string& into, std::chrono::milliseconds wait) -> bool {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return true;  // nothing yet
        char buf[4096];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return false;
        into.append(buf, static_cast<std::size_t>(n));
        return true;
    };
    std::string first;
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (first.size() < 8 && std::chrono::steady_clock::now() < deadline) {
        if (!read_some(first, 100ms)) break;
    }
    // SSLRequest: length 8, code 80877103 (0x04d2162f).
    session_.got_ssl_request =
        first.size() >= 8 && first.compare(0, 8, std::string("\0\0\0\x08\x04\xd2\x16\x2f", 8)) == 0;
    if (first.size() > 8) session_.after = first.substr(8);
    ::send(fd, answer_.data(), answer_.size(), MSG_NOSIGNAL);
    if (!later_.empty()) {
        std::this_thread::sleep_for(200ms);
        ::send(fd, later_.data(), later_.size(), MSG_NOSIGNAL);
    }
    deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline && !stop_) {
        if (!read_some(session_.after, 100ms)) {
            session_.closed_by_client = true;
            break;
        }
    }
    ::close(fd);
    done_ = true;
}

std::optional<FakeServer::Session> FakeServer::wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done_ && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
    if (!done_) return std::nullopt;
    return session_;
}

}  // namespace pgtether::itest
