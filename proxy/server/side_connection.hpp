// A connection of pgtether's own to PostgreSQL that is never a pooled backend: connect (Unix
// socket, IP literal or a name resolved now; proxy/net/server_address.hpp), TLS as server_tls_*
// says (proxy/server/server_tls.hpp), log in (proxy/server/server_login.hpp), then run extended-protocol
// queries one at a time and collect their answers (core/query_result.hpp). auth_query's pooled
// lookup connections (proxy/server/auth_query.hpp) and the one-query side connections of lock discovery
// (proxy/server/side_query.hpp) are this connection with their own use of the answers.
//
// Its start-up packet carries only what pgtether decides (user, database, application_name: no
// client parameters, no `options`: CVE-2025-12819 was a client's startup SET steering PgBouncer's
// auth query), and parameters travel bound, never spliced into SQL text. What it reads is
// bounded: each message, and the rows kept and their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/query_result.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/server/server_login.hpp"
#include "proxy/net/stream.hpp"

struct addrinfo;

namespace pgtether {

class TlsContext;
class ServerContext;

class SideConnection : public Stream::Handler, public ResolveClient {
  public:
    struct Setup {
        DatabaseConfig database;        // the [databases] entry to connect to
        ServerCredentials credentials;  // who logs in, with its password or secret
        std::string application_name;   // "pgtether auth_query", ...
        std::string login_role;         // how a failed login names the user ("auth_user ")
        std::uint32_t max_message = ServerLogin::kMaxMessage;  // any one message from the server
        ResultLimits limits;                                   // of every query's answer
        // Which host of database's host list (host_for_turn, port_for_host): the one the
        // database's pool would choose now (Pool::side_host), or the next after a failure.
        std::size_t host_index = 0;
    };

    SideConnection(const SideConnection&) = delete;
    SideConnection& operator=(const SideConnection&) = delete;

    // Connecting or logging in (not yet ready once).
    [[nodiscard]] bool starting() const { return phase_ < Phase::Ready; }
    // Logged in and idle: run() may start a query.
    [[nodiscard]] bool ready() const { return phase_ == Phase::Ready; }
    // When the current phase began (connecting, a query, idleness), for timeouts.
    [[nodiscard]] std::uint64_t phase_since_ms() const { return phase_since_ms_; }
    // Whether the login succeeded (it may have failed or closed since).
    [[nodiscard]] bool logged_in() const { return logged_in_; }

  protected:
    enum class Phase {
        Connecting,  // resolving / connecting
        TlsAnswer,   // SSLRequest sent; waiting for 'S' or 'N'
        Handshake,   // TLS handshake running
        Login,       // StartupMessage sent; authenticating until ReadyForQuery
        Ready,       // logged in, idle
        Query,       // a query is running
        Done,        // failed, finished or abandoned; closing
    };

    SideConnection(ServerContext& context, Setup setup);
    // The object frees itself once its socket is closed (and no DNS lookup holds it).
    virtual ~SideConnection() = default;

    // Connects; the outcome arrives in on_logged_in() or on_failed().
    void begin();
    // Runs `query` with `params` bound; only when ready(). The answer arrives in on_answer().
    void run(std::string_view query, const std::vector<std::optional<std::string>>& params);
    // Gives up: on_failed(why) once, then the connection closes.
    void fail(const std::string& why);
    // Closes without telling anyone.
    void abandon();
    // Back-pressure: stop and start reading what the server sends.
    void pause_reading();
    void resume_reading();
    [[nodiscard]] Phase phase() const { return phase_; }

    // Logged in; ready() now.
    virtual void on_logged_in() = 0;
    // The query's answer (ReadyForQuery came; `idle`: it said 'I', nothing was left open). The
    // connection is ready() again; it may be reused, closed with abandon(), or failed.
    virtual void on_answer(QueryResult&& result, bool idle) = 0;
    // Connecting, TLS, login or a query failed, or the server misbehaved; `during_query`: a
    // query was running. The connection is closing.
    virtual void on_failed(const std::string& why, bool during_query) = 0;
    // A NotificationResponse (the connection LISTENs): true if it was expected. The default
    // expects none, and the connection fails.
    virtual bool on_notification(protocol::ByteSpan body) {
        (void)body;
        return false;
    }
    // The messages of one read have all been handled (what they produced can go out together).
    virtual void on_messages_read() {}

    ServerContext& context_;
    const Setup setup_;

  private:
    void enter(Phase phase);
    void connect();
    void on_resolved(int status, const sockaddr* address) override;
    void send_startup();
    // Whether to read on after `type` (false: the phase changed, or the connection failed).
    bool handle_login(char type, protocol::ByteSpan body);
    bool handle_answer(char type, protocol::ByteSpan body);
    void close_connection();
    void maybe_delete();

    // Stream::Handler
    std::size_t on_stream_data(protocol::ByteSpan data) override;
    void on_stream_end(int status) override;
    void on_stream_drained() override {}
    void on_stream_connected(int status) override;
    void on_stream_closed() override;
    void on_stream_tls_ready(const std::string& error) override;

    Stream stream_;
    Phase phase_ = Phase::Connecting;
    std::uint64_t phase_since_ms_;
    std::unique_ptr<ServerLogin> login_;
    std::shared_ptr<const TlsContext> tls_context_;
    bool unix_socket_ = false;
    std::string host_;    // the host connected to (setup_.host_index of the host list)
    QueryResult answer_;  // of the running query
    bool logged_in_ = false;
    bool stream_closed_ = false;
    int pending_resolves_ = 0;
};

}  // namespace pgtether
