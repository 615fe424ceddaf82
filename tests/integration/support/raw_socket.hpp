// A bare TCP client for tests that send what libpq never would: malformed start-up packets, bad
// lengths, unknown message types, truncated streams. Reads are bounded by timeouts so a test never
// hangs on a server that stays silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgtether::itest {

using namespace std::chrono_literals;

// One backend message: type byte and body (the length field is stripped).
struct BackendMessage {
    char type = 0;
    std::string body;
};

// Builders for frontend messages (protocol §55.7 "Message Formats"), independent of the daemon's
// own protocol/ code so the tests do not share its bugs.
namespace wire {
std::string i32(std::int32_t v);
std::string i16(std::int16_t v);
std::string cstr(std::string_view s);  // s plus the NUL terminator
// A typed message: type, Int32 length (counting itself), body.
std::string message(char type, std::string_view body);
// StartupMessage: length, protocol version (3.0 = 196608), then name/value pairs and a final NUL.
std::string startup(const std::vector<std::pair<std::string, std::string>>& params,
                    std::int32_t version = 196608);
std::string ssl_request();                                       // code 80877103
std::string cancel_request(std::int32_t pid, std::int32_t key);  // code 80877102
std::string query(std::string_view sql);                         // 'Q'
std::string sync();                                              // 'S'
std::string terminate();                                         // 'X'

// Fields of an ErrorResponse / NoticeResponse body, keyed by field type ('S', 'V', 'C', 'M', ...).
std::map<char, std::string> error_fields(const BackendMessage& msg);
// The SQLSTATE of the first ErrorResponse in `messages`.
std::optional<std::string> first_error_sqlstate(const std::vector<BackendMessage>& messages);
// The first column of the first DataRow in `messages`; nullopt when there is none (or it is NULL).
std::optional<std::string> first_value(const std::vector<BackendMessage>& messages);
// "R(8) S(25) ... Z(1)" for assertion messages; ErrorResponses show their code and message.
std::string describe(const std::vector<BackendMessage>& messages);
// The cancel key of a greeting's BackendKeyData (protocol §55.7): process id and secret;
// nullopt when the messages hold none.
struct KeyData {
    std::int32_t pid = 0;
    std::int32_t key = 0;
};
std::optional<KeyData> backend_key_data(const std::vector<BackendMessage>& messages);
// One message as a line for comparing two servers: ErrorResponses and notices by severity,
// SQLSTATE, message, detail and hint (not the source file and line), authentication requests by
// their code (not a salt), ParameterStatus by name=value, other messages by type and size.
std::string render(const BackendMessage& msg);
// Everything a server sent until it closed (RawConn::read_until_closed), one render() line per
// message after the first `one_byte_answers` answers to SSLRequest/GSSENCRequest; "closed" at
// the end, or "(still open)" for nullopt.
std::string render_reply(const std::optional<std::string>& bytes, int one_byte_answers = 0);
}  // namespace wire

class RawConn {
  public:
    // Connects to an IPv4 host:port; throws std::runtime_error on failure.
    RawConn(const std::string& host, int port, std::chrono::milliseconds timeout = 5s);
    ~RawConn();
    RawConn(const RawConn&) = delete;
    RawConn& operator=(const RawConn&) = delete;

    // Sends all bytes; false if the peer has reset/closed the connection.
    bool send(std::string_view bytes);
    // Half-closes our side (shutdown SHUT_WR): the server sees EOF.
    void shutdown_write();
    // Closes with a TCP reset (SO_LINGER 0): the server sees ECONNRESET, not EOF. Every later
    // call fails as on a closed connection.
    void reset();

    // Waits up to `timeout` for at least `n` buffered bytes; returns them (and consumes them) or
    // nullopt on timeout / EOF.
    std::optional<std::string> read_exact(std::size_t n, std::chrono::milliseconds timeout = 5s);
    // The next backend message, or nullopt on timeout, EOF or an impossible length (< 4 or > 1 GB).
    std::optional<BackendMessage> read_message(std::chrono::milliseconds timeout = 5s);
    // Messages until (and including) ReadyForQuery or an ErrorResponse, or until EOF / timeout.
    std::vector<BackendMessage> read_until_ready_or_error(std::chrono::milliseconds timeout = 5s);
    // Reads and discards until the peer closes the connection; false on timeout.
    bool wait_closed(std::chrono::milliseconds timeout = 5s);
    // Every byte received until the peer closes (orderly or by reset), pending bytes included;
    // nullopt if it is still open after `timeout`.
    std::optional<std::string> read_until_closed(std::chrono::milliseconds timeout = 5s);

    [[nodiscard]] bool peer_closed() const { return eof_; }
    // This end's port (getsockname).
    [[nodiscard]] int local_port() const;
    // Bytes received but not consumed yet.
    [[nodiscard]] const std::string& pending() const { return buffer_; }

    // Sends a v3 StartupMessage for user/database and reads the reply up to ReadyForQuery or the
    // first error. Only AuthenticationOk is followed (trust); anything else ends the exchange.
    std::vector<BackendMessage> startup(const std::string& user, const std::string& database,
                                        std::chrono::milliseconds timeout = 5s);

  private:
    // One recv() into buffer_ if data arrives before `deadline`; false on timeout or EOF.
    bool fill(std::chrono::steady_clock::time_point deadline);

    int fd_ = -1;
    std::string buffer_;
    bool eof_ = false;
};

// A TCP socket listening on 127.0.0.1 at a port the kernel picks (stored in `port`), with
// `backlog`; throws std::runtime_error naming `what` on failure.
int listen_on_loopback(int backlog, int& port, const std::string& what);

// A peer that never answers: a port on 127.0.0.1 that accepts connections (the kernel's accept
// queue) while nothing reads or closes them, until close() resets them all. With a backlog of 0
// the queue holds one connection: further connection attempts hang (their SYNs are dropped).
class SilentListener {
  public:
    explicit SilentListener(int backlog);
    ~SilentListener() { close(); }
    SilentListener(const SilentListener&) = delete;
    SilentListener& operator=(const SilentListener&) = delete;
    [[nodiscard]] int port() const { return port_; }
    void close();

  private:
    int fd_ = -1;
    int port_ = 0;
};

}  // namespace pgtether::itest
