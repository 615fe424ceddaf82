// LISTEN multiplexed: the statements pgtether answers itself (protocol/listen_statement.hpp) and
// the decisions about channels and notifications (core/listen_channels.hpp), table by table.
#include <doctest/doctest.h>

#include "core/listen_channels.hpp"
#include "protocol/listen_statement.hpp"

using namespace pgtether;
using protocol::ListenOp;
using Kind = ListenOp::Kind;

TEST_CASE("strings of LISTEN and UNLISTEN only, with channels as PostgreSQL names them") {
    struct Row {
        const char* sql;
        std::vector<ListenOp> ops;
    };
    const Row rows[] = {
        {"LISTEN jobs", {{Kind::Listen, "jobs"}}},
        {"listen Jobs;", {{Kind::Listen, "jobs"}}},
        {"  LiStEn\tJOBS ; ", {{Kind::Listen, "jobs"}}},
        {"LISTEN \"Jobs\"", {{Kind::Listen, "Jobs"}}},
        {"LISTEN \"a\"\"b\"", {{Kind::Listen, "a\"b"}}},
        {"LISTEN \"jobs:insert\"; LISTEN \"worker:migrate\"",
         {{Kind::Listen, "jobs:insert"}, {Kind::Listen, "worker:migrate"}}},
        {"UNLISTEN jobs", {{Kind::Unlisten, "jobs"}}},
        {"UNLISTEN *", {{Kind::UnlistenAll, ""}}},
        {"unlisten*;listen a", {{Kind::UnlistenAll, ""}, {Kind::Listen, "a"}}},
        {"-- a comment\nLISTEN /* one /* nested */ */ a;;", {{Kind::Listen, "a"}}},
        {"LISTEN a$1_b", {{Kind::Listen, "a$1_b"}}},
        // What may come before the first LISTEN (the cheap first-character test lets it by).
        {" ;; LISTEN a", {{Kind::Listen, "a"}}},
        {"/* c */ UNLISTEN *", {{Kind::UnlistenAll, ""}}},
        {"\n-- c\nlisten a", {{Kind::Listen, "a"}}},
        {"LISTEN name", {{Kind::Listen, "name"}}},  // an unreserved keyword is a ColId
        {"LISTEN \"select\"", {{Kind::Listen, "select"}}},
        {"LISTEN caf\xc3\x89", {{Kind::Listen, "caf\xc3\x89"}}},  // only ASCII is folded
    };
    for (const auto& row : rows) {
        CAPTURE(row.sql);
        auto ops = protocol::parse_listen_only(row.sql);
        REQUIRE(ops);
        CHECK(*ops == row.ops);
    }
}

TEST_CASE("anything else goes to the backend, which answers it") {
    const char* rows[] = {
        "",
        "  ;  ",
        "SELECT 1",
        "LISTEN a; SELECT 1",
        "SELECT 1; LISTEN a",
        "BEGIN; LISTEN a; COMMIT",
        "LISTEN",
        "LISTEN *",
        "LISTEN a b",
        "LISTEN a.b",
        "LISTEN 'a'",
        "LISTEN 1a",
        "LISTEN select",  // reserved: a syntax error
        "LISTEN user",
        "LISTEN \"\"",  // zero-length delimited identifier
        "LISTEN \"unterminated",
        "LISTEN a /* unterminated",
        "LISTEN U&\"a\"",
        "NOTIFY a",
        "(LISTEN a)",
        "VALUES (1); LISTEN a",
        "UNLISTEN",
        "LISTEN aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  // 64: truncated
    };
    for (const char* sql : rows) {
        CAPTURE(sql);
        CHECK_FALSE(protocol::parse_listen_only(sql));
    }
    // 63 bytes is the longest name kept whole.
    CHECK(protocol::parse_listen_only(
        "LISTEN aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

TEST_CASE("command tags and quoting") {
    CHECK(protocol::listen_command_tag({Kind::Listen, "a"}) == "LISTEN");
    CHECK(protocol::listen_command_tag({Kind::Unlisten, "a"}) == "UNLISTEN");
    CHECK(protocol::listen_command_tag({Kind::UnlistenAll, ""}) == "UNLISTEN");
    CHECK(protocol::quote_identifier("jobs") == "\"jobs\"");
    CHECK(protocol::quote_identifier("a\"b") == "\"a\"\"b\"");
}

TEST_CASE("a client's channels after its LISTENs and UNLISTENs, and the net change") {
    struct Row {
        ChannelSet before;
        std::vector<ListenOp> ops;
        ChannelSet after;
        std::vector<std::string> added;
        std::vector<std::string> removed;
    };
    const Row rows[] = {
        {{}, {{Kind::Listen, "a"}}, {"a"}, {"a"}, {}},
        {{"a"}, {{Kind::Listen, "a"}}, {"a"}, {}, {}},
        {{"a"}, {{Kind::Unlisten, "b"}}, {"a"}, {}, {}},
        {{"a", "b"}, {{Kind::Unlisten, "a"}}, {"b"}, {}, {"a"}},
        {{"a", "b"}, {{Kind::UnlistenAll, ""}}, {}, {}, {"a", "b"}},
        {{}, {{Kind::Listen, "a"}, {Kind::Unlisten, "a"}}, {}, {}, {}},
        {{"a"}, {{Kind::UnlistenAll, ""}, {Kind::Listen, "a"}}, {"a"}, {}, {}},
        {{"a"}, {{Kind::UnlistenAll, ""}, {Kind::Listen, "c"}}, {"c"}, {"c"}, {"a"}},
    };
    for (const auto& row : rows) {
        ChannelSet channels = row.before;
        const ChannelChange change = apply_listen_ops(channels, row.ops);
        CHECK(channels == row.after);
        CHECK(change.added == row.added);
        CHECK(change.removed == row.removed);
    }
}

TEST_CASE("the listening connection LISTENs at a channel's first listener, UNLISTENs at its last") {
    ChannelCounts counts;
    CHECK(counts.add("a"));
    CHECK_FALSE(counts.add("a"));
    CHECK(counts.add("b"));
    CHECK(counts.listeners("a") == 2);
    CHECK_FALSE(counts.remove("a"));
    CHECK(counts.remove("a"));
    CHECK(counts.listeners("a") == 0);
    CHECK_FALSE(counts.remove("a"));  // not listened on: nothing to stop
    CHECK(counts.channels() == 1);
}

TEST_CASE("a notification is sent between transactions, held inside one, and bounded") {
    struct Row {
        bool between;
        std::size_t held, unsent, size, budget;
        NotificationAction action;
    };
    const Row rows[] = {
        {true, 0, 0, 100, 1000, NotificationAction::Send},
        {true, 300, 0, 100, 1000, NotificationAction::Send},  // the held ones go first
        {false, 0, 0, 100, 1000, NotificationAction::Hold},
        {false, 850, 0, 100, 1000, NotificationAction::Hold},
        {false, 950, 0, 100, 1000, NotificationAction::Overflow},
        {true, 0, 950, 100, 1000, NotificationAction::Overflow},  // a client that does not read
        {true, 0, 900, 100, 1000, NotificationAction::Send},      // exactly the budget
    };
    for (const auto& row : rows) {
        CAPTURE(row.held);
        CAPTURE(row.unsent);
        CHECK(decide_notification({row.between, row.held, row.unsent, row.size, row.budget}) ==
              row.action);
    }
}

TEST_CASE("LISTENs pending in a transaction: kept, forgotten or committed at its ReadyForQuery") {
    struct Row {
        const char* what;
        char status;
        bool commit_seen;
        PendingListenAction action;
    };
    const Row rows[] = {
        {"a statement inside the block", 'T', false, PendingListenAction::Keep},
        {"an error inside the block", 'E', false, PendingListenAction::Keep},
        {"COMMIT", 'I', true, PendingListenAction::Commit},
        {"ROLLBACK, or COMMIT of a failed block (tag ROLLBACK)", 'I', false,
         PendingListenAction::Discard},
        {"COMMIT AND CHAIN", 'T', true, PendingListenAction::Commit},
        {"COMMIT, then a failing implicit transaction in the same string", 'I', true,
         PendingListenAction::Commit},
        {"COMMIT, then BEGIN and a failing statement in the same string", 'E', true,
         PendingListenAction::Commit},
    };
    for (const auto& row : rows) {
        CAPTURE(row.what);
        CHECK(decide_pending_listens(row.status, row.commit_seen) == row.action);
    }
}
