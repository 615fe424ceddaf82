// Collecting the answer of one of pgtether's own queries (core/query_result.hpp): rows of the
// last result set, the row count beyond what is kept, the first error, and the bounds.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "core/query_result.hpp"

using namespace pgtether;

namespace {

struct Message {
    char type;
    std::string body;
};

Message row(const std::vector<std::optional<std::string>>& values) {
    std::string out;
    protocol::append_data_row(out, values);
    return {'D', out.substr(5)};
}

Message error(const std::string& sqlstate, const std::string& text) {
    std::string out;
    protocol::append_error_response(out, {"ERROR", sqlstate, text, {}, {}});
    return {'E', out.substr(5)};
}

const Message kBindComplete{'2', ""};
const Message kCommandComplete{'C', std::string("SELECT 1\0", 9)};

Collected feed(QueryResult& result, const std::vector<Message>& messages,
               const ResultLimits& limits = {}) {
    for (const auto& m : messages) {
        Collected c = collect_result(result, m.type, protocol::as_bytes(m.body), limits);
        if (c != Collected::Ok) return c;
    }
    return Collected::Ok;
}

}  // namespace

TEST_CASE("collect_result: rows, counts, errors and bounds") {
    struct Case {
        const char* what;
        std::vector<Message> messages;
        ResultLimits limits;
        Collected outcome;
        std::size_t kept;
        std::size_t counted;
        bool failed;
    };
    const std::vector<Case> table = {
        {"no rows", {kBindComplete, kCommandComplete}, {}, Collected::Ok, 0, 0, false},
        {"two rows",
         {kBindComplete, row({"a", std::nullopt}), row({"b", "c"}), kCommandComplete},
         {},
         Collected::Ok,
         2,
         2,
         false},
        {"more rows than kept are counted",
         {row({"a"}), row({"b"}), row({"c"})},
         {1, 100},
         Collected::Ok,
         1,
         3,
         false},
        // A new result set (RowDescription, or BindComplete for a prepared statement) starts over:
        // only the last one is the answer.
        {"last result set",
         {row({"old"}), kBindComplete, row({"new"})},
         {},
         Collected::Ok,
         1,
         1,
         false},
        {"error",
         {row({"a"}), error("42P01", "no such table"), error("XX000", "later")},
         {},
         Collected::Ok,
         1,
         1,
         true},
        {"garbled row",
         {{'D', std::string("\0\1\0\0\0\x09", 6)}},
         {},
         Collected::InvalidRow,
         0,
         1,
         false},
        {"too many bytes",
         {row({std::string(60, 'x')}), row({std::string(60, 'y')})},
         {10, 100},
         Collected::TooLarge,
         1,
         2,
         false},
    };
    for (const auto& c : table) {
        CAPTURE(c.what);
        QueryResult result;
        CHECK(feed(result, c.messages, c.limits) == c.outcome);
        CHECK(result.rows.size() == c.kept);
        CHECK(result.row_count == c.counted);
        CHECK(result.failed == c.failed);
    }
    QueryResult result;
    REQUIRE(feed(result, {row({"k", std::nullopt})}) == Collected::Ok);
    CHECK(result.rows[0][0] == std::optional<std::string>("k"));
    CHECK_FALSE(result.rows[0][1].has_value());
    // The first error is kept.
    REQUIRE(feed(result, {error("42P01", "no such table"), error("XX000", "later")}) ==
            Collected::Ok);
    CHECK(result.error_text() == "42P01: no such table");
    QueryResult garbled;
    REQUIRE(feed(garbled, {{'E', ""}}) == Collected::Ok);
    CHECK(garbled.failed);
    CHECK(garbled.error_text() == "invalid error message");
}

TEST_CASE("collect_result: a result set is complete only with its CommandComplete") {
    struct Case {
        const char* what;
        std::vector<Message> messages;
        bool completed;
    };
    const std::vector<Case> table = {
        {"nothing (a query the backend skipped)", {}, false},
        {"rows without CommandComplete", {kBindComplete, row({"a"})}, false},
        {"complete", {kBindComplete, row({"a"}), kCommandComplete}, true},
        {"a new result set after a complete one", {kBindComplete, kCommandComplete, kBindComplete},
         false},
        {"an error", {error("08P01", "invalid message format")}, false},
    };
    for (const auto& c : table) {
        CAPTURE(c.what);
        QueryResult result;
        CHECK(feed(result, c.messages) == Collected::Ok);
        CHECK(result.completed == c.completed);
    }
}

TEST_CASE("build_extended_query: Parse, Bind with the parameters, Execute, Sync") {
    const std::string out = build_extended_query("SELECT $1", {std::string("alice"), std::nullopt});
    REQUIRE(out.size() > 5);
    CHECK(out[0] == 'P');
    CHECK(out.find("SELECT $1") != std::string::npos);
    CHECK(out.find("alice") != std::string::npos);
    CHECK(out.substr(out.size() - 5) == std::string("S\0\0\0\4", 5));
}
