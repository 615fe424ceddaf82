// What one client can make pgtether hold in memory (issue 15, finding 2; client_buffer_limit and
// max_prepared_statement_bytes in docs/configuration.md): a message larger than the budget is
// streamed to the server instead of assembled (a huge Query, an unnamed Parse, a Bind with a huge
// parameter) -- with the tether's trigger assuming what it could not scan -- or refused when
// pgtether would have to keep it (a named Parse: 54000); a client pipelining while no server is
// free is not read beyond pkt_buf; named statements are bounded in bytes per client and per
// server connection. pgtether's RSS is checked against the documented bound, and other clients
// keep being served. And file descriptors: at the limit, accept() failing is logged, counted and
// waited out, without losing the queued connections.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

constexpr int kBudget = 64 * 1024;  // client_buffer_limit in these tests

PoolerConfig budget_pool(int size, std::map<std::string, std::string> extra = {}) {
    extra.emplace("client_buffer_limit", std::to_string(kBudget));
    extra.emplace("query_wait_timeout", "60");
    return pool_config("transaction", size, extra);
}

// The peak resident memory so far (VmHWM: what pgtether ever held, not only what it holds now,
// which a buffer freed after the fact would hide).
long peak_rss_kb(pid_t pid) { return process_memory_kb(pid, "VmHWM"); }

// RSS growth is meaningless under AddressSanitizer (freed memory stays in its quarantine, and
// its shadow memory grows with every allocation): there the bound is only reported.
void check_rss_growth(long before_kb, long after_kb, long bound_kb) {
    MESSAGE("pgtether peak RSS before " << before_kb << " kB, after " << after_kb << " kB");
    if (TestEnv::get().pgtether_sanitized) {
        MESSAGE("AddressSanitizer build: RSS growth not checked");
    } else {
        CHECK(after_kb - before_kb < bound_kb);
    }
}

// A Query message whose length field announces `total_text` bytes of SQL text ("SELECT '" + x's
// ...), of which only the first `sent` are built (the head of a message still arriving).
std::string query_head(std::size_t total_text, std::size_t sent) {
    std::string head = "Q" + wire::i32(static_cast<std::int32_t>(4 + total_text + 1));
    std::string text = "SELECT '";
    text.resize(sent, 'x');
    return head + text;
}

}  // namespace

TEST_CASE("a huge partial Query is streamed: pgtether's RSS stays bounded, others are served") {
    Pgtether pgt(budget_pool(2));
    Conn bystander = Conn::must(pgt.conninfo());
    PGT_REQUIRE_OK(bystander.exec("SELECT 1"));
    const long before = peak_rss_kb(pgt.pid());
    REQUIRE(before > 0);

    // The attack of the issue: a Query announcing 300 MB, of which 64 MB are sent and the rest
    // never comes. Before the budget pgtether assembled all of it in the client's buffer.
    RawConn attacker(pgt.host(), pgt.port(), 30s);
    auto greeting = attacker.startup(TestEnv::get().superuser, TestEnv::get().database);
    REQUIRE(!greeting.empty());
    REQUIRE(greeting.back().type == 'Z');
    constexpr std::size_t kAnnounced = 300u << 20;
    constexpr std::size_t kChunk = 1u << 20;
    REQUIRE(attacker.send(query_head(kAnnounced, kChunk)));
    std::string filler(kChunk, 'x');
    for (int i = 1; i < 64; ++i)
        REQUIRE(attacker.send(filler));

    // Meanwhile another client is served (by the pool's other backend).
    CHECK(scalar(bystander, "SELECT 41 + 1") == "42");
    const long during = peak_rss_kb(pgt.pid());
    // Documented bound: about two client_buffer_limits plus a socket read per client; 8 MB is a
    // wide margin, 64 MB would be held without the budget.
    check_rss_growth(before, during, 8 * 1024);

    // The attacker leaves in the middle of the message: its backend cannot be cleaned (it waits
    // for the rest of the message) and is closed; the pool keeps serving.
    attacker.reset();
    CHECK(pgt.wait_for_log("client left in the middle of a message", 10s));
    CHECK(scalar(bystander, "SELECT 2") == "2");
    Conn later = Conn::must(pgt.conninfo());
    CHECK(scalar(later, "SELECT 3") == "3");
}

TEST_CASE("a multi-MB Query through pgtether returns the right answer without being held") {
    Pgtether pgt(budget_pool(1));
    Conn conn = Conn::must(pgt.conninfo());
    PGT_REQUIRE_OK(conn.exec("SELECT 1"));
    const long before = peak_rss_kb(pgt.pid());
    // 24 MB of SQL text, far beyond the 64 kB budget.
    const std::size_t length = 24u << 20;
    std::string sql = "SELECT length('" + std::string(length, 'a') + "')";
    auto r = conn.exec(sql);
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == std::to_string(length));
    const long after = peak_rss_kb(pgt.pid());
    check_rss_growth(before, after, 8 * 1024);
    CHECK(scalar(conn, "SELECT 'still fine'") == "still fine");
}

TEST_CASE("a lock call beyond the scanned start of a streamed Query still tethers (probe)") {
    Pgtether pgt(budget_pool(2));
    Conn locker = Conn::must(pgt.conninfo());
    Conn other = Conn::must(pgt.conninfo());
    // The lock function's name comes after 1 MB of text: the trigger cannot see it, so the
    // transaction counts as lock-relevant and the probe finds the lock.
    std::string sql =
        "SELECT length('" + std::string(1u << 20, 'b') + "'), pg_advisory_lock(77123)";
    PGT_REQUIRE_OK(locker.exec(sql));
    CHECK(advisory_locks_held(77123) == 1);
    // Held for the client across transactions: others cannot take it, and the client's unlock
    // runs on the backend that holds it.
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(77123)") == "f");
    CHECK(scalar(locker, "SELECT pg_advisory_unlock(77123)") == "t");
    CHECK(eventually([] { return advisory_locks_held(77123) == 0; }));
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(77123)") == "t");
    CHECK(scalar(other, "SELECT pg_advisory_unlock(77123)") == "t");
}

TEST_CASE(
    "large extended-protocol messages: unnamed Parse and Bind are streamed, a named Parse "
    "beyond the budget gets 54000") {
    Pgtether pgt(budget_pool(1));
    Conn conn = Conn::must(pgt.conninfo());
    const std::size_t length = 3u << 20;

    // Unnamed statement (PQexecParams): a huge text, streamed.
    auto r = conn.exec_params("SELECT length('" + std::string(length, 'c') + "') + $1::int",
                              {std::string("1")});
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == std::to_string(length + 1));

    // A small named statement (translated: prepared under pgtether's name) bound with a huge
    // parameter: the Bind's head is rewritten and its parameter streamed.
    PGT_REQUIRE_OK(conn.prepare("len", "SELECT length($1::text)"));
    r = conn.exec_prepared("len", {std::string(length, 'd')});
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == std::to_string(length));

    // A named statement whose text exceeds the budget: pgtether would have to keep it to prepare
    // it on other backends, so it is refused -- and the connection stays usable.
    r = conn.prepare("big", "SELECT length('" + std::string(length, 'e') + "')");
    PGT_CHECK_SQLSTATE(r, "54000");
    CHECK(r.message.find("client_buffer_limit") != std::string::npos);
    CHECK(scalar(conn, "SELECT 'usable'") == "usable");
    r = conn.exec_prepared("len", {std::string("abc")});
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == "3");
}

TEST_CASE("the rest of a refused named Parse is dropped as it arrives, the batch ends usable") {
    // One backend, wanted by another client while the refused Parse's rest is still coming.
    Pgtether pgt(budget_pool(1));
    RawConn client(pgt.host(), pgt.port(), 30s);
    auto greeting = client.startup(TestEnv::get().superuser, TestEnv::get().database);
    REQUIRE(greeting.back().type == 'Z');
    // A named Parse announcing 1 MB of text (beyond the budget, translated: refused with 54000),
    // of which 200 kB are sent now.
    constexpr std::size_t kText = 1u << 20;
    constexpr std::size_t kSentNow = 200u << 10;
    const std::string head = wire::cstr("big");
    const std::size_t body = head.size() + kText + 1 + 2;  // name, text, NUL, no parameter types
    std::string now = "P" + wire::i32(static_cast<std::int32_t>(4 + body)) + head;
    now.append(kSentNow, 'y');
    REQUIRE(client.send(now));

    // Another client wants the backend meanwhile; it is served too.
    std::string other_answer;
    std::thread other([&] {
        Conn conn = Conn::must(pgt.conninfo());
        other_answer = scalar(conn, "SELECT 'other'");
    });
    std::this_thread::sleep_for(500ms);
    // The rest of the Parse (its bytes would read as garbage messages if they were not dropped),
    // then Sync: the batch ends with the error and the connection stays usable.
    std::string rest(kText - kSentNow, 'y');
    rest += std::string(1, '\0') + wire::i16(0);
    REQUIRE(client.send(rest + wire::sync()));
    auto answer = client.read_until_ready_or_error(30s);
    CHECK(wire::first_error_sqlstate(answer) == "54000");
    auto ready = client.read_until_ready_or_error(30s);
    REQUIRE(!ready.empty());
    CHECK(ready.back().type == 'Z');
    REQUIRE(client.send(wire::query("SELECT 'usable'")));
    auto usable = client.read_until_ready_or_error(30s);
    CHECK(wire::first_error_sqlstate(usable) == std::nullopt);
    REQUIRE(!usable.empty());
    CHECK(usable.back().type == 'Z');
    other.join();
    CHECK(other_answer == "other");
}

TEST_CASE("without statement translation a large named Parse is streamed too") {
    // max_prepared_statements = 0: names go to the backend as sent (one backend here).
    Pgtether pgt(budget_pool(1, {{"max_prepared_statements", "0"}}));
    Conn conn = Conn::must(pgt.conninfo());
    const std::size_t length = 2u << 20;
    // Nothing to keep: the name and the text go to the backend as sent, the text unscanned
    // (every effect assumed, so the probe runs at the end of the transactions that use it).
    PGT_REQUIRE_OK(conn.prepare("big", "SELECT length('" + std::string(length, 'f') + "')"));
    auto r = conn.exec_prepared("big", {});
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == std::to_string(length));
}

TEST_CASE("a client pipelining while no server is free is not read beyond pkt_buf") {
    Pgtether pgt(budget_pool(1));
    // The pool's only backend is busy in a transaction.
    Conn holder = Conn::must(pgt.conninfo());
    PGT_REQUIRE_OK(holder.exec("BEGIN"));
    PGT_REQUIRE_OK(holder.exec("SELECT 1"));
    const long before = peak_rss_kb(pgt.pid());

    RawConn flood(pgt.host(), pgt.port(), 30s);
    auto greeting = flood.startup(TestEnv::get().superuser, TestEnv::get().database);
    REQUIRE(greeting.back().type == 'Z');
    std::string batch;
    for (int i = 0; i < 1000; ++i)
        batch += wire::query("SELECT " + std::to_string(i));
    // ~16 kB per batch; send() stops succeeding once the kernel's buffers are full (5 s).
    std::size_t sent = 0;
    for (int i = 0; i < 4000 && flood.send(batch); ++i)
        sent += batch.size();
    MESSAGE("bytes sent before the socket backed up: " << sent);
    CHECK(sent < 64u << 20);  // pgtether stopped reading; the kernel holds the rest
    const long during = peak_rss_kb(pgt.pid());
    check_rss_growth(before, during, 8 * 1024);

    // The holder is unaffected and, once it commits, the flood is served in order.
    CHECK(scalar(holder, "SELECT 'holder'") == "holder");
    PGT_REQUIRE_OK(holder.exec("COMMIT"));
    auto first = flood.read_until_ready_or_error(30s);
    REQUIRE(!first.empty());
    CHECK(first.back().type == 'Z');
}

TEST_CASE("named statements are bounded in bytes per client and per server connection") {
    Pgtether pgt(budget_pool(1, {{"max_prepared_statement_bytes", "2048"}}));
    // Statements of ~700 bytes: two fit a client's 2048 bytes, the third does not.
    auto text = [](char c) { return "SELECT '" + std::string(700, c) + "'::text AS v"; };
    Conn a = Conn::must(pgt.conninfo());
    PGT_REQUIRE_OK(a.prepare("a1", text('a')));
    PGT_REQUIRE_OK(a.prepare("a2", text('b')));
    auto r = a.prepare("a3", text('c'));
    PGT_CHECK_SQLSTATE(r, "53400");
    CHECK(r.message.find("max_prepared_statement_bytes") != std::string::npos);
    // Deallocating one makes room again.
    PGT_REQUIRE_OK(a.exec("DEALLOCATE a1"));
    PGT_REQUIRE_OK(a.prepare("a3", text('c')));

    // A second client's statements land on the same (only) backend: it keeps at most 2048 bytes
    // of statement text, evicting the least recently used ones (re-prepared when used again).
    Conn b = Conn::must(pgt.conninfo());
    PGT_REQUIRE_OK(b.prepare("b1", text('d')));
    PGT_REQUIRE_OK(b.prepare("b2", text('e')));
    const int on_backend = std::stoi(scalar(b, "SELECT count(*) FROM pg_prepared_statements"));
    CHECK(on_backend <= 2);
    for (const char* name : {"a2", "a3"}) {
        r = a.exec_prepared(name, {});
        PGT_REQUIRE_OK(r);
        CHECK(r.value().size() == 700);
    }
    r = b.exec_prepared("b1", {});
    PGT_REQUIRE_OK(r);
    CHECK(r.value() == std::string(700, 'd'));
}

TEST_CASE("without translation, a statement named beyond the tracked count still tethers") {
    // max_prepared_statements = 0: names go to the backend as sent, and pgtether remembers at
    // most 10,000 per client for the tether's trigger; a Bind of a name beyond that assumes
    // every effect, so the probe finds a lock its statement takes.
    Pgtether pgt(budget_pool(1, {{"max_prepared_statements", "0"}}));
    RawConn conn(pgt.host(), pgt.port(), 30s);
    auto greeting = conn.startup(TestEnv::get().superuser, TestEnv::get().database);
    REQUIRE(greeting.back().type == 'Z');
    auto parse = [](const std::string& name, const std::string& sql) {
        return wire::message('P', wire::cstr(name) + wire::cstr(sql) + wire::i16(0));
    };
    std::string batch;
    for (int i = 0; i < 10000; ++i) batch += parse("s" + std::to_string(i), "SELECT 1");
    batch += wire::sync();
    REQUIRE(conn.send(batch));
    auto reply = conn.read_until_ready_or_error(30s);
    REQUIRE(!reply.empty());
    REQUIRE(reply.back().type == 'Z');
    // Prepared in one transaction (nothing runs), executed in the next.
    REQUIRE(conn.send(parse("lock", "SELECT pg_advisory_lock(77124)") + wire::sync()));
    reply = conn.read_until_ready_or_error(10s);
    REQUIRE(reply.back().type == 'Z');
    const std::string bind = wire::message('B', wire::cstr("") + wire::cstr("lock") +
                                                    wire::i16(0) + wire::i16(0) + wire::i16(0));
    const std::string execute = wire::message('E', wire::cstr("") + wire::i32(0));
    REQUIRE(conn.send(bind + execute + wire::sync()));
    reply = conn.read_until_ready_or_error(10s);
    REQUIRE(reply.back().type == 'Z');
    CHECK(advisory_locks_held(77124) == 1);
    // The lock stays with this client: another client (on another backend) cannot take it.
    Conn other = Conn::must(pgt.conninfo());
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(77124)") == "f");
    conn.send(wire::terminate());
    CHECK(eventually([] { return advisory_locks_held(77124) == 0; }));
}

// Issue 27, item 11: out of file descriptors, pgtether used to lose connections without a word
// (libuv's accept path closes what is queued to make room). Now the start-up log states the
// budget, accept() failing is logged and counted, the listener pauses, and the queued connections
// are served once descriptors are free again.
TEST_CASE(
    "out of file descriptors: budget logged, accept failure logged and counted, nobody lost") {
    PoolerConfig config = pool_config("transaction", 1, {{"max_client_conn", "500"}});
    config.fd_limit = 64;
    Pgtether pooler(config);
    CHECK(
        pooler.wait_for_log("kernel file descriptor limit: 64 (hard: 64); max_client_conn: 500, "
                            "max expected fd use: "));
    CHECK(pooler.wait_for_log("file descriptor limit 64 is below the expected use of"));

    // More connections than descriptors: the kernel queues them all (listen_backlog 128).
    constexpr int kConnections = 90;
    std::vector<std::unique_ptr<RawConn>> conns;
    for (int i = 0; i < kConnections; ++i) {
        conns.push_back(std::make_unique<RawConn>(pooler.host(), pooler.port()));
    }
    CHECK(
        pooler.wait_for_log("accept() failed: Too many open files; not accepting new "
                            "connections for 100 ms"));
    // Most of them leave; the last ones, queued while pgtether had no descriptor to spare, are
    // accepted now and log in (with descriptors left for a server connection).
    conns.erase(conns.begin(), conns.end() - 10);
    for (int i = 1; i <= 3; ++i) {
        auto& late = *conns[conns.size() - static_cast<std::size_t>(i)];
        auto reply = late.startup(TestEnv::get().superuser, TestEnv::get().database, 10s);
        CHECK_MESSAGE(!reply.empty(), "queued connection got no reply");
        if (!reply.empty()) CHECK_MESSAGE(reply.back().type == 'Z', wire::describe(reply));
    }
    conns.clear();
    Conn after = Conn::must(pooler.conninfo());
    CHECK(scalar(after, "SELECT 1") == "1");
    Conn admin = console(pooler);
    auto totals = admin.exec("SHOW TOTALS");
    auto row = find_row(totals, "name", "total_accept_fd_exhausted");
    REQUIRE(row.has_value());
    CHECK(cell_int(*row, "value") >= 1);
}
