// Prepared-statement bookkeeping: the registry, the per-backend LRU, the request queue that
// routes replies, and the DEALLOCATE recogniser.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "core/prepared_statements.hpp"
#include "core/request_queue.hpp"
#include "protocol/bytes.hpp"
#include "protocol/deallocate_statement.hpp"

using namespace pgtether;
using pgtether::protocol::as_bytes;

namespace {
const std::string kNoTypes("\0\0", 2);

// `n` distinct statements, "SELECT 0" ... (the registry must outlive them).
std::vector<StatementPtr> distinct_statements(StatementRegistry& registry, int n) {
    std::vector<StatementPtr> statements;
    for (int i = 0; i < n; ++i) {
        statements.push_back(registry.intern("SELECT " + std::to_string(i), as_bytes(kNoTypes), 0));
    }
    return statements;
}
}  // namespace

TEST_CASE("the registry gives one statement per distinct text and parameter types") {
    StatementRegistry registry;
    auto a = registry.intern("SELECT $1", as_bytes(kNoTypes), 0);
    auto b = registry.intern("SELECT $1", as_bytes(kNoTypes), 0);
    auto c = registry.intern("SELECT $1", as_bytes(std::string("\0\1\0\0\0\x17", 6)), 0);
    auto d = registry.intern("SELECT $2", as_bytes(kNoTypes), 1);
    CHECK(a == b);
    CHECK(a != c);
    CHECK(a->server_name != c->server_name);
    CHECK(d->effects == 1);
    // pgtether_<the registry's random token>_<n>: another registry (worker, process) has
    // another token, so no client can guess a backend name.
    CHECK(a->server_name.starts_with("pgtether_"));
    CHECK(a->server_name.size() >= std::string_view("pgtether_0123456789abcdef_1").size());
    StatementRegistry other;
    auto e = other.intern("SELECT $1", as_bytes(kNoTypes), 0);
    CHECK(e->server_name.substr(0, 26) != a->server_name.substr(0, 26));
    // Forgotten once nobody holds it: the same text then gets a fresh statement.
    auto old_id = d->id;
    d.reset();
    auto again = registry.intern("SELECT $2", as_bytes(kNoTypes), 1);
    CHECK(again->id != old_id);
}

TEST_CASE("a backend's statements are evicted least recently used first, pinned ones never") {
    StatementRegistry registry;
    std::vector<StatementPtr> s = distinct_statements(registry, 4);
    ServerStatements server;
    CHECK(server.add(s[0], 2, {}).empty());
    CHECK(server.add(s[1], 2, {}).empty());
    server.touch(*s[0]);  // s[1] is now the least recently used
    auto evicted = server.add(s[2], 2, {});
    REQUIRE(evicted.size() == 1);
    CHECK(evicted[0] == s[1]);
    CHECK(server.contains(*s[0]));
    CHECK(server.contains(*s[2]));
    // s[0] is the coldest, but pinned: s[2] goes instead.
    evicted = server.add(s[3], 2, {s[0]->id});
    REQUIRE(evicted.size() == 1);
    CHECK(evicted[0] == s[2]);
    // Adding what is there only touches it.
    CHECK(server.add(s[3], 2, {}).empty());
    server.remove(*s[3]);
    CHECK_FALSE(server.contains(*s[3]));
    CHECK(server.size() == 1);
}

TEST_CASE("stale statements: off the backend's set, closed before their next Parse") {
    StatementRegistry registry;
    std::vector<StatementPtr> s = distinct_statements(registry, 3);
    ServerStatements server;
    server.add(s[0], 10, {});
    server.add(s[1], 10, {});
    server.mark_stale(s[0]);
    CHECK_FALSE(server.contains(*s[0]));  // not to be used as it is
    CHECK(server.contains(*s[1]));
    server.mark_stale(s[0]);  // twice is once
    CHECK(server.take_stale(*s[0]));
    CHECK_FALSE(server.take_stale(*s[0]));
    CHECK_FALSE(server.take_stale(*s[2]));

    // Temporary objects gone: everything prepared on the backend goes stale.
    server.add(s[2], 10, {});
    server.mark_all_stale();
    CHECK(server.size() == 0);
    CHECK(server.take_stale(*s[1]));

    // Stale statements still count on the backend: beyond the capacity they are closed.
    server.add(s[0], 2, {});
    server.add(s[1], 2, {});
    auto trimmed = server.trim_stale(2);  // s[2] stale + two fresh: one too many
    REQUIRE(trimmed.size() == 1);
    CHECK(trimmed[0] == s[2]);
    CHECK(server.trim_stale(2).empty());
    server.mark_stale(s[0]);
    server.clear();  // DISCARD ALL
    CHECK_FALSE(server.take_stale(*s[0]));
}

TEST_CASE("client statements map names to statements") {
    StatementRegistry registry;
    ClientStatements client;
    auto st = registry.intern("SELECT 1", as_bytes(kNoTypes), 0);
    client.add("a", st);
    CHECK(client.find("a") == st);
    CHECK(client.find("b") == nullptr);
    CHECK(client.remove("a") == st);
    CHECK(client.remove("a") == nullptr);
}

TEST_CASE("client statements count the bytes of the texts their names stand for") {
    StatementRegistry registry;
    ClientStatements client;
    auto small = registry.intern("SELECT 1", as_bytes(kNoTypes), 0);             // 8 + 2 bytes
    auto large = registry.intern(std::string(100, 'x'), as_bytes(kNoTypes), 0);  // 102 bytes
    CHECK(client.bytes() == 0);
    client.add("a", small);
    client.add("b", large);
    client.add("c", large);  // the same text under another name counts again
    CHECK(client.bytes() == 10 + 102 + 102);
    client.add("a", large);  // a name re-pointed: its old text no longer counts
    CHECK(client.bytes() == 3 * 102);
    client.remove("b");
    CHECK(client.bytes() == 2 * 102);
    client.remove("missing");
    CHECK(client.bytes() == 2 * 102);
    client.clear();
    CHECK(client.bytes() == 0);
}

TEST_CASE("server statements are bounded in bytes too: least recently used texts go first") {
    StatementRegistry registry;
    ServerStatements server;
    auto text = [&](char c) {  // 100 + 2 bytes each
        return registry.intern(std::string(100, c), as_bytes(kNoTypes), 0);
    };
    auto a = text('a'), b = text('b'), c = text('c'), d = text('d');
    constexpr std::size_t kCount = 100;
    CHECK(server.add(a, kCount, {}, 250).empty());
    CHECK(server.add(b, kCount, {}, 250).empty());
    CHECK(server.bytes() == 204);
    server.touch(*a);
    // c does not fit with both: b (least recently used) is evicted.
    auto evicted = server.add(c, kCount, {}, 250);
    REQUIRE(evicted.size() == 1);
    CHECK(evicted[0] == b);
    CHECK(server.bytes() == 204);
    // A pinned statement is kept even over the bound, for a moment.
    evicted = server.add(d, kCount, {a->id, c->id}, 250);
    CHECK(evicted.empty());
    CHECK(server.bytes() == 306);
    // A statement larger than the bound alone still goes on (it is needed now).
    auto huge = registry.intern(std::string(1000, 'h'), as_bytes(kNoTypes), 0);
    evicted = server.add(huge, kCount, {}, 250);
    CHECK(evicted.size() == 3);
    CHECK(server.size() == 1);
    CHECK(server.bytes() == 1002);
    server.remove(*huge);
    CHECK(server.bytes() == 0);
    server.add(a, kCount, {}, 250);
    server.mark_all_stale();
    CHECK(server.bytes() == 0);
}

TEST_CASE("request queue: replies to injected requests are swallowed, errors are not") {
    RequestQueue q;
    q.push({'P', QueuedRequest::Kind::Injected, QueuedRequest::kUndoServerAdd, {}, {}, {}});
    q.push({'B', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'E', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'S', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    CHECK(q.on_backend_message('1') == RequestQueue::Verdict::Swallow);
    CHECK(q.on_backend_message('2') == RequestQueue::Verdict::Forward);
    CHECK(q.on_backend_message('D') == RequestQueue::Verdict::Forward);
    CHECK(q.on_backend_message('N') == RequestQueue::Verdict::Forward);  // asynchronous
    CHECK(q.on_backend_message('C') == RequestQueue::Verdict::Forward);
    CHECK(q.on_backend_message('Z') == RequestQueue::Verdict::Forward);
    CHECK(q.empty());
    // Requests that simply completed need nothing more: none is reported.
    CHECK(q.finished().empty());
}

TEST_CASE("request queue: answers wait for the replies before them") {
    RequestQueue q;
    q.push({'P', QueuedRequest::Kind::Answered, 0, "1-answer", {}, {}});
    // Nothing pending before it: due at once.
    REQUIRE(q.finished().size() == 1);
    CHECK(q.finished()[0].outcome == RequestQueue::Outcome::Answer);
    q.finished().clear();
    q.push({'B', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'C', QueuedRequest::Kind::Answered, 0, "3-answer", {}, {}});
    q.push({'S', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    CHECK(q.finished().empty());
    q.on_backend_message('2');
    // The Bind's completion is not reported, the answer behind it became due.
    REQUIRE(q.finished().size() == 1);
    CHECK(q.finished()[0].outcome == RequestQueue::Outcome::Answer);
    CHECK(q.finished()[0].request.reply == "3-answer");
}

TEST_CASE("request queue: after an error everything up to Sync is skipped") {
    RequestQueue q;
    q.push({'B', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'P', QueuedRequest::Kind::Answered, QueuedRequest::kUndoClientAdd, "1", "n", {}});
    q.push({'P', QueuedRequest::Kind::Injected, QueuedRequest::kUndoServerAdd, {}, {}, {}});
    q.push({'E', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'S', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'P', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    CHECK(q.on_backend_message('E') == RequestQueue::Verdict::Forward);
    auto& done = q.finished();
    REQUIRE(done.size() == 4);
    CHECK(done[0].outcome == RequestQueue::Outcome::Failed);
    CHECK(done[1].outcome == RequestQueue::Outcome::Skipped);  // the answer is never sent
    CHECK(done[2].outcome == RequestQueue::Outcome::Skipped);
    CHECK(done[3].outcome == RequestQueue::Outcome::Skipped);
    CHECK(q.size() == 2);  // the Sync and what follows it
    q.on_backend_message('Z');
    q.on_backend_message('1');
    CHECK(q.empty());
}

TEST_CASE("request queue: requests forwarded as they are mix with detailed ones in order") {
    StatementRegistry registry;
    const StatementPtr pinned = registry.intern("SELECT 1", {}, 0);
    RequestQueue q;
    q.push_forwarded('P');
    q.push({'P', QueuedRequest::Kind::Injected, QueuedRequest::kUndoServerAdd, {}, {}, pinned});
    q.push_forwarded('B');
    q.push({'D', QueuedRequest::Kind::Answered, 0, "t-answer", {}, {}});
    q.push_forwarded('E');
    q.push_forwarded('S');
    q.push_forwarded('Q');
    CHECK(q.size() == 7);
    CHECK(q.pinned_statements() == std::vector<std::uint64_t>{pinned->id});
    CHECK(q.on_backend_message('1') == RequestQueue::Verdict::Forward);  // the client's Parse
    CHECK(q.on_backend_message('1') == RequestQueue::Verdict::Swallow);  // pgtether's
    CHECK(q.pinned_statements().empty());
    CHECK(q.finished().empty());
    // The Bind fails: the answer behind it and the Execute are skipped, up to the Sync.
    CHECK(q.on_backend_message('E') == RequestQueue::Verdict::Forward);
    auto& done = q.finished();
    REQUIRE(done.size() == 3);
    CHECK(done[0].outcome == RequestQueue::Outcome::Failed);
    CHECK(done[0].request.type == 'B');
    CHECK(done[0].request.kind == QueuedRequest::Kind::Forwarded);
    CHECK(done[1].outcome == RequestQueue::Outcome::Skipped);
    CHECK(done[1].request.type == 'D');
    CHECK(done[1].request.reply == "t-answer");
    CHECK(done[2].outcome == RequestQueue::Outcome::Skipped);
    CHECK(done[2].request.type == 'E');
    CHECK(q.size() == 2);
    q.finished().clear();
    q.on_backend_message('Z');
    q.push({'C', QueuedRequest::Kind::Answered, 0, "3-answer", {}, {}});
    CHECK(q.finished().empty());  // the Query is still ahead of it
    q.on_backend_message('Z');
    REQUIRE(q.finished().size() == 1);
    CHECK(q.finished()[0].request.reply == "3-answer");
    CHECK(q.empty());
}

TEST_CASE("request queue: an injected Parse that fails shows its error") {
    RequestQueue q;
    q.push({'P', QueuedRequest::Kind::Injected, 0, {}, {}, {}});
    q.push({'B', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.push({'S', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    CHECK(q.on_backend_message('E') == RequestQueue::Verdict::Forward);
    CHECK(q.finished()[0].outcome == RequestQueue::Outcome::Failed);
    CHECK(q.finished()[1].outcome == RequestQueue::Outcome::Skipped);
}

TEST_CASE("request queue: simple queries and Describe") {
    RequestQueue q;
    q.push({'Q', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    // An error inside a simple query does not end it (ReadyForQuery does).
    q.on_backend_message('E');
    CHECK(q.size() == 1);
    q.on_backend_message('Z');
    CHECK(q.empty());
    q.push({'D', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
    q.on_backend_message('t');
    CHECK(q.size() == 1);
    q.on_backend_message('n');
    CHECK(q.empty());
}

TEST_CASE("request queue: a long pipeline keeps its order while finished entries are dropped") {
    RequestQueue q;
    // More requests than the queue keeps finished entries for, answered while more arrive.
    for (int i = 0; i < 100; ++i) {
        if (i % 2 == 0) {
            q.push({'Q', QueuedRequest::Kind::Forwarded, 0, {}, {}, {}});
        } else {
            q.push_forwarded('Q');
        }
    }
    for (int i = 0; i < 60; ++i) q.on_backend_message('Z');
    CHECK(q.size() == 40);
    q.push({'P', QueuedRequest::Kind::Answered, 0, "answer", {}, {}});
    CHECK(q.size() == 41);
    CHECK(q.finished().empty());  // 40 queries are still ahead of it
    for (int i = 0; i < 39; ++i) q.on_backend_message('Z');
    CHECK(q.finished().empty());
    q.on_backend_message('Z');
    REQUIRE(q.finished().size() == 1);
    CHECK(q.finished()[0].request.reply == "answer");
    CHECK(q.empty());
}

TEST_CASE("DEALLOCATE of one name is recognised, anything else is not") {
    using pgtether::protocol::parse_lone_deallocate;
    CHECK(parse_lone_deallocate("DEALLOCATE s1") == "s1");
    CHECK(parse_lone_deallocate("  deallocate prepare My_Stmt ;  ") == "my_stmt");
    CHECK(parse_lone_deallocate("DEALLOCATE \"Mixed\"\"Case\"") == "Mixed\"Case");
    CHECK(parse_lone_deallocate("DEALLOCATE PREPARE \"x y\";") == "x y");
    CHECK_FALSE(parse_lone_deallocate("DEALLOCATE ALL"));
    CHECK_FALSE(parse_lone_deallocate("DEALLOCATE PREPARE ALL"));
    CHECK_FALSE(parse_lone_deallocate("DEALLOCATE s1; SELECT 1"));
    CHECK_FALSE(parse_lone_deallocate("DEALLOCATE /* c */ s1"));
    CHECK_FALSE(parse_lone_deallocate("DEALLOCATE"));
    CHECK_FALSE(parse_lone_deallocate("DEALLOCATE \"unterminated"));
    CHECK_FALSE(parse_lone_deallocate("SELECT 1"));
}

TEST_CASE("SQL that prepares, executes or deallocates a reserved name is recognised") {
    struct Case {
        const char* sql;
        bool names_reserved;
    };
    static constexpr Case kCases[] = {
        {"EXECUTE pgtether_0a1b_1", true},
        {"execute PGTETHER_0a1b_1(1, 2)", true},  // unquoted: folded to lower case
        {"Execute PgTether_0a1b_1", true},
        {"EXECUTE pgtether_", true},  // the text ends with the prefix
        {"EXECUTE pgtether", false},  // shorter than the prefix
        // Candidates for the first character in both cases, before the one that matches.
        {"SELECT Pp, pP, PGTETHE; EXECUTE pPgTeThEr_1", false},
        {"SELECT Pp, pP, PGTETHE; EXECUTE PgTeThEr_1", true},
        {"SELECT pp, PGTETHE; EXECUTE pgtether_1", true},
        {"DEALLOCATE pgtether_x", true},
        {"DEALLOCATE PREPARE pgtether_x", true},
        {"deallocate prepare \"pgtether_x\"", true},
        {"PREPARE pgtether_mine AS SELECT 1", true},
        {"SELECT 1; EXPLAIN ANALYZE EXECUTE pgtether_1", true},
        {"CREATE TABLE t AS EXECUTE /* c */ pgtether_1", true},
        {"BEGIN; DEALLOCATE -- a comment\n pgtether_1; COMMIT", true},
        // Under standard_conforming_strings = off the literal ends later and the DEALLOCATE is
        // code: either reading counts.
        {"SELECT 'a\\'; DEALLOCATE pgtether_1; --'", true},
        {"SELECT E'a\\' DEALLOCATE pgtether_1 '", false},  // E'': always an escape
        // Not a statement name, or not the prefix.
        {"EXECUTE \"PGTETHER_1\"", false},  // quoted: verbatim, and names are case-sensitive
        {"EXECUTE s1", false},
        {"DEALLOCATE ALL", false},
        {"SELECT * FROM pgtether_stats", false},
        {"SELECT 'EXECUTE pgtether_1'", false},
        {"SELECT $$DEALLOCATE pgtether_1$$", false},
        {"SELECT 1 /* EXECUTE pgtether_1 */", false},
        {"GRANT EXECUTE ON FUNCTION pgtether_f() TO x", false},
        {"PREPARE TRANSACTION 'pgtether_1'", false},
        {"SELECT execute, prepare FROM t", false},
    };
    for (const auto& c : kCases) {
        CAPTURE(c.sql);
        CHECK(pgtether::protocol::names_statement_with_prefix(c.sql, "pgtether_") ==
              c.names_reserved);
    }
}

TEST_CASE("undo_request: a request that never took effect is taken back on both sides") {
    StatementRegistry registry;
    auto st = registry.intern("SELECT 1", as_bytes(kNoTypes), 0);
    auto other = registry.intern("SELECT 2", as_bytes(kNoTypes), 0);
    using Q = QueuedRequest;
    struct Case {
        const char* name;
        std::uint8_t undo;
        bool client_has_before;   // the client maps "a" to st
        bool client_other;        // ... or to another statement (a later Parse reused the name)
        bool server_has_before;   // the backend has st
        bool client_left;         // no client any more
        bool client_has_after;
        bool server_has_after;
    };
    const Case cases[] = {
        {"nothing to undo", Q::kUndoNone, true, false, true, false, true, true},
        {"Parse failed: the client's name goes", Q::kUndoClientAdd, true, false, false, false,
         false, false},
        {"Parse failed, name since reused: kept", Q::kUndoClientAdd, false, true, false, false,
         false, false},
        {"Close skipped: the client's name comes back", Q::kUndoClientRemove, false, false, true,
         false, true, true},
        {"injected Parse failed: the backend lacks it", Q::kUndoServerAdd, false, false, true,
         false, false, false},
        {"injected Close skipped: the backend still has it", Q::kUndoServerRemove, false, false,
         false, false, false, true},
        {"client and backend at once", Q::kUndoClientAdd | Q::kUndoServerAdd, true, false, true,
         false, false, false},
        {"the client left: only the backend side", Q::kUndoClientRemove | Q::kUndoServerAdd,
         false, false, true, true, false, false},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        ClientStatements client;
        ServerStatements server;
        if (c.client_has_before) client.add("a", st);
        if (c.client_other) client.add("a", other);
        if (c.server_has_before) (void)server.add(st, 100, {});
        QueuedRequest request{'P', Q::Kind::Forwarded, c.undo, {}, "a", st};
        undo_request(request, c.client_left ? nullptr : &client, server);
        CHECK((client.find("a") == st) == c.client_has_after);
        if (c.client_other) CHECK(client.find("a") == other);
        CHECK(server.contains(*st) == c.server_has_after);
    }
}
