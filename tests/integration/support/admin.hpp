// Helpers for tests of the admin console and the metrics endpoint: console connections, reading
// SHOW results by column name, asynchronous commands, and a small HTTP client.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pq.hpp"

namespace pgtether::itest {

using namespace std::chrono_literals;

// A connection to the admin console ("pgbouncer" database) as `user` (default: the superuser,
// which the harness lists in admin_users).
Conn console(const PoolerProcess& pooler, const std::string& user = "",
             const std::string& database = "pgbouncer");

// A [databases] line that sends clients of `name` ("*": of every name) to PostgreSQL's own
// "postgres" database. The console, metrics and reload tests use it so that their server
// connections never appear in pg_stat_activity under the test database, which other tests
// running in parallel (ctest -j) count.
std::string isolated_database(const std::string& name, const TestEnv& env = TestEnv::get());

// The rows of a result as column name -> value (NULL -> nullopt).
using NamedRow = std::map<std::string, std::optional<std::string>>;
std::vector<NamedRow> named_rows(const Result& result);
// The first row whose `column` equals `value`; nullopt when none.
std::optional<NamedRow> find_row(const Result& result, const std::string& column,
                                 const std::string& value);
// The value of `column` in `row`; throws std::runtime_error when missing or NULL.
std::string cell(const NamedRow& row, const std::string& column);
long long cell_int(const NamedRow& row, const std::string& column);


// One HTTP exchange: sends `request` as is, reads until the server closes. Status 0 when the
// connection failed or the reply was not HTTP.
struct HttpReply {
    int status = 0;
    std::map<std::string, std::string> headers;  // lower-cased names
    std::string body;
    std::string raw;
};
HttpReply http_exchange(const std::string& host, int port, const std::string& request,
                        std::chrono::milliseconds timeout = 5s);
HttpReply http_get(const std::string& host, int port, const std::string& path,
                   const std::string& extra_headers = "");

// pgtether with `config` plus the metrics endpoint on 127.0.0.1 at a free port. Tests running
// in parallel draw ports from the same range, so a port found free may be taken before pgtether
// binds it; then pgtether stops with "cannot listen for metrics" and this tries another port.
struct MetricsPooler {
    std::unique_ptr<Pgtether> pooler;
    int port = 0;
};
MetricsPooler start_with_metrics(PoolerConfig config);

}  // namespace pgtether::itest

