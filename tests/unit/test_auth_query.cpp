// What an auth_query answer means (proxy/auth_query.hpp): the side connection's result turned into
// found / no password / not found / failed, table by table.
#include <doctest/doctest.h>

#include <string>

#include "proxy/auth_query.hpp"

using namespace pgtether;

namespace {

using Outcome = AuthQuery::Result::Outcome;

SideQuery::Result rows(std::vector<Row> kept, std::size_t count) {
    SideQuery::Result r;
    r.rows = std::move(kept);
    r.row_count = count;
    return r;
}

}  // namespace

TEST_CASE("auth_query answers") {
    struct Case {
        const char* what;
        SideQuery::Result answer;
        Outcome outcome;
        const char* error;  // a substring of the error, or "" for none
    };
    SideQuery::Result connect_failed;
    connect_failed.error = "cannot connect: connection refused";
    SideQuery::Result query_failed;
    query_failed.query_error = "42P01: relation \"nope\" does not exist";
    const std::string md5 = "md5" + std::string(32, 'a');
    Case cases[] = {
        {"a secret", rows({Row{"alice", md5}}, 1), Outcome::Found, ""},
        {"NULL secret (expired)", rows({Row{"alice", std::nullopt}}, 1), Outcome::NoPassword, ""},
        {"empty secret", rows({Row{"alice", ""}}, 1), Outcome::NoPassword, ""},
        {"no row", rows({}, 0), Outcome::NotFound, ""},
        {"two rows", rows({Row{"alice", md5}}, 2), Outcome::Failed, "more than one row"},
        {"one column", rows({Row{"alice"}}, 1), Outcome::Failed, "two columns"},
        {"connection failed", connect_failed, Outcome::Failed, "cannot connect"},
        {"query failed", query_failed, Outcome::Failed, "auth_query failed: 42P01"},
    };
    for (auto& c : cases) {
        INFO(c.what);
        auto result = AuthQuery::interpret(std::move(c.answer), "alice");
        CHECK(result.outcome == c.outcome);
        if (*c.error == '\0') {
            CHECK(result.error.empty());
        } else {
            CHECK(result.error.find(c.error) != std::string::npos);
        }
        CHECK(result.secret.has_value() == (c.outcome == Outcome::Found));
        if (result.secret) {
            CHECK(result.secret->user == "alice");
            CHECK(result.secret->secret == md5);
        }
    }
}
