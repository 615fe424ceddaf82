// auth_query: one connection as auth_user that fetches the secrets of users who are not in
// auth_file from PostgreSQL itself (PgBouncer's auth_user / auth_query / auth_dbname). The
// connections are pooled and the lookups queued by AuthLookups (proxy/server/auth_lookups.hpp); this
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

#include <functional>
#include <optional>
#include <string>

#include "core/auth_file.hpp"
#include "core/config.hpp"
#include "proxy/server/server_login.hpp"
#include "proxy/server/side_connection.hpp"

namespace pgtether {

class ServerContext;

class AuthLookups;

// The connection, TLS, login and query machinery is SideConnection's (proxy/server/side_connection.hpp);
// this class turns its answers into secrets and tells the owner.
class AuthQuery final : public SideConnection {
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
    // `host_index`: which host of target.database's host list to connect to.
    static AuthQuery* create(ServerContext& context, AuthLookups& owner, const Target& target,
                             std::size_t host_index);
    using SideConnection::begin;
    // Runs `query` for `user`; only when ready(). The result goes to owner.on_lookup_done().
    void run(const std::string& user, const std::string& query);
    // Closes the connection; the owner hears nothing more from it.
    void close();

  private:
    AuthQuery(ServerContext& context, AuthLookups& owner, const Target& target,
              std::size_t host_index);
    ~AuthQuery() override = default;

    // SideConnection
    void on_logged_in() override;
    void on_answer(QueryResult&& answer, bool idle) override;
    void on_failed(const std::string& why, bool during_query) override;

    // What a lookup's answer says about `user_`.
    [[nodiscard]] Result interpret(const QueryResult& answer) const;

    AuthLookups* owner_;  // null once closed: the owner is told nothing more
    std::string user_;    // of the running lookup
};

}  // namespace pgtether
