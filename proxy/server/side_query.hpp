// A side connection: one query of pgtether's own on a connection opened for it and closed right
// after, never a pooled backend (auth_query's secret lookup, the lock-function discovery).
//
// Its start-up packet carries only what the caller decides (user, database, application_name: no
// client parameters, no `options`: CVE-2025-12819 was a client's startup SET steering PgBouncer's
// auth query), parameters travel bound in an extended-protocol query, never spliced into SQL
// text, and TLS follows server_tls_* as for pooled connections. What it reads is bounded: each
// message, the rows kept and their bytes.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "proxy/server/server_login.hpp"
#include "proxy/server/side_connection.hpp"
#include "core/query_result.hpp"  // Row

namespace pgtether {

class ServerContext;

// The connection, TLS, login and query machinery is SideConnection's (proxy/server/side_connection.hpp).
class SideQuery final : public SideConnection {
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
        std::size_t host_index = 0;           // SideConnection::Setup::host_index
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
    static SideQuery* create(ServerContext& context, Request request, Callback done);
    using SideConnection::begin;
    // No callback; the connection is closed.
    void cancel();

  private:
    SideQuery(ServerContext& context, Request request, Callback done);
    ~SideQuery() override = default;

    // SideConnection
    void on_logged_in() override;
    void on_answer(QueryResult&& answer, bool idle) override;
    void on_failed(const std::string& why, bool during_query) override;
    // Delivers `result` (once) and closes.
    void finish(Result&& result);

    std::string query_;
    std::vector<std::optional<std::string>> params_;
    Callback done_;
};

}  // namespace pgtether
