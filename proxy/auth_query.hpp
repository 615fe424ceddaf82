// auth_query: fetching the secret of a user who is not in auth_file from PostgreSQL itself,
// connecting as auth_user (PgBouncer's auth_user / auth_query / auth_dbname).
//
// Each lookup runs on a connection of its own, opened for it and closed right after, never on a
// pooled backend and never with anything the client sent: its start-up packet carries only user
// and database (no client parameters, no `options`: CVE-2025-12819 was a client's startup SET
// steering PgBouncer's auth query), and the user name travels as a bound parameter of an
// extended-protocol query, never spliced into SQL text. TLS follows server_tls_* as for pooled
// connections. Nothing is cached: every login of such a user asks again, so a changed password,
// a dropped role or a VALID UNTIL that has passed takes effect at once (CVE-2025-2291 was
// PgBouncer ignoring VALID UNTIL; the default auth_query returns NULL for an expired password and
// a NULL means no login).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "proxy/auth_file.hpp"
#include "proxy/config.hpp"
#include "proxy/server_login.hpp"
#include "proxy/stream.hpp"

struct addrinfo;

namespace pgtether {

class TlsContext;
class Worker;

class AuthQuery final : public Stream::Handler {
  public:
    struct Target {
        DatabaseConfig database;        // the [databases] entry to connect to
        ServerCredentials credentials;  // auth_user and its password or md5 secret
        std::string query;              // auth_query, with $1 for the user name
    };
    struct Result {
        enum class Outcome {
            Found,       // a row with a secret
            NoPassword,  // a row whose secret is NULL or empty (expired, or no password)
            NotFound,    // no row: no such user, or one that cannot log in
            Failed,      // the lookup itself failed; `error` says why
        };
        Outcome outcome = Outcome::Failed;
        std::optional<UserSecret> secret;
        std::string error;
    };
    using Callback = std::function<void(Result&&)>;

    // A lookup of `user`; begin() starts it. `done` runs exactly once unless cancel() is called
    // first -- possibly from inside begin() when the connection cannot even be attempted, so keep
    // the pointer before calling begin(). The object frees itself once its connection is closed;
    // do not touch it after `done` ran.
    static AuthQuery* create(Worker& worker, Target target, std::string user, Callback done);
    void begin();
    // The client went away: no callback; the connection is closed.
    void cancel();

  private:
    AuthQuery(Worker& worker, Target target, std::string user, Callback done);
    ~AuthQuery() = default;

    void connect();
    static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
    void connect_to(const sockaddr* address);
    void send_startup();
    std::size_t handle_login(protocol::ByteSpan data);
    std::size_t handle_query(protocol::ByteSpan data);
    void finish(Result result);
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

    // Messages of a login and of one small query: anything larger is refused.
    static constexpr std::uint32_t kMaxMessage = 1 << 20;

    Worker& worker_;
    Target target_;
    std::string user_;
    Callback done_;
    Stream stream_;
    Phase phase_ = Phase::Connecting;
    std::unique_ptr<ServerLogin> login_;
    std::shared_ptr<const TlsContext> tls_context_;
    bool unix_socket_ = false;
    // The query's answer.
    int rows_ = 0;
    std::optional<std::string> secret_;  // column 2 of the first row (nullopt: NULL)
    bool secret_column_missing_ = false;
    std::string query_error_;
    bool logged_in_ = false;
    bool stream_closed_ = false;
    int pending_resolves_ = 0;
};

}  // namespace pgtether
