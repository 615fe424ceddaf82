// LISTEN/UNLISTEN beside other statements in one Query: where the statements are
// (protocol/sql_tokens.hpp), the text the backend runs instead (protocol/listen_statement.hpp),
// an error's position carried back (protocol/backend_messages.hpp), and what of the backend's
// answer the client gets (core/listen_splice.hpp), table by table.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/listen_splice.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/framing.hpp"
#include "protocol/listen_statement.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sql_tokens.hpp"

using namespace pgtether;
using protocol::ListenOp;
using Kind = ListenOp::Kind;

namespace {

std::vector<std::string> statements_of(std::string_view sql) {
    std::vector<std::string> out;
    auto spans = protocol::split_sql_statements(sql);
    REQUIRE(spans);
    for (const auto& span : *spans)
        out.emplace_back(sql.substr(span.begin, span.end - span.begin));
    return out;
}

}  // namespace

TEST_CASE("a text's top-level statements, as the server splits it") {
    CHECK(statements_of("SELECT 1") == std::vector<std::string>{"SELECT 1"});
    CHECK(statements_of("SELECT 1; SELECT 2;") ==
          std::vector<std::string>{"SELECT 1", " SELECT 2"});
    // Empty statements run nothing; ';' inside quotes, comments, bodies and parentheses do not
    // end one.
    CHECK(statements_of(";; SELECT ';' ;  -- x;\n ; SELECT $$;$$, \"a;b\", (1;2) /* ; */") ==
          std::vector<std::string>{" SELECT ';' ", " SELECT $$;$$, \"a;b\", (1;2) /* ; */"});
    CHECK(statements_of("").empty());
    CHECK(statements_of(" ; -- nothing").empty());
    // Where the server might split otherwise: nothing is said.
    CHECK_FALSE(protocol::split_sql_statements("SELECT 'a\\'; LISTEN x; --'"));
    CHECK_FALSE(protocol::split_sql_statements("SELECT 'unterminated; LISTEN x"));
    CHECK_FALSE(protocol::split_sql_statements(
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END"));
}

TEST_CASE("LISTEN beside other statements: stand-ins in the text the backend runs") {
    struct Row {
        const char* sql;
        const char* spliced;
        std::vector<std::optional<ListenOp>> statements;
    };
    const Row rows[] = {
        {"LISTEN a; SELECT 1",
         "SHOW datestyle; SELECT 1",
         {ListenOp{Kind::Listen, "a"}, std::nullopt}},
        {"SELECT 1; listen \"B\"",
         "SELECT 1;SHOW datestyle",
         {std::nullopt, ListenOp{Kind::Listen, "B"}}},
        {"select 1;unlisten *;UNLISTEN c; select 2",
         "select 1;SHOW datestyle;SHOW datestyle; select 2",
         {std::nullopt, ListenOp{Kind::UnlistenAll, ""}, ListenOp{Kind::Unlisten, "c"},
          std::nullopt}},
        {"NOTIFY a; LISTEN a /* c */ ;",
         "NOTIFY a;SHOW datestyle;",
         {std::nullopt, ListenOp{Kind::Listen, "a"}}},
        {"SET search_path TO app; LISTEN jobs",
         "SET search_path TO app;SHOW datestyle",
         {std::nullopt, ListenOp{Kind::Listen, "jobs"}}},
    };
    for (const auto& row : rows) {
        CAPTURE(row.sql);
        auto splice = protocol::splice_listen_statements(row.sql);
        REQUIRE(splice);
        CHECK(splice->sql == row.spliced);
        CHECK(splice->statements == row.statements);
    }
}

TEST_CASE("texts whose LISTENs go to the backend as sent") {
    const char* rows[] = {
        "SELECT 1",                 // no LISTEN
        "LISTEN a; LISTEN b",       // nothing else: answered whole (parse_listen_only)
        "SELECT 'listen a'",        // the word in a literal is no statement
        "LISTEN; SELECT 1",         // the backend's syntax error, not ours
        "LISTEN select; SELECT 1",  // a reserved word
        "BEGIN; LISTEN a; COMMIT",  // transaction control decides when it takes effect
        "LISTEN a; COMMIT",
        "LISTEN a; ROLLBACK",
        "START TRANSACTION; LISTEN a",
        "SAVEPOINT s; LISTEN a",
        "LISTEN a; RELEASE s",
        "LISTEN a; END",
        "LISTEN a; ABORT",
        "PREPARE TRANSACTION 'x'; LISTEN a",
        "COPY t FROM STDIN; LISTEN a",
        "LISTEN caf\xc3\xa9; SELECT 1",  // not ASCII: positions would not map
        "SELECT 'caf\xc3\xa9'; LISTEN a",
        "SELECT 'a\\'; LISTEN a",  // split uncertain
    };
    for (const char* sql : rows) {
        CAPTURE(sql);
        CHECK_FALSE(protocol::splice_listen_statements(sql));
    }
}

TEST_CASE("an error's position in the spliced text is its position in the client's") {
    // "LISTEN a; SELECT nope" runs as "SHOW datestyle; SELECT nope": 6 characters more.
    const std::string client = "LISTEN a; SELECT nope; LISTEN a_longer_channel_name; SELECT x";
    auto splice = protocol::splice_listen_statements(client);
    REQUIRE(splice);
    auto at_spliced = [&](std::string_view word, std::size_t from = 0) {
        return splice->sql.find(word, from) + 1;
    };
    auto at_client = [&](std::string_view word) { return client.find(word) + 1; };
    CHECK(splice->client_position(at_spliced("SELECT nope")) == at_client("SELECT nope"));
    CHECK(splice->client_position(at_spliced("nope")) == at_client("nope"));
    CHECK(splice->client_position(at_spliced("SELECT x")) == at_client("SELECT x"));
    CHECK(splice->client_position(1) == 1);
    // Inside a stand-in (never reported; defined anyway): its statement's start.
    CHECK(splice->client_position(at_spliced("datestyle", 20)) == at_client(" LISTEN a_longer"));
    // The end of the text.
    CHECK(splice->client_position(splice->sql.size() + 1) == client.size() + 1);
}

TEST_CASE("an ErrorResponse with another position, every other field as sent") {
    std::string body;
    for (auto [code, value] :
         std::vector<std::pair<char, std::string>>{{'S', "ERROR"},
                                                   {'V', "ERROR"},
                                                   {'C', "42703"},
                                                   {'M', "column \"nope\" does not exist"},
                                                   {'P', "23"},
                                                   {'F', "parse_relation.c"}}) {
        body.push_back(code);
        body.append(value).push_back('\0');
    }
    body.push_back('\0');
    const auto span = protocol::as_bytes(body);
    CHECK(protocol::parse_error_position(span) == std::optional<std::size_t>(23));
    auto message = protocol::error_with_position(span, 17);
    REQUIRE(message);
    const auto new_body = protocol::as_bytes(*message).subspan(protocol::kTypedHeaderSize);
    CHECK((*message)[0] == protocol::be::kErrorResponse);
    CHECK(protocol::parse_error_position(new_body) == std::optional<std::size_t>(17));
    auto fields = protocol::parse_error_fields(new_body);
    REQUIRE(fields);
    CHECK(fields->sqlstate == "42703");
    CHECK(fields->message == "column \"nope\" does not exist");
    CHECK(message->size() == body.size() + protocol::kTypedHeaderSize);  // "23" -> "17"

    std::string no_position = "SERROR";
    no_position.push_back('\0');
    no_position.push_back('\0');
    CHECK_FALSE(protocol::parse_error_position(protocol::as_bytes(no_position)));
    CHECK_FALSE(protocol::parse_error_position(protocol::as_bytes(std::string("P12"))));  // no NUL
}

TEST_CASE("the spliced Query's answer: what the client gets of each backend message") {
    using V = SplicedReplies::Verdict;
    namespace be = protocol::be;
    struct Row {
        const char* what;
        std::vector<std::optional<ListenOp>> statements;
        std::vector<std::pair<char, V>> messages;
        std::vector<ListenOp> completed;
        bool failed;
    };
    const ListenOp a{Kind::Listen, "a"};
    const ListenOp b{Kind::Unlisten, "b"};
    const Row rows[] = {
        {"LISTEN a; SELECT 1",
         {a, std::nullopt},
         {{be::kRowDescription, V::Swallow},
          {be::kDataRow, V::Swallow},
          {be::kCommandComplete, V::ListenComplete},
          {be::kRowDescription, V::Forward},
          {be::kDataRow, V::Forward},
          {be::kCommandComplete, V::Forward}},
         {a},
         false},
        {"SELECT 1; UNLISTEN b, with a notice and a parameter change in between",
         {std::nullopt, b},
         {{be::kRowDescription, V::Forward},
          {be::kNoticeResponse, V::Forward},
          {be::kCommandComplete, V::Forward},
          {be::kParameterStatus, V::Forward},
          {be::kRowDescription, V::Swallow},
          {be::kDataRow, V::Swallow},
          {be::kCommandComplete, V::ListenComplete}},
         {b},
         false},
        {"LISTEN a; SELECT 1/0; UNLISTEN b: nothing after the error runs",
         {a, std::nullopt, b},
         {{be::kRowDescription, V::Swallow},
          {be::kDataRow, V::Swallow},
          {be::kCommandComplete, V::ListenComplete},
          {be::kErrorResponse, V::ErrorPosition}},
         {a},
         true},
        {"SELECT nope; LISTEN a: an error before it",
         {std::nullopt, a},
         {{be::kErrorResponse, V::ErrorPosition}},
         {},
         true},
    };
    for (const auto& row : rows) {
        CAPTURE(row.what);
        SplicedReplies replies(row.statements);
        for (const auto& [type, verdict] : row.messages) {
            CAPTURE(type);
            CHECK(replies.on_backend_message(type) == verdict);
            if (verdict == V::ListenComplete) {
                CHECK(replies.listen_tag() ==
                      protocol::listen_command_tag(replies.completed().back()));
            }
        }
        CHECK(replies.completed() == row.completed);
        CHECK(replies.failed() == row.failed);
    }
}

TEST_CASE("at the spliced Query's ReadyForQuery: its LISTENs pending, in effect, or forgotten") {
    struct Row {
        const char* what;
        char status;
        bool failed;
        SplicedListenOutcome outcome;
    };
    const Row rows[] = {
        {"its own implicit transaction committed", 'I', false, {true, true}},
        {"inside the client's block: at its COMMIT", 'T', false, {true, false}},
        {"its implicit transaction failed and rolled back", 'I', true, {false, false}},
        {"it failed the client's block", 'E', true, {false, false}},
    };
    for (const auto& row : rows) {
        CAPTURE(row.what);
        CHECK(decide_spliced_listens(row.status, row.failed) == row.outcome);
    }
}
