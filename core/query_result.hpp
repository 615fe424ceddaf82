// What one of pgtether's own queries answered, collected from the backend's messages the same way
// for every connection that runs them: Server's internal queries (probe, scrub, reset, check,
// parameter sync), auth_query lookups and side queries (lock discovery). The collection is bounded
// where the caller asks: rows kept, and their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"

namespace pgtether {

// One row of a result: each value as text, NULL as nullopt.
using Row = std::vector<std::optional<std::string>>;

struct QueryResult {
    bool failed = false;          // an ErrorResponse came
    protocol::ErrorFields error;  // the first one (default when it could not be parsed)
    bool error_parsed = false;
    std::vector<Row> rows;      // of the last result set, at most ResultLimits::max_rows
    std::size_t row_count = 0;  // every DataRow of the last result set
    std::size_t row_bytes = 0;  // the values kept in `rows`
    // A CommandComplete ended the last result set. Without it the query did not run (a backend
    // skipping to a Sync answers only the Sync): its missing rows say nothing.
    bool completed = false;

    // "SQLSTATE: message" of the first error, for logs and callers' errors.
    [[nodiscard]] std::string error_text() const;
};

struct ResultLimits {
    std::size_t max_rows = std::numeric_limits<std::size_t>::max();       // kept; more counted
    std::size_t max_row_bytes = std::numeric_limits<std::size_t>::max();  // all kept values
};

enum class Collected {
    Ok,          // taken in (or not a message a result consists of)
    InvalidRow,  // a DataRow that does not parse: the connection is unusable
    TooLarge,    // the kept rows passed max_row_bytes
};

// Takes in one backend message of a query's answer: RowDescription and BindComplete begin a new
// result set (a prepared statement's Bind/Execute sends no RowDescription), DataRow adds a row,
// CommandComplete completes it, ErrorResponse marks the query failed (the first one is kept). Other
// messages are left to the caller (ReadyForQuery ends the answer, ParameterStatus and notices
// belong to the session).
[[nodiscard]] Collected collect_result(QueryResult& result, char type, protocol::ByteSpan body,
                                       const ResultLimits& limits = {});

// One extended-protocol query with text parameters, unnamed statement and portal: Parse, Bind,
// Execute, Sync. Parameters travel bound, never spliced into the SQL text.
[[nodiscard]] std::string build_extended_query(
    std::string_view query, const std::vector<std::optional<std::string>>& params);

}  // namespace pgtether
