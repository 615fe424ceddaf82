// LISTEN multiplexed (docs/session-state.md, "LISTEN and NOTIFY"): many listeners share one
// listening connection per pool and never tether; every case is compared with a listener
// connected to PostgreSQL directly.
#include <doctest/doctest.h>
#include <poll.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/private_postgres.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/scratch_database.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

struct Notification {
    std::string channel;
    std::string payload;
    int pid = 0;
};

// What libpq has read so far, without waiting.
std::vector<Notification> arrived(Conn& conn) {
    std::vector<Notification> out;
    PQconsumeInput(conn.raw());
    while (PGnotify* n = PQnotifies(conn.raw())) {
        out.push_back({n->relname, n->extra, n->be_pid});
        PQfreemem(n);
    }
    return out;
}

// Waits until `count` notifications have arrived (or `timeout` passed); what arrived.
std::vector<Notification> wait_for(Conn& conn, std::size_t count,
                                   std::chrono::milliseconds timeout = 10s) {
    std::vector<Notification> out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
        for (auto& n : arrived(conn))
            out.push_back(std::move(n));
        if (out.size() >= count) break;
        pollfd p{PQsocket(conn.raw()), POLLIN, 0};
        ::poll(&p, 1, 50);
    }
    return out;
}

std::vector<std::string> payloads(const std::vector<Notification>& notes) {
    std::vector<std::string> out;
    for (const auto& n : notes)
        out.push_back(n.payload);
    return out;
}

PoolerConfig two_backends(std::map<std::string, std::string> extra = {}) {
    // A tethered listener would make the pool's other clients wait: let that show quickly.
    extra.emplace("query_wait_timeout", "5");
    extra.emplace("tether_reserve_size", "0");
    extra.emplace("max_client_conn", "100");
    return pool_config("transaction", 2, extra);
}

// SHOW LISTENS summed over the workers' rows: clients listening on `channel` through pgtether.
long long listeners_of(const PoolerProcess& pooler, const std::string& channel) {
    Conn admin = console(pooler);
    long long n = 0;
    for (const auto& row : named_rows(admin.exec("SHOW LISTENS"))) {
        if (cell(row, "channel") == channel) n += cell_int(row, "listeners");
    }
    return n;
}

}  // namespace

TEST_CASE("20 listeners through a pool of 2 get every notification in order; the pool stays free") {
    Pgtether pooler(two_backends());
    Conn direct = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(direct.exec("LISTEN lt_jobs"));
    std::vector<Conn> listeners;
    for (int i = 0; i < 20; ++i) {
        listeners.push_back(Conn::must(pooler.conninfo()));
        Result r = listeners.back().exec("LISTEN lt_jobs");
        PGT_REQUIRE_OK(r);
        CHECK(r.command_tag == "LISTEN");
    }
    // Nobody is tethered: two more clients still hold a transaction each at once.
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(listeners_of(pooler, "lt_jobs") == 20);

    Conn producer = Conn::must(pooler.conninfo());
    std::vector<std::string> sent;
    for (int i = 0; i < 30; ++i) {
        sent.push_back("job " + std::to_string(i));
        PGT_REQUIRE_OK(producer.exec("NOTIFY lt_jobs, '" + sent.back() + "'"));
    }
    const auto expected = wait_for(direct, 30);
    REQUIRE(payloads(expected) == sent);
    for (auto& listener : listeners) {
        const auto got = wait_for(listener, 30);
        CHECK(payloads(got) == sent);
        // The sender's backend, as a direct listener sees it.
        for (std::size_t i = 0; i < got.size() && i < expected.size(); ++i) {
            CHECK(got[i].pid == expected[i].pid);
            CHECK(got[i].channel == "lt_jobs");
        }
    }
    // Nothing more, nothing twice.
    std::this_thread::sleep_for(300ms);
    for (auto& listener : listeners)
        CHECK(arrived(listener).empty());
    // Meanwhile a plain client runs at once.
    Conn plain = Conn::must(pooler.conninfo());
    CHECK(scalar(plain, "SELECT 1") == "1");
}

TEST_CASE("NOTIFY from a pooled client, a direct one, and the listener itself") {
    Pgtether pooler(two_backends());
    Conn listener = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(listener.exec("LISTEN lt_from"));
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(pooled.exec("NOTIFY lt_from, 'pooled'"));
    PGT_REQUIRE_OK(direct.exec("SELECT pg_notify('lt_from', 'direct')"));
    PGT_REQUIRE_OK(listener.exec("NOTIFY lt_from, 'self'"));
    // PostgreSQL's longest payload (7999 bytes; 8000 is refused), from each side.
    const std::string longest(7999, 'p');
    PGT_REQUIRE_OK(pooled.exec("NOTIFY lt_from, '" + longest + "'"));
    PGT_REQUIRE_OK(direct.exec("NOTIFY lt_from, '" + longest + "'"));
    Result too_long = pooled.exec("NOTIFY lt_from, '" + longest + "x'");
    CHECK(too_long.describe() == direct.exec("NOTIFY lt_from, '" + longest + "x'").describe());
    const auto got = wait_for(listener, 5);
    CHECK(payloads(got) ==
          std::vector<std::string>{"pooled", "direct", "self", longest, longest});
    REQUIRE(got.size() == 5);
    CHECK(got[1].pid == direct.backend_pid());
    CHECK(got[4].pid == direct.backend_pid());
    CHECK(arrived(listener).empty());
}

TEST_CASE("UNLISTEN and UNLISTEN * answer as PostgreSQL does and stop the notifications") {
    Pgtether pooler(two_backends());
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    const std::string script =
        "LISTEN lt_a; listen \"LT_B\"; LISTEN lt_c; UNLISTEN lt_a; UNLISTEN lt_nothing";
    auto theirs = direct.exec_all(script);
    auto ours = pooled.exec_all(script);
    REQUIRE(ours.size() == theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        CHECK(ours[i].status == theirs[i].status);
        CHECK(ours[i].command_tag == theirs[i].command_tag);
    }
    Conn producer = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(producer.exec(
        "NOTIFY lt_a, '1'; NOTIFY \"LT_B\", '2'; NOTIFY lt_b, 'not LT_B'; NOTIFY lt_c, '3'"));
    CHECK(payloads(wait_for(direct, 2)) == std::vector<std::string>{"2", "3"});
    CHECK(payloads(wait_for(pooled, 2)) == std::vector<std::string>{"2", "3"});

    Result r = pooled.exec("UNLISTEN *");
    PGT_REQUIRE_OK(r);
    CHECK(r.command_tag == "UNLISTEN");
    PGT_REQUIRE_OK(direct.exec("UNLISTEN *"));
    PGT_REQUIRE_OK(producer.exec("NOTIFY \"LT_B\", 'late'; NOTIFY lt_c, 'late'"));
    std::this_thread::sleep_for(500ms);
    CHECK(arrived(pooled).empty());
    CHECK(arrived(direct).empty());
    CHECK(eventually([&] { return listeners_of(pooler, "LT_B") == 0; }));
}

TEST_CASE("a listener inside a transaction gets nothing until COMMIT, then everything") {
    Pgtether pooler(two_backends());
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    Conn producer = Conn::must(direct_conninfo());
    for (Conn* listener : {&pooled, &direct}) {
        PGT_REQUIRE_OK(listener->exec("LISTEN lt_tx"));
        PGT_REQUIRE_OK(listener->exec("BEGIN"));
        PGT_REQUIRE_OK(listener->exec("SELECT 1"));
    }
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_tx, 'one'"));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_tx, 'two'"));
    std::this_thread::sleep_for(500ms);
    for (Conn* listener : {&pooled, &direct}) {
        CHECK(arrived(*listener).empty());
        PGT_REQUIRE_OK(listener->exec("SELECT 2"));
        CHECK(arrived(*listener).empty());
        // They come with the COMMIT, before its ReadyForQuery: there when PQexec returns.
        PGT_REQUIRE_OK(listener->exec("COMMIT"));
        std::vector<std::string> got;
        while (PGnotify* n = PQnotifies(listener->raw())) {
            got.emplace_back(n->extra);
            PQfreemem(n);
        }
        CHECK(got == std::vector<std::string>{"one", "two"});
    }
}

TEST_CASE("a rolled-back NOTIFY is never delivered") {
    Pgtether pooler(two_backends());
    Conn listener = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(listener.exec("LISTEN lt_rollback"));
    Conn producer = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(producer.exec("BEGIN"));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_rollback, 'never'"));
    PGT_REQUIRE_OK(producer.exec("ROLLBACK"));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_rollback, 'kept'"));
    const auto got = wait_for(listener, 2, 1500ms);
    CHECK(payloads(got) == std::vector<std::string>{"kept"});
}

TEST_CASE("the extended protocol's LISTEN is answered too, and never tethers") {
    Pgtether pooler(two_backends());
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    auto ours = exec_params_all(pooled, "LISTEN lt_extended", {});
    auto theirs = exec_params_all(direct, "LISTEN lt_extended", {});
    REQUIRE(ours.size() == theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        CHECK(ours[i].status == theirs[i].status);
        CHECK(ours[i].command_tag == theirs[i].command_tag);
    }
    CHECK(listeners_of(pooler, "lt_extended") == 1);
    CHECK(two_transactions_fit(pooler.conninfo()));
    PGT_REQUIRE_OK(direct.exec("NOTIFY lt_extended, 'x'"));
    CHECK(payloads(wait_for(pooled, 1)) == std::vector<std::string>{"x"});
    // A parameter PostgreSQL does not expect: the backend answers it, with its error.
    auto wrong = exec_params_all(pooled, "LISTEN lt_extended", {std::string("1")});
    auto wrong_direct = exec_params_all(direct, "LISTEN lt_extended", {std::string("1")});
    CHECK(first_error(wrong).sqlstate == first_error(wrong_direct).sqlstate);
    CHECK(first_error(wrong).sqlstate == "08P01");
}

TEST_CASE("a LISTEN batch that arrives in pieces is answered too; one that Flushes is not held") {
    Pgtether pooler(two_backends());
    const TestEnv& env = TestEnv::get();
    auto parse = [](const std::string& sql) {
        return wire::message('P', wire::cstr("") + wire::cstr(sql) + wire::i16(0));
    };
    const std::string bind = wire::message('B', wire::cstr("") + wire::cstr("") + wire::i16(0) +
                                                    wire::i16(0) + wire::i16(0));
    const std::string describe = wire::message('D', "P" + wire::cstr(""));
    const std::string execute = wire::message('E', wire::cstr("") + wire::i32(0));
    auto types_of = [](const std::vector<BackendMessage>& messages) {
        std::string types;
        for (const auto& m : messages) types.push_back(m.type);
        return types;
    };

    RawConn raw(pooler.host(), pooler.port());
    auto greeting = raw.startup(env.superuser, env.database);
    REQUIRE(!greeting.empty());
    REQUIRE(greeting.back().type == 'Z');
    // Three writes with a pause between them: one boundary inside the Parse, one between Bind
    // and Describe, as a client on a slow network (or one that writes message by message) sends.
    const std::string first = parse("LISTEN lt_pieces");
    const std::string batch = first + bind + describe + execute + wire::sync();
    REQUIRE(raw.send(batch.substr(0, 7)));
    std::this_thread::sleep_for(100ms);
    REQUIRE(raw.send(batch.substr(7, first.size() + bind.size() - 7)));
    std::this_thread::sleep_for(100ms);
    REQUIRE(raw.send(batch.substr(first.size() + bind.size())));
    CHECK(types_of(raw.read_until_ready_or_error()) == "12nCZ");
    CHECK(listeners_of(pooler, "lt_pieces") == 1);
    CHECK(two_transactions_fit(pooler.conninfo()));  // answered by pgtether: not tethered
    Conn direct = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(direct.exec("NOTIFY lt_pieces, 'x'"));
    auto note = raw.read_message();
    REQUIRE(note.has_value());
    CHECK(note->type == 'A');

    // A client that Flushes and waits for the replies before it Syncs is not kept waiting for
    // its Sync: the batch goes to a backend, which answers at the Flush.
    RawConn flusher(pooler.host(), pooler.port());
    REQUIRE(flusher.startup(env.superuser, env.database).back().type == 'Z');
    REQUIRE(flusher.send(parse("LISTEN lt_flushed") + bind + execute + wire::message('H', "")));
    std::string answered;
    for (int i = 0; i < 3; ++i) {
        auto m = flusher.read_message();
        REQUIRE(m.has_value());
        answered.push_back(m->type);
    }
    CHECK(answered == "12C");
    REQUIRE(flusher.send(wire::sync()));
    CHECK(types_of(flusher.read_until_ready_or_error()) == "Z");
}

TEST_CASE("LISTEN inside a transaction block: answered at once, in effect at COMMIT, never "
          "after ROLLBACK") {
    Pgtether pooler(two_backends());
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    Conn producer = Conn::must(direct_conninfo());
    auto notify = [&](const std::string& channel, const std::string& payload) {
        PGT_REQUIRE_OK(producer.exec("NOTIFY " + channel + ", '" + payload + "'"));
    };
    // What each side got for the same steps: command tags, transaction status, and then the
    // payloads a notification per channel brought (in order).
    auto run = [&](Conn& conn, const std::vector<std::string>& steps) {
        std::vector<std::string> seen;
        for (const auto& sql : steps) {
            Result r = conn.exec(sql);
            seen.push_back(sql + " -> " + (r.ok() ? r.command_tag : "ERROR " + r.sqlstate) + " " +
                           std::to_string(static_cast<int>(conn.transaction_status())));
        }
        return seen;
    };
    struct Case {
        const char* channel;
        std::vector<std::string> steps;
        bool listens_after;
    };
    const Case cases[] = {
        {"lt_tx_commit", {"BEGIN", "LISTEN lt_tx_commit", "SELECT 1", "COMMIT"}, true},
        {"lt_tx_end", {"START TRANSACTION", "listen \"lt_tx_end\"", "END"}, true},
        {"lt_tx_rollback", {"BEGIN", "LISTEN lt_tx_rollback", "ROLLBACK"}, false},
        {"lt_tx_failed",
         {"BEGIN", "LISTEN lt_tx_failed", "SELECT 1/0", "LISTEN lt_tx_failed", "COMMIT"},
         false},
        {"lt_tx_unlisten",
         {"LISTEN lt_tx_unlisten", "BEGIN", "UNLISTEN lt_tx_unlisten", "COMMIT"}, false},
        {"lt_tx_unlisten_undone",
         {"LISTEN lt_tx_unlisten_undone", "BEGIN", "UNLISTEN *", "ROLLBACK"}, true},
        {"lt_tx_chain", {"BEGIN", "LISTEN lt_tx_chain", "COMMIT AND CHAIN", "ROLLBACK"}, true},
        // A SAVEPOINT first: the backend runs the LISTEN (ROLLBACK TO could undo it).
        {"lt_tx_savepoint",
         {"BEGIN", "SAVEPOINT s", "LISTEN lt_tx_savepoint", "ROLLBACK TO SAVEPOINT s", "COMMIT"},
         false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.channel);
        const auto ours = run(pooled, c.steps);
        const auto theirs = run(direct, c.steps);
        CHECK(ours == theirs);
        notify(c.channel, c.channel);
        // A notification on a channel nobody should hear is given a moment to arrive wrongly.
        const auto want = c.listens_after ? std::vector<std::string>{c.channel}
                                          : std::vector<std::string>{};
        CHECK(payloads(wait_for(pooled, 1, c.listens_after ? 10s : 500ms)) == want);
        CHECK(payloads(wait_for(direct, 1, c.listens_after ? 10s : 500ms)) == want);
    }
    // None of this tethered the client: both backends are free for others.
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(listeners_of(pooler, "lt_tx_commit") == 1);

    // While the block is open, the LISTEN is not yet in effect: SHOW LISTENS has no listener.
    // A notification committed meanwhile is not delivered by pgtether; PostgreSQL itself may
    // deliver it after the COMMIT ("we might get a few more", async.c), and does here.
    for (Conn* conn : {&pooled, &direct}) {
        PGT_REQUIRE_OK(conn->exec("BEGIN"));
        PGT_REQUIRE_OK(conn->exec("LISTEN lt_tx_pending"));
    }
    CHECK(listeners_of(pooler, "lt_tx_pending") == 0);
    notify("lt_tx_pending", "before");
    for (Conn* conn : {&pooled, &direct}) PGT_REQUIRE_OK(conn->exec("COMMIT"));
    CHECK(listeners_of(pooler, "lt_tx_pending") == 1);
    notify("lt_tx_pending", "after");
    CHECK(payloads(wait_for(pooled, 2, 2s)) == std::vector<std::string>{"after"});
    const auto direct_got = payloads(wait_for(direct, 2, 2s));
    CAPTURE(direct_got.size());
    CHECK((!direct_got.empty() && direct_got.back() == "after"));

    // The extended protocol's LISTEN inside a block, too.
    PGT_REQUIRE_OK(pooled.exec("BEGIN"));
    CHECK(first_error(exec_params_all(pooled, "LISTEN lt_tx_extended", {})).sqlstate.empty());
    CHECK(pooled.transaction_status() == PQTRANS_INTRANS);
    PGT_REQUIRE_OK(pooled.exec("COMMIT"));
    notify("lt_tx_extended", "x");
    CHECK(payloads(wait_for(pooled, 1)) == std::vector<std::string>{"x"});
    CHECK(two_transactions_fit(pooler.conninfo()));
}

TEST_CASE("LISTEN beside other statements in one Query: PostgreSQL's replies, in effect when "
          "its transaction commits, never tethered") {
    Pgtether pooler(two_backends());
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    Conn producer = Conn::must(direct_conninfo());
    // Everything a client sees of one step: each result (tag, rows, error with libpq's
    // "LINE 1: ... ^" marking the error's position in the text), its notices, and the
    // transaction status after it.
    auto run = [](Conn& conn, const std::string& sql) {
        std::vector<std::string> seen;
        for (const Result& r : conn.exec_all(sql)) {
            std::string line = r.describe();
            for (const auto& row : r.rows) {
                for (const auto& cell : row) line += " " + cell.value_or("NULL");
            }
            seen.push_back(line + " | " + r.error_text);
        }
        for (const Notice& n : conn.take_notices()) {
            seen.push_back("notice " + n.severity + " " + n.sqlstate + " " + n.message);
        }
        seen.push_back("status " + std::to_string(static_cast<int>(conn.transaction_status())));
        return seen;
    };
    struct Case {
        const char* channel;
        std::vector<std::string> steps;
        bool listens_after;
    };
    const Case cases[] = {
        {"lt_mix_unlisten_all", {"LISTEN lt_mix_unlisten_all", "UNLISTEN *; SELECT 1"}, false},
        {"lt_mix_after", {"SELECT 1 AS one; LISTEN lt_mix_after"}, true},
        {"lt_mix_before", {"LISTEN lt_mix_before; SELECT generate_series(1, 3) AS n"}, true},
        {"lt_mix_between",
         {"SET application_name = 'lt_mix'; listen \"lt_mix_between\" ; "
          "SELECT current_setting('application_name')"},
         true},
        // The statements after an error do not run, and the text's implicit transaction rolls
        // back: the LISTEN before it never takes effect.
        {"lt_mix_failed", {"LISTEN lt_mix_failed; SELECT 1/0; LISTEN lt_mix_failed"}, false},
        // An error with a position: the caret points into the client's text.
        {"lt_mix_position",
         {"LISTEN lt_mix_position; SELECT no_such_column FROM pg_class; LISTEN x"}, false},
        {"lt_mix_syntax", {"LISTEN lt_mix_syntax; SELEC 1"}, false},
        // Still one implicit transaction of several statements: VACUUM refuses to run in it,
        // SET LOCAL raises no warning.
        {"lt_mix_vacuum", {"LISTEN lt_mix_vacuum; VACUUM pg_class"}, false},
        {"lt_mix_local", {"SET LOCAL work_mem = '2MB'; LISTEN lt_mix_local"}, true},
        // SET TRANSACTION after a LISTEN: no snapshot was taken before it (neither LISTEN nor
        // pgtether's stand-in takes one).
        {"lt_mix_set_tx",
         {"LISTEN lt_mix_set_tx; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT 2"}, true},
        // Inside a block: in effect at its COMMIT, never after ROLLBACK or in a failed block.
        {"lt_mix_block_commit", {"BEGIN", "SELECT 1; LISTEN lt_mix_block_commit", "COMMIT"}, true},
        {"lt_mix_block_rollback",
         {"BEGIN", "LISTEN lt_mix_block_rollback; SELECT 1", "ROLLBACK"}, false},
        {"lt_mix_block_failed",
         {"BEGIN", "LISTEN lt_mix_block_failed; SELECT 1", "SELECT 1/0", "COMMIT"}, false},
        {"lt_mix_unlisten",
         {"LISTEN lt_mix_unlisten", "SELECT 1; UNLISTEN lt_mix_unlisten; SELECT 2"}, false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.channel);
        for (const auto& step : c.steps) {
            CAPTURE(step);
            CHECK(run(pooled, step) == run(direct, step));
        }
        PGT_REQUIRE_OK(producer.exec(std::string("NOTIFY ") + c.channel + ", '" + c.channel + "'"));
        const auto want = c.listens_after ? std::vector<std::string>{c.channel}
                                          : std::vector<std::string>{};
        CHECK(payloads(wait_for(pooled, 1, c.listens_after ? 10s : 500ms)) == want);
        CHECK(payloads(wait_for(direct, 1, c.listens_after ? 10s : 500ms)) == want);
    }
    // The listening connection holds the channels, not a backend: nothing tethered the client.
    CHECK(two_transactions_fit(pooler.conninfo()));
    CHECK(listeners_of(pooler, "lt_mix_after") == 1);
    CHECK(listeners_of(pooler, "lt_mix_failed") == 0);
    // The backend ran a stand-in in the LISTEN's place, never the LISTEN (its last query,
    // as PostgreSQL shows it).
    pooled.exec_all("SELECT 'lt_mix_marker'; LISTEN lt_mix_marker");
    Conn admin = Conn::must(direct_conninfo());
    const Result last_query = admin.exec(
        "SELECT query FROM pg_stat_activity WHERE query LIKE 'SELECT ''lt_mix_marker''%'");
    PGT_REQUIRE_OK(last_query);
    REQUIRE(last_query.rows.size() == 1);
    CHECK(last_query.value() == "SELECT 'lt_mix_marker';SHOW datestyle");

    // A session lock beside the LISTEN (a job runner's start): the lock tethers the client, the
    // LISTEN does not keep it there; the unlock lets it go and it still listens. (A key no other
    // test takes: they share the database and ctest runs them side by side.)
    Result locked = pooled.exec_all("SELECT pg_try_advisory_lock(880042) AS locked; "
                                    "LISTEN lt_mix_lock").front();
    CHECK(locked.value() == "t");
    CHECK(second_transaction_waits(pooler.conninfo()));  // the lock's tether
    PGT_REQUIRE_OK(pooled.exec("SELECT pg_advisory_unlock(880042)"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_mix_lock, 'l'"));
    CHECK(payloads(wait_for(pooled, 1)) == std::vector<std::string>{"l"});

    // What the text does around the LISTEN still decides what else happens: a DO block may
    // LISTEN unseen, so such a text goes to the backend as it is (and its probe tethers).
    const std::string opaque = "DO $$BEGIN PERFORM 1; END$$; LISTEN lt_mix_opaque";
    CHECK(run(pooled, opaque) == run(direct, opaque));
    CHECK(second_transaction_waits(pooler.conninfo()));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_mix_opaque, 'o'"));
    CHECK(payloads(wait_for(pooled, 2, 1500ms)) == std::vector<std::string>{"o"});
    CHECK(payloads(wait_for(direct, 2, 200ms)) == std::vector<std::string>{"o"});
}

TEST_CASE("what pgtether does not answer runs on a backend that gets the client's channels") {
    Pgtether pooler(two_backends());
    Conn pooled = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    const char* const steps[] = {
        "LISTEN lt_m1",
        // Mixed with another statement: answered by pgtether too (the case above) ...
        "SELECT 1; LISTEN lt_m2",
        // ... but pg_listening_channels() is the backend's to answer, with the client's channels.
        "SELECT string_agg(c, ',' ORDER BY c) FROM pg_listening_channels() c",
    };
    for (const char* step : steps) {
        CAPTURE(step);
        auto ours = pooled.exec_all(step);
        auto theirs = direct.exec_all(step);
        REQUIRE(ours.size() == theirs.size());
        for (std::size_t i = 0; i < ours.size(); ++i) {
            CHECK(ours[i].describe() == theirs[i].describe());
        }
    }
    // The client is on its backend now (tethered), with both channels, each delivered once.
    CHECK(second_transaction_waits(pooler.conninfo()));
    Conn producer = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_m1, 'a'; NOTIFY lt_m2, 'b'"));
    CHECK(payloads(wait_for(pooled, 3, 1500ms)) == std::vector<std::string>{"a", "b"});
    CHECK(payloads(wait_for(direct, 3, 200ms)) == std::vector<std::string>{"a", "b"});
    // While the backend listens, the client's lone LISTEN and UNLISTEN go there too: answered
    // by pgtether, the backend would keep lt_m2 and the listening connection would deliver
    // lt_m1 a second time.
    for (const char* step : {"LISTEN lt_m1", "UNLISTEN lt_m2"}) {
        CAPTURE(step);
        CHECK(pooled.exec(step).describe() == direct.exec(step).describe());
    }
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_m1, 'c'; NOTIFY lt_m2, 'd'"));
    CHECK(payloads(wait_for(pooled, 2, 1500ms)) == std::vector<std::string>{"c"});
    CHECK(payloads(wait_for(direct, 2, 200ms)) == std::vector<std::string>{"c"});
    CHECK(listeners_of(pooler, "lt_m1") == 0);
    // A lone UNLISTEN * on the backend ends the tether, as before.
    PGT_REQUIRE_OK(pooled.exec("UNLISTEN *"));
    CHECK(two_transactions_fit(pooler.conninfo()));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_m1, 'e'"));
    CHECK(wait_for(pooled, 1, 500ms).empty());
}

TEST_CASE("a leaving listener's channels are dropped from the listening connection") {
    const int metrics_port = free_port();
    Pgtether pooler(two_backends({{"metrics_listen_port", std::to_string(metrics_port)}}));
    {
        Conn listener = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(listener.exec("LISTEN lt_leaving"));
        CHECK(listeners_of(pooler, "lt_leaving") == 1);
        Conn producer = Conn::must(direct_conninfo());
        PGT_REQUIRE_OK(producer.exec("NOTIFY lt_leaving, 'x'"));
        CHECK(wait_for(listener, 1).size() == 1);
        // The metrics count the same.
        const HttpReply reply = http_get("127.0.0.1", metrics_port, "/metrics");
        REQUIRE(reply.status == 200);
        const std::string labels = "{database=\"" + TestEnv::get().database + "\",user=\"" +
                                   TestEnv::get().superuser + "\"}";
        CHECK(reply.body.find("pgtether_listen_subscriptions" + labels + " 1") !=
              std::string::npos);
        CHECK(reply.body.find("pgtether_notifications_delivered_total" + labels + " 1") !=
              std::string::npos);
    }
    CHECK(eventually([&] { return listeners_of(pooler, "lt_leaving") == 0; }));
    // The listening connection UNLISTENed it too.
    CHECK(eventually([&] {
        return direct_scalar(
                   "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                   "'pgtether listen' AND query = 'UNLISTEN \"lt_leaving\"'") != "0";
    }));
    // SHOW LISTENS keeps the channel's counters, with no listener; a new listener takes them on
    // (with two workers, a listener on the other worker has a row of its own: the rows of the
    // channel are added up).
    struct Sums {
        long long rows = 0, listeners = 0, delivered = 0;
        bool listening = false;
    };
    auto sums_of = [&](const std::string& channel) {
        Conn admin = console(pooler);
        Sums sums;
        for (const auto& row : named_rows(admin.exec("SHOW LISTENS"))) {
            if (cell(row, "channel") != channel) continue;
            ++sums.rows;
            sums.listeners += cell_int(row, "listeners");
            sums.delivered += cell_int(row, "delivered");
            sums.listening = sums.listening || cell(row, "listening") == "yes";
        }
        return sums;
    };
    const Sums left = sums_of("lt_leaving");
    CHECK(left.rows == 1);
    CHECK(left.listeners == 0);
    CHECK(left.delivered == 1);
    CHECK_FALSE(left.listening);
    Conn again = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(again.exec("LISTEN lt_leaving"));
    Conn producer = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_leaving, 'y'"));
    CHECK(wait_for(again, 1).size() == 1);
    const Sums back = sums_of("lt_leaving");
    CHECK(back.listeners == 1);
    CHECK(back.delivered == 2);
    CHECK(back.listening);
    if (workers_in_this_run() == 1) CHECK(back.rows == 1);  // the same row took them on
}

TEST_CASE("a slow listener loses nothing; one that does not read is disconnected") {
    Pgtether pooler(
        two_backends({{"listen_client_buffer", "65536"}, {"listen_stall_timeout", "2"}}));
    Conn stalled = Conn::must(pooler.conninfo());
    Conn reader = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(stalled.exec("LISTEN lt_flood"));
    PGT_REQUIRE_OK(reader.exec("LISTEN lt_flood"));
    // 3,000 notifications of 7 kB each (21 MB at once): far more than the kernel's socket
    // buffers and the budget take. The stalled client is never asked to read again; the reader
    // reads as fast as it can, which is slower than pgtether can send.
    Conn producer = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(
        producer.exec("SELECT count(pg_notify('lt_flood', i || repeat('x', 7000))) "
                      "FROM generate_series(1, 3000) i"));
    const auto got = wait_for(reader, 3000, 90s);
    REQUIRE(got.size() == 3000);
    bool in_order = true;
    for (std::size_t i = 0; i < got.size(); ++i) {
        in_order = in_order && got[i].payload.rfind(std::to_string(i + 1) + "x", 0) == 0;
    }
    CHECK(in_order);
    CHECK(pooler.wait_for_log("notifications not read"));
    // The stalled client was disconnected with the error, after what it had not read.
    bool closed = eventually(
        [&] {
            if (!PQconsumeInput(stalled.raw())) return true;
            while (PGnotify* n = PQnotifies(stalled.raw()))
                PQfreemem(n);
            return PQstatus(stalled.raw()) == CONNECTION_BAD;
        },
        30s);
    CHECK(closed);
    // ... with PostgreSQL's SQLSTATE for a limit (libpq hands an error that arrives while no
    // query runs to the notice receiver).
    INFO(stalled.error());
    bool told = false;
    for (const auto& notice : stalled.take_notices()) {
        told = told || (notice.severity == "FATAL" && notice.sqlstate == "53400" &&
                        notice.message.find("notifications not read") != std::string::npos);
    }
    CHECK(told);
    CHECK(eventually([&] { return listeners_of(pooler, "lt_flood") == 1; }));
    // SHOW LISTENS counted the reader's deliveries and what the stalled client lost. With two
    // workers the stalled client's worker may keep a row of its own for the channel, with no
    // listener since it left (its counters kept): the rows are added up.
    Conn admin = console(pooler);
    long long delivered = 0;
    bool listening = false;
    for (const auto& row : named_rows(admin.exec("SHOW LISTENS"))) {
        if (cell(row, "channel") != "lt_flood") continue;
        delivered += cell_int(row, "delivered");
        listening = listening || (cell_int(row, "listeners") > 0 && cell(row, "listening") == "yes");
    }
    CHECK(delivered >= 3000);
    CHECK(listening);
}

TEST_CASE("a listener that joins a channel gets nothing committed before its LISTEN") {
    // The listening connection may not have read everything committed before a client's
    // LISTEN (here it stops reading while a listener does not read). PostgreSQL never delivers
    // those to the newcomer: pgtether answers the newcomer once its connection has read them.
    Pgtether pooler(
        two_backends({{"listen_client_buffer", "65536"}, {"listen_stall_timeout", "2"}}));
    Conn stalled = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(stalled.exec("LISTEN lt_late"));
    Conn producer = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(
        producer.exec("SELECT count(pg_notify('lt_late', 'before ' || i || repeat('x', 7000))) "
                      "FROM generate_series(1, 3000) i"));
    // The stalled listener has backed the connection up long before it has read 21 MB.
    Conn newcomer = Conn::must(pooler.conninfo());
    Conn direct = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(direct.exec("LISTEN lt_late"));
    Result listened = newcomer.exec("LISTEN lt_late");
    CHECK(listened.command_tag == "LISTEN");
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_late, 'after'"));
    CHECK(payloads(wait_for(direct, 2, 1s)) == std::vector<std::string>{"after"});
    CHECK(payloads(wait_for(newcomer, 2, 5s)) == std::vector<std::string>{"after"});
}

TEST_CASE("session pooling: LISTEN runs on the client's own backend, as it always did") {
    // A database of its own: other tests (ctest -j4) have listening connections of their own,
    // and the previous case's may still be exiting; in this one there must be none.
    ScratchDatabase db("pgt_listen_session");
    Pgtether pooler(pool_config("session", 2, {{"max_client_conn", "100"}}));
    Conn listener = Conn::must(pooler.conninfo("", db.name()));
    Conn direct = Conn::must(direct_conninfo("", db.name()));
    for (const char* step : {"LISTEN lt_session",
                             "SELECT string_agg(c, ',') FROM pg_listening_channels() c"}) {
        CAPTURE(step);
        CHECK(listener.exec(step).describe() == direct.exec(step).describe());
    }
    CHECK(listeners_of(pooler, "lt_session") == 0);  // not the listening connection's
    Conn producer = Conn::must(direct_conninfo("", db.name()));
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_session, 's'"));
    const auto got = wait_for(listener, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].pid == producer.backend_pid());
    CHECK(direct_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'pgtether listen' AND datname = '" + db.name() + "'") == "0");
}

TEST_CASE("the listening connection comes back after it is lost, and says what was lost") {
    Pgtether pooler(two_backends());
    Conn listener = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(listener.exec("LISTEN lt_lost"));
    const std::string terminated = direct_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = 'pgtether listen' AND query LIKE '%lt_lost%'");
    REQUIRE(terminated != "0");
    Conn producer = Conn::must(direct_conninfo());
    // Listening again (within a second or two): the next notification arrives.
    bool back = eventually(
        [&] {
            PGT_REQUIRE_OK(producer.exec("NOTIFY lt_lost, 'again'"));
            return !wait_for(listener, 1, 200ms).empty();
        },
        15s);
    CHECK(back);
    // The listener was told, with a WARNING, that notifications may have been lost.
    PGT_REQUIRE_OK(listener.exec("SELECT 1"));
    bool warned = false;
    for (const auto& notice : listener.take_notices()) {
        if (notice.severity == "WARNING" &&
            notice.message.find("notifications sent meanwhile were lost") != std::string::npos) {
            warned = true;
        }
    }
    CHECK(warned);
    CHECK(pooler.wait_for_log("listening connection of"));
}

TEST_CASE("listen_mode = tether: the old way, a listener tethered to its backend") {
    Pgtether pooler(two_backends({{"listen_mode", "tether"}}));
    Conn listener = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(listener.exec("LISTEN lt_tethered"));
    CHECK(second_transaction_waits(pooler.conninfo()));
    CHECK(listeners_of(pooler, "lt_tethered") == 0);
    Conn producer = Conn::must(direct_conninfo());
    PGT_REQUIRE_OK(producer.exec("NOTIFY lt_tethered, 'x'"));
    CHECK(payloads(wait_for(listener, 1)) == std::vector<std::string>{"x"});
    PGT_REQUIRE_OK(listener.exec("UNLISTEN *"));
    CHECK(two_transactions_fit(pooler.conninfo()));
}

TEST_CASE("a PostgreSQL restart: the listening connection LISTENs again, listeners are told") {
    PrivatePostgres pg;
    PoolerConfig config = two_backends();
    config.databases = {"* = host=" + pg.env().pg_host + " port=" + std::to_string(pg.port())};
    Pgtether pooler(config, 10s, pg.env());
    Conn listener = Conn::must(pooler.conninfo("", "postgres"));
    PGT_REQUIRE_OK(listener.exec("LISTEN lt_restart"));
    const std::string direct =
        make_conninfo(pg.env().pg_host, pg.port(), pg.env().superuser, "postgres", "", "");
    {
        Conn producer = Conn::must(direct);
        PGT_REQUIRE_OK(producer.exec("NOTIFY lt_restart, 'before'"));
        CHECK(payloads(wait_for(listener, 1)) == std::vector<std::string>{"before"});
    }
    pg.stop();
    pg.start();
    // The listener's session goes on (it held no backend); once pgtether listens again, the
    // next notification arrives.
    bool back = eventually(
        [&] {
            Conn producer(direct);
            if (!producer.ok()) return false;
            PGT_REQUIRE_OK(producer.exec("NOTIFY lt_restart, 'after'"));
            return !wait_for(listener, 1, 300ms).empty();
        },
        30s);
    CHECK(back);
    PGT_REQUIRE_OK(listener.exec("SELECT 1"));
    bool warned = false;
    for (const auto& notice : listener.take_notices()) {
        warned = warned || notice.message.find("were lost") != std::string::npos;
    }
    CHECK(warned);
}

TEST_CASE("a host list whose first host is down: the listening connection goes where the "
          "pool's servers go") {
    // The first host refuses (a primary gone in a failover: nothing listens on that port); the
    // pooled servers find the second, and so must the one connection that LISTENs for the pool.
    const TestEnv& env = TestEnv::get();
    const int gone = free_port();
    PoolerConfig config = two_backends({{"server_host_backoff", "60"}});
    config.databases = {"hosts = host=" + env.pg_host + "," + env.pg_host + " port=" +
                        std::to_string(gone) + "," + std::to_string(env.pg_port) +
                        " dbname=" + env.database};
    Pgtether pooler(config);
    Conn listener = Conn::must(pooler.conninfo("", "hosts"));
    CHECK(scalar(listener, "SELECT 'served by the second host'") == "served by the second host");
    PGT_REQUIRE_OK(listener.exec("LISTEN lt_hosts"));
    const std::string direct = make_conninfo(env.pg_host, env.pg_port, env.superuser,
                                             env.database, "", "");
    bool heard = eventually(
        [&] {
            Conn producer = Conn::must(direct);
            PGT_REQUIRE_OK(producer.exec("NOTIFY lt_hosts, 'here'"));
            return payloads(wait_for(listener, 1, 300ms)) == std::vector<std::string>{"here"};
        },
        10s);
    CHECK(heard);
}

TEST_CASE("node-postgres: its LISTEN/NOTIFY API behaves through pgtether as directly") {
    // node and npm are on this project's machines, not on every Debian machine: without them the
    // case says so and checks nothing.
    if (std::system("command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1") != 0) {
        MESSAGE("node or npm not installed: node-postgres not checked");
        return;
    }
    // node-postgres 8 from the npm registry, installed once into a cache kept between runs.
    const std::string cache = "/tmp/pgtether-node-pg8";
    const std::string install = "mkdir -p " + cache + " && cd " + cache +
                                " && { [ -d node_modules/pg ] || npm install --no-audit --no-fund "
                                "pg@8 >npm.log 2>&1; }";
    const int installed = std::system(install.c_str());
    INFO("npm install pg@8: " << read_file(cache + "/npm.log"));
    REQUIRE(installed == 0);
    Pgtether pooler(two_backends());
    const TestEnv& env = TestEnv::get();
    auto run = [&](const std::string& host, int port) {
        TempDir dir("pgt-node", env.tmp_dir);
        const std::string out = dir.path() + "/out";
        const std::string command = "NODE_PATH=" + cache + "/node_modules PGHOST=" + host +
                                    " PGPORT=" + std::to_string(port) + " PGUSER=" + env.superuser +
                                    " PGDATABASE=" + env.database + " node " + PGT_SOURCE_DIR +
                                    "/tests/integration/node/listen_notify.js >" + out + " 2>&1";
        const int status = std::system(command.c_str());
        return std::make_pair(status, read_file(out));
    };
    const auto direct = run(env.pg_host, env.pg_port);
    INFO("direct: " << direct.second);
    REQUIRE(direct.first == 0);
    const auto pooled = run(pooler.host(), pooler.port());
    INFO("pgtether: " << pooled.second);
    CHECK(pooled.first == 0);
    CHECK(pooled.second == "OK\n");
}
