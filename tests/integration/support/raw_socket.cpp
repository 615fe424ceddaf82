// A bare TCP client speaking just enough of the wire protocol to send malformed input and read
// the server's reaction.
#include "tests/integration/support/raw_socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace pgtether::itest {

namespace wire {

std::string i32(std::int32_t v) {
    auto u = static_cast<std::uint32_t>(v);
    std::string out(4, '\0');
    for (int i = 0; i < 4; ++i)
        out[static_cast<std::size_t>(i)] = static_cast<char>(u >> (24 - 8 * i));
    return out;
}

std::string i16(std::int16_t v) {
    auto u = static_cast<std::uint16_t>(v);
    return {static_cast<char>(u >> 8), static_cast<char>(u & 0xff)};
}

std::string cstr(std::string_view s) {
    std::string out(s);
    out.push_back('\0');
    return out;
}

std::string message(char type, std::string_view body) {
    std::string out(1, type);
    out += i32(static_cast<std::int32_t>(body.size() + 4));
    out += body;
    return out;
}

std::string startup(const std::vector<std::pair<std::string, std::string>>& params,
                    std::int32_t version) {
    std::string body = i32(version);
    for (const auto& [name, value] : params)
        body += cstr(name) + cstr(value);
    body.push_back('\0');
    return i32(static_cast<std::int32_t>(body.size() + 4)) + body;
}

std::string ssl_request() {
    return i32(8) + i32(80877103);
}

std::string cancel_request(std::int32_t pid, std::int32_t key) {
    return i32(16) + i32(80877102) + i32(pid) + i32(key);
}

std::string query(std::string_view sql) {
    return message('Q', cstr(sql));
}
std::string sync() {
    return message('S', "");
}
std::string terminate() {
    return message('X', "");
}

std::map<char, std::string> error_fields(const BackendMessage& msg) {
    // ErrorResponse/NoticeResponse: repeated (Byte1 field type, String value), ended by a 0 byte.
    std::map<char, std::string> fields;
    std::size_t pos = 0;
    while (pos < msg.body.size() && msg.body[pos] != '\0') {
        char type = msg.body[pos++];
        auto end = msg.body.find('\0', pos);
        if (end == std::string::npos) break;
        fields[type] = msg.body.substr(pos, end - pos);
        pos = end + 1;
    }
    return fields;
}

std::optional<std::string> first_error_sqlstate(const std::vector<BackendMessage>& messages) {
    for (const auto& msg : messages) {
        if (msg.type == 'E') {
            auto fields = error_fields(msg);
            auto it = fields.find('C');
            return it != fields.end() ? it->second : std::string();
        }
    }
    return std::nullopt;
}

std::optional<std::string> first_value(const std::vector<BackendMessage>& messages) {
    for (const auto& msg : messages) {
        // DataRow: Int16 column count, then Int32 length and the bytes of each value.
        if (msg.type != 'D' || msg.body.size() < 6) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(msg.body.data()) + 2;
        const std::int32_t length =
            static_cast<std::int32_t>(std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 |
                                      std::uint32_t{p[2]} << 8 | p[3]);
        if (length < 0) return std::nullopt;
        return msg.body.substr(6, static_cast<std::size_t>(length));
    }
    return std::nullopt;
}

std::optional<KeyData> backend_key_data(const std::vector<BackendMessage>& messages) {
    for (const auto& msg : messages) {
        if (msg.type != 'K' || msg.body.size() != 8) continue;
        auto be32 = [&](std::size_t at) {
            std::uint32_t v = 0;
            for (std::size_t i = 0; i < 4; ++i) {
                v = (v << 8) | static_cast<unsigned char>(msg.body[at + i]);
            }
            return static_cast<std::int32_t>(v);
        };
        return KeyData{be32(0), be32(4)};
    }
    return std::nullopt;
}

std::string describe(const std::vector<BackendMessage>& messages) {
    std::ostringstream out;
    for (const auto& msg : messages) {
        if (out.tellp() > 0) out << ' ';
        out << msg.type << '(' << msg.body.size() << ')';
        if (msg.type == 'E' || msg.type == 'N') {
            auto fields = error_fields(msg);
            out << "[" << fields['C'] << " " << fields['M'] << "]";
        }
    }
    if (messages.empty()) out << "(no messages)";
    return out.str();
}

std::string render(const BackendMessage& msg) {
    std::string out(1, msg.type);
    if (msg.type == 'E' || msg.type == 'N') {
        auto fields = error_fields(msg);
        for (char f : std::string("SCMDH")) {
            if (fields.count(f)) out += std::string(" ") + f + "=" + fields[f];
        }
    } else if (msg.type == 'R' && msg.body.size() >= 4) {
        out += " auth " + std::to_string(static_cast<int>(msg.body[3]));
    } else if (msg.type == 'S') {
        auto name_end = msg.body.find('\0');
        if (name_end != std::string::npos) {
            auto value = msg.body.substr(name_end + 1);
            if (!value.empty() && value.back() == '\0') value.pop_back();
            out += " " + msg.body.substr(0, name_end) + "=" + value;
        }
    } else {
        out += " (" + std::to_string(msg.body.size()) + " bytes)";
    }
    return out;
}

std::string render_reply(const std::optional<std::string>& bytes, int one_byte_answers) {
    if (!bytes) return "(still open)";
    std::string out;
    std::size_t pos = 0;
    for (int i = 0; i < one_byte_answers && pos < bytes->size(); ++i) {
        out += std::string("answer ") + (*bytes)[pos++] + "\n";
    }
    while (pos + 5 <= bytes->size()) {
        std::uint32_t length = 0;
        for (std::size_t i = 1; i <= 4; ++i) {
            length = (length << 8) | static_cast<std::uint8_t>((*bytes)[pos + i]);
        }
        if (length < 4 || pos + 1 + length > bytes->size()) break;
        out += render(BackendMessage{(*bytes)[pos], bytes->substr(pos + 5, length - 4)}) + "\n";
        pos += 1 + length;
    }
    if (pos < bytes->size()) out += "+ " + std::to_string(bytes->size() - pos) + " bytes\n";
    return out + "closed";
}

}  // namespace wire

RawConn::RawConn(const std::string& host, int port, std::chrono::milliseconds timeout) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
        throw std::runtime_error("RawConn: not an IPv4 address: " + host);
    }
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    if (rc != 0 && errno == EINPROGRESS) {
        pollfd pfd{fd_, POLLOUT, 0};
        rc = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
        if (rc == 1 && err == 0) {
            rc = 0;
        } else {
            errno = rc == 0 ? ETIMEDOUT : err;
            rc = -1;
        }
    }
    if (rc != 0) {
        std::string why = std::strerror(errno);
        ::close(fd_);
        throw std::runtime_error("RawConn: connect to " + host + ":" + std::to_string(port) + ": " +
                                 why);
    }
}

int RawConn::local_port() const {
    sockaddr_in address{};
    socklen_t length = sizeof address;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
    return ntohs(address.sin_port);
}

RawConn::~RawConn() {
    if (fd_ >= 0) ::close(fd_);
}

bool RawConn::send(std::string_view bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd pfd{fd_, POLLOUT, 0};
            if (::poll(&pfd, 1, 5000) <= 0) return false;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return false;
        }
    }
    return true;
}

void RawConn::shutdown_write() {
    ::shutdown(fd_, SHUT_WR);
}

void RawConn::reset() {
    if (fd_ < 0) return;
    linger abort{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    ::close(fd_);
    fd_ = -1;
    eof_ = true;
}

bool RawConn::fill(std::chrono::steady_clock::time_point deadline) {
    if (eof_) return false;
    for (;;) {
        char chunk[16384];
        ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
        if (n > 0) {
            buffer_.append(chunk, static_cast<std::size_t>(n));
            return true;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            eof_ = true;  // orderly close, or reset: either way nothing more will come
            return false;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd pfd{fd_, POLLIN, 0};
        if (::poll(&pfd, 1, static_cast<int>(left.count())) == 0) return false;
    }
}

std::optional<std::string> RawConn::read_exact(std::size_t n, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buffer_.size() < n) {
        if (!fill(deadline)) return std::nullopt;
    }
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
}

std::optional<BackendMessage> RawConn::read_message(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buffer_.size() < 5) {
        if (!fill(deadline)) return std::nullopt;
    }
    std::uint32_t length = 0;
    for (int i = 1; i <= 4; ++i) {
        length = (length << 8) | static_cast<std::uint8_t>(buffer_[static_cast<std::size_t>(i)]);
    }
    if (length < 4 || length > (1U << 30)) return std::nullopt;
    std::size_t total = std::size_t{length} + 1;
    while (buffer_.size() < total) {
        if (!fill(deadline)) return std::nullopt;
    }
    BackendMessage msg{buffer_[0], buffer_.substr(5, total - 5)};
    buffer_.erase(0, total);
    return msg;
}

std::vector<BackendMessage> RawConn::read_until_ready_or_error(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<BackendMessage> messages;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        auto msg = read_message(left);
        if (!msg) break;
        messages.push_back(*msg);
        if (msg->type == 'Z' || msg->type == 'E') break;
    }
    return messages;
}

bool RawConn::wait_closed(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_) {
        buffer_.clear();
        if (!fill(deadline) && !eof_) return false;
    }
    return true;
}

std::optional<std::string> RawConn::read_until_closed(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_) {
        if (!fill(deadline) && !eof_) return std::nullopt;
    }
    std::string out = std::move(buffer_);
    buffer_.clear();
    return out;
}

std::vector<BackendMessage> RawConn::startup(const std::string& user, const std::string& database,
                                             std::chrono::milliseconds timeout) {
    std::vector<BackendMessage> messages;
    if (!send(wire::startup({{"user", user}, {"database", database}}))) return messages;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        auto msg = read_message(left);
        if (!msg) break;
        messages.push_back(*msg);
        if (msg->type == 'Z' || msg->type == 'E') break;
        // An authentication request other than AuthenticationOk (Int32 0) needs a password.
        if (msg->type == 'R' && msg->body != wire::i32(0)) break;
    }
    return messages;
}

int listen_on_loopback(int backlog, int& port, const std::string& what) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(what + ": socket: " + std::strerror(errno));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd, backlog) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        std::string why = std::strerror(errno);
        ::close(fd);
        throw std::runtime_error(what + ": " + why);
    }
    port = ntohs(address.sin_port);
    return fd;
}

SilentListener::SilentListener(int backlog) {
    fd_ = listen_on_loopback(backlog, port_, "silent listener");
}

void SilentListener::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

}  // namespace pgtether::itest
