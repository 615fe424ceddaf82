// A side connection: one query of pgtether's own on a connection opened for it and closed right
// after, never a pooled backend (auth_query's secret lookup, the lock-function discovery).
//
// Its start-up packet carries only what the caller decides (user, database, application_name: no
// client parameters, no `options`: CVE-2025-12819 was a client's startup SET steering PgBouncer's
// auth query), parameters travel bound in an extended-protocol query, never spliced into SQL
// text, and TLS follows server_tls_* as for pooled connections. What it reads is bounded: each
// message, the rows kept and their bytes.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proxy/config.hpp"
#include "proxy/server_login.hpp"
#include "proxy/stream.hpp"
#include "proxy/tether.hpp"  // Row

struct addrinfo;

namespace pgtether {

class TlsContext;
class Worker;

class SideQuery final : public Stream::Handler {
  public:
    struct Request {
        DatabaseConfig database;        // the [databases] entry to connect to
        ServerCredentials credentials;  // who logs in, with its password or secret
        std::string application_name;   // "pgtether auth_query", ...
        std::string query;              // one statement, $1... for `params`
        std::vector<std::optional<std::string>> params;
        std::size_t max_rows = 1;             // rows kept; further rows are only counted
        std::size_t max_row_bytes = 1 << 20;  // all kept rows together; more fails the query
        std::uint32_t max_message = 1 << 20;  // any one message from the server
    };
    struct Result {
        // Connecting, TLS or login failed, or the server misbehaved: why. Empty if the query ran.
        std::string error;
        // The query ran and the server answered with an error: "SQLSTATE: message".
        std::string query_error;
        std::vector<Row> rows;      // the first max_rows rows
        std::size_t row_count = 0;  // all rows the server sent
        [[nodiscard]] bool ok() const { return error.empty() && query_error.empty(); }
    };
    using Callback = std::function<void(Result&&)>;

    // begin() starts it. `done` runs exactly once unless cancel() is called first -- possibly
    // from inside begin() when the connection cannot even be attempted, so keep the pointer before
    // calling begin(). The object frees itself once its connection is closed; do not touch it
    // after `done` ran.
    static SideQuery* create(Worker& worker, Request request, Callback done);
    void begin();
    // No callback; the connection is closed.
    void cancel();

  private:
    SideQuery(Worker& worker, Request request, Callback done);
    ~SideQuery() = default;

    void connect();
    static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
    void send_startup();
    void send_query();
    std::size_t handle_login(protocol::ByteSpan data);
    std::size_t handle_query(protocol::ByteSpan data);
    void finish();
    void fail(const std::string& why);
    void close_connection();
    void maybe_delete();

    // Stream::Handler
    std::size_t on_stream_data(protocol::ByteSpan data) override;
    void on_stream_end(int status) override;
    void on_stream_drained() override {}
    void on_stream_connected(int status) override;
    void on_stream_closed() override;
    void on_stream_tls_ready(const std::string& error) override;

    enum class Phase {
        Connecting,  // resolving / connecting
        TlsAnswer,   // SSLRequest sent; waiting for 'S' or 'N'
        Handshake,   // TLS handshake running
        Login,       // StartupMessage sent; authenticating until ReadyForQuery
        Query,       // the query is running
        Done,        // result delivered (or cancelled); closing
    };

    Worker& worker_;
    Request request_;
    Callback done_;
    Stream stream_;
    Phase phase_ = Phase::Connecting;
    std::unique_ptr<ServerLogin> login_;
    std::shared_ptr<const TlsContext> tls_context_;
    bool unix_socket_ = false;
    std::string host_;  // the host connected to (the first of a host list)
    Result result_;
    std::size_t row_bytes_ = 0;
    bool logged_in_ = false;
    bool stream_closed_ = false;
    int pending_resolves_ = 0;
};

}  // namespace pgtether
