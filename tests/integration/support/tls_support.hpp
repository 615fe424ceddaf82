// TLS for integration tests: a test CA with server and client certificates made with the openssl
// command line, a private PostgreSQL with ssl = on (scripts/lib/pg.sh --ssl), a raw TLS client for
// what libpq 15 cannot do (PostgreSQL 17's direct TLS), and a fake PostgreSQL server in a thread
// for the server side of the "bytes before the handshake" tests.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <openssl/types.h>

#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

namespace pgtether::itest {

// Runs a shell command; throws std::runtime_error with its output when it fails.
std::string run_command(const std::string& command);

// A CA and certificates signed by it, in a temp dir. Key files are mode 0640, owned by root and
// the daemon user's group, which suits both pgtether (running as that user) and libpq (running as
// root).
//   ca.crt                 the test CA
//   server.crt/.key        CN=localhost, subjectAltName DNS:localhost (not 127.0.0.1)
//   client-NAME.crt/.key   CN=NAME, from the test CA (client_cert(NAME) makes them)
//   rogue-NAME.crt/.key    CN=NAME, from another CA nobody trusts (rogue_cert(NAME))
class TestPki {
  public:
    explicit TestPki(const std::string& base_dir);
    [[nodiscard]] const std::string& dir() const { return dir_.path(); }
    [[nodiscard]] std::string path(const std::string& name) const { return dir() + "/" + name; }
    // Makes (once) a client certificate for `name` and returns the path without extension.
    std::string client_cert(const std::string& name);
    std::string rogue_cert(const std::string& name);

  private:
    std::string make_leaf(const std::string& file, const std::string& cn, const std::string& ca,
                          const std::string& san);
    TempDir dir_;
};

// A PostgreSQL of its own with ssl = on, using `pki`'s server certificate and CA; stopped and
// deleted on destruction.
class TlsPostgres {
  public:
    explicit TlsPostgres(const TestPki& pki);
    ~TlsPostgres();
    TlsPostgres(const TlsPostgres&) = delete;
    TlsPostgres& operator=(const TlsPostgres&) = delete;
    [[nodiscard]] const TestEnv& env() const { return env_; }
    // Puts `lines` in front of pg_hba.conf and reloads the configuration.
    void prepend_hba(const std::string& lines);

  private:
    std::string state_dir_;
    TestEnv env_;
};

// A raw TLS client: TCP connect, then the TLS handshake right away (direct TLS, PostgreSQL 17),
// optionally with ALPN "postgresql". Sends and receives plaintext protocol messages.
class DirectTlsConn {
  public:
    DirectTlsConn(const std::string& host, int port, bool alpn, const std::string& ca_file);
    ~DirectTlsConn();
    DirectTlsConn(const DirectTlsConn&) = delete;
    DirectTlsConn& operator=(const DirectTlsConn&) = delete;
    // Whether the handshake completed; error() says why not.
    [[nodiscard]] bool connected() const { return connected_; }
    [[nodiscard]] const std::string& error() const { return error_; }
    bool send(std::string_view bytes);
    // Messages up to ReadyForQuery or ErrorResponse (or EOF / timeout).
    std::vector<BackendMessage> read_until_ready_or_error(std::chrono::milliseconds timeout = 5s);

  private:
    std::optional<BackendMessage> read_message(std::chrono::milliseconds timeout);
    int fd_ = -1;
    SSL_CTX* ctx_ = nullptr;
    SSL* ssl_ = nullptr;
    bool connected_ = false;
    std::string error_;
    std::string buffer_;
};

// A fake PostgreSQL: accepts one connection at a time on 127.0.0.1, reads the 8-byte SSLRequest,
// answers with `answer` in one write (e.g. "S" followed by plaintext protocol messages), or with
// `answer` then `later` after a pause, and records every byte the client sends afterwards until
// the client closes or `listen_for` passes.
class FakeServer {
  public:
    FakeServer(std::string answer, std::string later = {});
    ~FakeServer();
    [[nodiscard]] int port() const { return port_; }
    // Waits for the first connection to be over; what arrived after the SSLRequest, and whether
    // the first 8 bytes were an SSLRequest at all.
    struct Session {
        bool got_ssl_request = false;
        std::string after;  // bytes received after the SSLRequest
        bool closed_by_client = false;
    };
    std::optional<Session> wait(std::chrono::milliseconds timeout = 10s);

  private:
    void serve();
    std::string answer_;
    std::string later_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<bool> done_{false};
    Session session_;
    std::thread thread_;
};

}  // namespace pgtether::itest
