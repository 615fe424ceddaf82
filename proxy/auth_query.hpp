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

#include <functional>
#include <optional>
#include <string>

#include "proxy/auth_file.hpp"
#include "proxy/config.hpp"
#include "proxy/server_login.hpp"
#include "proxy/side_query.hpp"

namespace pgtether {

class Worker;

class AuthQuery {
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
    // the pointer before calling begin(). The object frees itself when `done` runs or on cancel();
    // do not touch it after either.
    static AuthQuery* create(Worker& worker, Target target, std::string user, Callback done);
    void begin();
    // The client went away: no callback; the connection is closed.
    void cancel();

    // What the side query's answer means for `user` (pure: unit-tested).
    static Result interpret(SideQuery::Result&& answer, const std::string& user);

  private:
    AuthQuery() = default;
    ~AuthQuery() = default;

    SideQuery* query_ = nullptr;
    Callback done_;
};

}  // namespace pgtether
