// auth_query: one connection as auth_user that fetches the secrets of users who are not in
// auth_file from PostgreSQL itself (PgBouncer's auth_user / auth_query / auth_dbname). The
// connections are pooled and the lookups queued by AuthLookups (proxy/auth_lookups.hpp); this
// class is one connection, which runs one lookup at a time.
//
// The connection is never a pooled backend and never carries anything the client sent: its
// start-up packet has only user, database and application_name (no client parameters, no
// `options`: CVE-2025-12819 was a client's startup SET steering PgBouncer's auth query), and the
// user name travels as a bound parameter of an extended-protocol query, never spliced into SQL
// text. TLS follows server_tls_* as for pooled connections. No secret is cached: every login of
// such a user asks again, so a changed password, a dropped role or a VALID UNTIL that has passed
// takes effect at once (CVE-2025-2291 was PgBouncer ignoring VALID UNTIL; the default auth_query
// returns NULL for an expired password and a NULL means no login).
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

class AuthLookups;

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

    // A connection to `target` (its query is not used here: every lookup brings its own), owned
    // by `owner`, which it tells when it is ready for a lookup, each lookup's result, and when it
    // is lost. begin() connects. The object frees itself once its socket is closed.
    static AuthQuery* create(Worker& worker, AuthLookups& owner, const Target& target);
    void begin();
    // Runs `query` for `user`; only when ready(). The result goes to owner.on_lookup_done().
    void run(const std::string& user, const std::string& query);
    [[nodiscard]] bool ready() const { return phase_ == Phase::Ready; }
    // Connecting or logging in (not yet ready once).
    [[nodiscard]] bool starting() const { return phase_ < Phase::Ready; }
    // When the current phase began (connecting, a lookup, idleness), for timeouts.
    [[nodiscard]] std::uint64_t phase_since_ms() const { return phase_since_ms_; }
    // Closes the connection; the owner hears nothing more from it.
    void close();

  private:
    AuthQuery(Worker& worker, AuthLookups& owner, const Target& target);
    ~AuthQuery() = default;

    void connect();
    static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
    void send_startup();
    std::size_t handle_login(protocol::ByteSpan data);
    std::size_t handle_query(protocol::ByteSpan data);
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
        Ready,       // logged in, idle: may run a lookup
        Query,       // a lookup is running
        Done,        // failed or closed; closing
    };
    void enter(Phase phase);

    // Messages of a login and of one small query: anything larger is refused.
    static constexpr std::uint32_t kMaxMessage = 1 << 20;

    Worker& worker_;
    AuthLookups* owner_;  // null once closed: the owner is told nothing more
    DatabaseConfig database_;
    ServerCredentials credentials_;
    Stream stream_;
    Phase phase_ = Phase::Connecting;
    std::uint64_t phase_since_ms_;
    std::unique_ptr<ServerLogin> login_;
    std::shared_ptr<const TlsContext> tls_context_;
    bool unix_socket_ = false;
    std::string host_;  // the host connected to (the first of a host list)
    // The running lookup and its answer.
    std::string user_;
    int rows_ = 0;
    std::optional<std::string> secret_;  // column 2 of the first row (nullopt: NULL)
    bool secret_column_missing_ = false;
    std::string query_error_;
    bool logged_in_ = false;
    bool stream_closed_ = false;
    int pending_resolves_ = 0;
};

}  // namespace pgtether
