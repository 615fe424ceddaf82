// Protocol-level named prepared statements in transaction mode (issue "Protocol-level prepared
// statements"): a client's statements work on whichever backend serves it, and every reply is
// what a direct connection gives.
//
// To make each transaction of a client land on a different backend, the pool keeps two backends
// warm (min_pool_size) and hands idle ones out round-robin (server_round_robin): a statement
// prepared in one transaction is then executed on the other backend in the next.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/differential.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

PoolerConfig alternating_backends(std::map<std::string, std::string> extra = {}) {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"min_pool_size", "2"},
                       {"server_round_robin", "1"}};
    for (auto& [key, value] : extra) config.settings[key] = value;
    return config;
}

int backend_pid(Conn& conn) {
    auto r = conn.exec("SELECT pg_backend_pid()");
    REQUIRE_MESSAGE(r.ok(), r.describe());
    return std::stoi(r.value());
}

// Waits until the pool has its two backends (min_pool_size warms them up in the background).
void wait_for_two_backends(Pgtether& pooler) {
    Conn conn = Conn::must(pooler.conninfo());
    std::set<int> seen;
    for (int i = 0; i < 50 && seen.size() < 2; ++i) {
        seen.insert(backend_pid(conn));
        std::this_thread::sleep_for(20ms);
    }
    REQUIRE_MESSAGE(seen.size() == 2, "the pool never used two backends");
}

struct CommandResult {
    int status = -1;
    std::string output;
};

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
    TempDir dir("pgt-cmd");
    ChildProcess::Options options;
    options.argv = argv;
    options.log_path = dir.path() + "/output.log";
    ChildProcess child(options);
    CommandResult result;
    auto status = child.wait_exit(timeout);
    if (!status) {
        child.stop(1s);
        result.output = "timed out\n";
    } else {
        result.status = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
    }
    result.output += read_file(options.log_path);
    return result;
}

}  // namespace

TEST_CASE("named statements work on whichever backend serves the client") {
    Pgtether pooler(alternating_backends());
    wait_for_two_backends(pooler);
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.prepare("get_abalance", "SELECT abalance FROM pgbench_accounts WHERE aid = $1"));
    PGT_REQUIRE_OK(a.prepare("add", "SELECT $1::int + $2::int AS sum, pg_backend_pid() AS pid"));
    std::set<std::string> backends;
    for (int i = 1; i <= 30; ++i) {
        auto sum = a.exec_prepared("add", {std::to_string(i), "1"});
        PGT_REQUIRE_OK(sum);
        CHECK(sum.value() == std::to_string(i + 1));
        backends.insert(sum.value(0, 1));
        PGT_REQUIRE_OK(a.exec_prepared("get_abalance", {std::to_string(i)}));
        auto described = a.describe_prepared("add");
        PGT_REQUIRE_OK(described);
        CHECK(described.param_types.size() == 2);
        CHECK(described.columns == std::vector<std::string>{"sum", "pid"});
    }
    // The statements really crossed backends (with two workers the client's worker may hold
    // one backend of the two: see workers_in_this_run).
    if (workers_in_this_run() == 1) CHECK(backends.size() == 2);
}

TEST_CASE("replies match a direct connection, errors included") {
    Pgtether pooler(alternating_backends());
    wait_for_two_backends(pooler);
    Conn direct = Conn::must(direct_conninfo());
    Conn pooled = Conn::must(pooler.conninfo());
    using namespace steps;
    std::vector<Step> session = {
        prepare("s1", "SELECT $1::int * 2 AS doubled"),
        exec_prepared("s1", {"21"}),
        describe("s1"),
        prepare("s1", "SELECT 1"),  // 42P05: already exists
        exec_prepared("s1", {"5"}),
        prepare("broken", "SELEC 1"),  // 42601: syntax error, leaves no statement behind
        exec_prepared("broken", {}),   // 26000
        prepare("broken", "SELECT 'fixed'::text AS t"),
        exec_prepared("broken", {}),
        exec_prepared("never_prepared", {}),  // 26000 with the client's name in the message
        describe("never_prepared"),
        simple("BEGIN"),
        prepare("in_tx", "SELECT 'kept'::text AS k"),
        simple("ROLLBACK"),  // protocol-level statements are not transactional
        exec_prepared("in_tx", {}),
        pipeline({prepare("p1", "SELECT $1::text AS v"), exec_prepared("p1", {"one"}),
                  params("SELECT 'unnamed ' || $1 AS u", {"two"}),
                  simple("SELECT 1/0"),  // error mid-pipeline: the rest is skipped
                  exec_prepared("p1", {"three"}), prepare("p2", "SELECT 2 AS two")}),
        exec_prepared("p1", {"after"}),
        exec_prepared("p2", {}),  // skipped above: does not exist
        prepare("p2", "SELECT 2 AS two"),
        exec_prepared("p2", {}),
        simple("DEALLOCATE s1"),
        exec_prepared("s1", {"1"}),  // 26000
        simple("DEALLOCATE ALL"),
        exec_prepared("p1", {"x"}),  // 26000
        prepare("p1", "SELECT 'again'::text AS v"),
        exec_prepared("p1", {}),
        simple("DISCARD ALL"),
        exec_prepared("p1", {}),  // 26000
    };
    PGT_CHECK_SAME_REPLIES(direct, pooled, session);
    // The duplicate Parse is logged in PgBouncer's words too.
    CHECK(pooler.wait_for_log("prepared statement 's1' was already prepared"));
}

TEST_CASE("Close of a statement by protocol message, as PostgreSQL answers it") {
    Pgtether pooler(alternating_backends());
    const TestEnv& env = TestEnv::get();
    RawConn raw(pooler.host(), pooler.port());
    auto greeting = raw.startup(env.superuser, env.database);
    REQUIRE(!greeting.empty());
    REQUIRE(greeting.back().type == 'Z');
    // Parse, Close (statement), Close (unknown name), Sync; then Bind of the closed name.
    std::string batch = wire::message('P', wire::cstr("gone") + wire::cstr("SELECT 1") + wire::i16(0)) +
                        wire::message('C', "S" + wire::cstr("gone")) +
                        wire::message('C', "S" + wire::cstr("no_such")) + wire::sync();
    REQUIRE(raw.send(batch));
    auto replies = raw.read_until_ready_or_error();
    std::string types;
    for (auto& m : replies) types.push_back(m.type);
    CHECK(types == "133Z");
    REQUIRE(raw.send(wire::message('B', wire::cstr("") + wire::cstr("gone") + wire::i16(0) +
                                            wire::i16(0) + wire::i16(0)) +
                     wire::sync()));
    auto error = raw.read_until_ready_or_error();
    CHECK(wire::first_error_sqlstate(error) == "26000");
}

TEST_CASE("eviction keeps every statement working with max_prepared_statements = 2") {
    Pgtether pooler(alternating_backends({{"max_prepared_statements", "2"}}));
    wait_for_two_backends(pooler);
    Conn a = Conn::must(pooler.conninfo());
    for (int s = 0; s < 5; ++s) {
        PGT_REQUIRE_OK(a.prepare("rot" + std::to_string(s),
                                 "SELECT " + std::to_string(s) + " + $1::int AS v"));
    }
    for (int round = 0; round < 6; ++round) {
        for (int s = 0; s < 5; ++s) {
            auto r = a.exec_prepared("rot" + std::to_string(s), {std::to_string(round)});
            PGT_REQUIRE_OK(r);
            CHECK(r.value() == std::to_string(s + round));
        }
        // No backend ever holds more than two of pgtether's statements.
        auto held = a.exec("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pgtether_%'");
        PGT_REQUIRE_OK(held);
        CHECK(std::stoi(held.value()) <= 2);
    }
}

TEST_CASE("the same text under different names by different clients is prepared once") {
    // One backend shared by both clients: one worker (with two, a client on the other worker
    // would get the backend lent, i.e. closed and opened anew).
    Pgtether pooler(alternating_backends(
        {{"min_pool_size", "1"}, {"default_pool_size", "1"}, {"workers", "1"}}));
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    const std::string text = "SELECT 'shared text'::text AS s, $1::int AS n";
    PGT_REQUIRE_OK(a.prepare("mine", text));
    PGT_REQUIRE_OK(b.prepare("yours", text));
    PGT_REQUIRE_OK(a.exec_prepared("mine", {"1"}));
    PGT_REQUIRE_OK(b.exec_prepared("yours", {"2"}));
    auto count = a.exec("SELECT count(*) FROM pg_prepared_statements WHERE statement = $t$" + text +
                        "$t$");
    PGT_REQUIRE_OK(count);
    CHECK(count.value() == "1");
}

TEST_CASE("pgbench -M prepared with 50 clients on a 4-backend pool") {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "4"},
                       {"max_client_conn", "200"}};
    Pgtether pooler(config);
    const TestEnv& env = TestEnv::get();
    for (const char* mode : {"prepared", "extended"}) {
        INFO(mode);
        auto result = run_command({env.pg_bin + "/pgbench", "-h", pooler.host(), "-p",
                                   std::to_string(pooler.port()), "-U", env.superuser, "-n",
                                   "-c", "50", "-j", "2", "-t", "40", "-M", mode, "-S",
                                   env.database},
                                  120s);
        CHECK_MESSAGE(result.status == 0, result.output);
        CHECK_MESSAGE(result.output.find("number of failed transactions: 0") != std::string::npos,
                      result.output);
        CHECK_MESSAGE(result.output.find("number of transactions actually processed: 2000/2000") !=
                          std::string::npos,
                      result.output);
    }
}

TEST_CASE("psycopg 3 with prepare_threshold=0 across transactions") {
    Pgtether pooler(alternating_backends());
    wait_for_two_backends(pooler);
    // Both backends serve it (with two workers the client's worker may hold only one of them).
    const std::string backends_seen = workers_in_this_run() == 1 ? "2" : "len(pids)";
    // clang-format off
    const std::string script =
        "import psycopg\n"
        "conn = psycopg.connect(\"\"\"" + pooler.conninfo() +
        "\"\"\", prepare_threshold=0, autocommit=True)\n"
        "pids = set()\n"
        "for i in range(40):\n"
        "    with conn.transaction():\n"
        "        row = conn.execute('SELECT %s::int * 3, pg_backend_pid()', (i,)).fetchone()\n"
        "        assert row[0] == i * 3, row\n"
        "        pids.add(row[1])\n"
        "        conn.execute('SELECT abalance FROM pgbench_accounts WHERE aid = %s',\n"
        "                     (i + 1,)).fetchone()\n"
        "assert len(pids) == " + backends_seen + ", pids\n"
        "print('ok', len(pids))\n";
    // clang-format on
    TempDir dir("pgt-psycopg");
    std::string path = dir.write_file("prepared.py", script);
    auto result = run_command({"/usr/bin/python3", path}, 60s);
    CHECK_MESSAGE(result.status == 0, result.output);
    CHECK_MESSAGE(result.output.find("ok " + std::string(workers_in_this_run() == 1 ? "2" : "")) !=
                      std::string::npos,
                  result.output);
}

TEST_CASE("max_prepared_statements = 0 passes names through, as PgBouncer 1.18 does") {
    // The two backends take turns for one client: one worker's pool.
    Pgtether pooler(alternating_backends({{"max_prepared_statements", "0"}, {"workers", "1"}}));
    wait_for_two_backends(pooler);
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.prepare("plain_name", "SELECT 1"));
    // The next transaction runs on the other backend, which never saw the Parse.
    PGT_CHECK_SQLSTATE(a.exec_prepared("plain_name", {}), "26000");
}

TEST_CASE("a lock statement prepared earlier and executed later on another backend tethers") {
    Pgtether pooler(alternating_backends());
    wait_for_two_backends(pooler);
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.prepare("take", "SELECT pg_advisory_lock($1::bigint)"));
    PGT_REQUIRE_OK(a.exec("SELECT 1"));
    PGT_REQUIRE_OK(a.exec_prepared("take", {"1201"}));
    int pid = backend_pid(a);
    for (int i = 0; i < 6; ++i) CHECK(backend_pid(a) == pid);
    CHECK(b.exec("SELECT pg_try_advisory_lock(1201)").value() == "f");
    CHECK(a.exec("SELECT pg_advisory_unlock(1201)").value() == "t");
}

TEST_CASE("prepared statements under concurrency keep every result right") {
    Pgtether pooler(alternating_backends({{"default_pool_size", "3"}, {"max_prepared_statements", "3"}}));
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t]() {
            Conn conn(pooler.conninfo());
            if (!conn.ok()) {
                ++wrong;
                return;
            }
            for (int s = 0; s < 4; ++s) {
                if (!conn.prepare("q" + std::to_string(s),
                                  "SELECT $1::int * " + std::to_string(s + 1) + " AS v")
                         .ok()) {
                    ++wrong;
                }
            }
            for (int i = 0; i < 50; ++i) {
                int s = (i + t) % 4;
                auto r = conn.exec_prepared("q" + std::to_string(s), {std::to_string(i)});
                if (!r.ok() || r.value() != std::to_string(i * (s + 1))) ++wrong;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(wrong == 0);
}

namespace {

// node-postgres's messages for one query: Parse (unless the named statement was prepared on this
// connection before), Bind, Describe portal, Execute, Sync; text parameters.
std::string node_postgres_query(const std::string& name, const std::string& text,
                                const std::vector<std::string>& params, bool parse) {
    std::string bind = wire::cstr("") + wire::cstr(name) + wire::i16(0) +
                       wire::i16(static_cast<std::int16_t>(params.size()));
    for (const auto& p : params) bind += wire::i32(static_cast<std::int32_t>(p.size())) + p;
    bind += wire::i16(0);
    std::string out;
    if (parse) out += wire::message('P', wire::cstr(name) + wire::cstr(text) + wire::i16(0));
    return out + wire::message('B', bind) + wire::message('D', "P" + wire::cstr("")) +
           wire::message('E', wire::cstr("") + wire::i32(0)) + wire::sync();
}

// Runs node-postgres's sessions one after the other, each on a new connection, and returns every
// reply rendered (wire::render), one line each, "> ..." before each request. A lone Sync ends each
// session before its Terminate: its ReadyForQuery comes once pgtether's probe after the last
// statement is done and the backend is back in the pool, as when the driver's end() comes a
// moment later (a Terminate during the probe has the backend scrubbed with DISCARD ALL, which
// would hide what this test looks for).
std::string node_postgres_sessions(const std::string& host, int port,
                                   const std::vector<std::vector<std::string>>& sessions) {
    const TestEnv& env = TestEnv::get();
    std::string out;
    for (const auto& requests : sessions) {
        RawConn raw(host, port);
        auto hello = raw.startup(env.superuser, env.database);
        REQUIRE((!hello.empty() && hello.back().type == 'Z'));
        for (const auto& request : requests) {
            out += "> " + std::string(1, request[0]) + "\n";
            raw.send(request);
            while (auto msg = raw.read_message(5s)) {
                out += wire::render(*msg) + "\n";
                if (msg->type == 'Z') break;
            }
        }
        raw.send(wire::sync());
        auto ready = raw.read_message(5s);
        out += (ready ? wire::render(*ready) : std::string("(no reply to Sync)")) + "\n";
        raw.send(wire::terminate());
        out += "-- session ends\n";
    }
    return out;
}

}  // namespace

TEST_CASE("a shared statement meets another session's temporary table of the same name") {
    // node-postgres's test: a client creates temp table test_type(col int) and runs the named
    // statement "get type integer" (select col from test_type) between inserts and deletes, drops
    // the table and leaves; the next client creates test_type(col smallint) and runs "get type
    // smallint" with the same text. Both statements share one server-side name, and the next
    // client lands on the backend the first one left (the pool hands out the most recently used
    // backend first). PostgreSQL plans the second Parse afresh; so must pgtether, instead of
    // reusing the plan for the first session's table ("cached plan must not change result type").
    const std::string text = "select col from test_type";
    auto insert = [](const std::string& n) {
        return node_postgres_query("", "insert into test_type(col) values ($1)", {n}, true);
    };
    auto remove = [](const std::string& n) {
        return node_postgres_query("", "delete from test_type where col = $1", {n}, true);
    };
    const std::vector<std::vector<std::string>> sessions = {
        {wire::query("create temp table test_type(col int)"), insert("1"),
         node_postgres_query("get type integer", text, {}, true), remove("1"), insert("2"),
         node_postgres_query("get type integer", text, {}, false), remove("2"), insert("3"),
         node_postgres_query("get type integer", text, {}, false),
         wire::query("drop table test_type")},
        {wire::query("create temp table test_type(col smallint)"), insert("4"),
         node_postgres_query("get type smallint", text, {}, true),
         node_postgres_query("get type smallint", text, {}, false)},
        // A third client, its table of yet another type, on the same backend again.
        {wire::query("create temp table test_type(col text)"), insert("five"),
         node_postgres_query("get type text", text, {}, true),
         node_postgres_query("get type text", text, {}, false)},
    };
    const TestEnv& env = TestEnv::get();
    Pgtether pooler(pool_config("transaction", 4));
    const std::string direct = node_postgres_sessions(env.pg_host, env.pg_port, sessions);
    const std::string pooled = node_postgres_sessions(pooler.host(), pooler.port(), sessions);
    CHECK(direct.find("E ") == std::string::npos);  // no errors on a direct connection
    CHECK_MESSAGE(direct == pooled, "PostgreSQL:\n" << direct << "\npgtether:\n" << pooled);
}

namespace {

// Every reply up to and including ReadyForQuery (an error does not end the batch: the Sync does).
std::string reply_types_until_ready(RawConn& raw, std::vector<BackendMessage>* messages = nullptr) {
    std::string types;
    while (auto message = raw.read_message()) {
        types.push_back(message->type);
        if (messages) messages->push_back(*message);
        if (message->type == 'Z') break;
    }
    return types;
}

std::string bind_message(const std::string& statement) {
    return wire::message(
        'B', wire::cstr("") + wire::cstr(statement) + wire::i16(0) + wire::i16(0) + wire::i16(0));
}

}  // namespace

TEST_CASE("backend statement names are unguessable, and clients may not use the reserved prefix") {
    Pgtether pooler(alternating_backends(
        {{"default_pool_size", "1"}, {"min_pool_size", "1"}, {"workers", "1"}}));
    Conn victim = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(victim.prepare("mine", "SELECT 'victim'::text AS whose"));
    PGT_REQUIRE_OK(victim.exec_prepared("mine", {}));
    // The backend's name for it: pgtether_<16 random hex digits>_<n>, not pgtether_1.
    const std::string backend_name =
        victim.exec("SELECT name FROM pg_prepared_statements WHERE NOT from_sql").value();
    CAPTURE(backend_name);
    CHECK(std::regex_match(backend_name, std::regex("pgtether_[0-9a-f]{16}_[0-9]+")));

    // Another client of the same pool (one backend: the victim's) tries the name by protocol.
    const TestEnv& env = TestEnv::get();
    RawConn raw(pooler.host(), pooler.port());
    REQUIRE(raw.startup(env.superuser, env.database).back().type == 'Z');
    for (const std::string& name : {backend_name, std::string("pgtether_1")}) {
        CAPTURE(name);
        struct Probe {
            const char* what;
            std::string batch;
        };
        const Probe probes[] = {
            {"Bind + Execute",
             bind_message(name) + wire::message('E', wire::cstr("") + wire::i32(0))},
            {"Describe", wire::message('D', "S" + wire::cstr(name))},
            {"Close", wire::message('C', "S" + wire::cstr(name))},
            {"Parse",
             wire::message('P', wire::cstr(name) + wire::cstr("SELECT 'thief'") + wire::i16(0))},
        };
        for (const Probe& probe : probes) {
            CAPTURE(probe.what);
            // The rest of the batch (a harmless Parse of its own) is discarded up to the Sync.
            REQUIRE(raw.send(
                probe.batch +
                wire::message('P', wire::cstr("after") + wire::cstr("SELECT 1") + wire::i16(0)) +
                wire::sync()));
            std::vector<BackendMessage> replies;
            CHECK(reply_types_until_ready(raw, &replies) == "EZ");
            CHECK(wire::first_error_sqlstate(replies) == "42939");
            CHECK(wire::error_fields(replies[0])['M'].find("reserved") != std::string::npos);
        }
    }
    // The Parse of "after" was discarded each time: the name is free.
    REQUIRE(
        raw.send(wire::message('P', wire::cstr("after") + wire::cstr("SELECT 1") + wire::i16(0)) +
                 wire::sync()));
    CHECK(reply_types_until_ready(raw) == "1Z");

    // And by SQL, alone, in a multi-statement text, and inside a transaction block (which the
    // refusal aborts, as any failing statement would).
    Conn thief = Conn::must(pooler.conninfo());
    for (const std::string& sql : std::vector<std::string>{
             "EXECUTE " + backend_name, "DEALLOCATE " + backend_name,
             "DEALLOCATE PREPARE \"" + backend_name + "\"", "PREPARE pgtether_squat AS SELECT 1",
             "SELECT 1; EXPLAIN ANALYZE EXECUTE " + backend_name, "execute PGTETHER_1"}) {
        CAPTURE(sql);
        PGT_CHECK_SQLSTATE(thief.exec(sql), "42939");
    }
    PGT_REQUIRE_OK(thief.exec("BEGIN"));
    PGT_CHECK_SQLSTATE(thief.exec("DEALLOCATE " + backend_name), "42939");
    PGT_CHECK_SQLSTATE(thief.exec("SELECT 1"), "25P02");  // the block was aborted
    PGT_REQUIRE_OK(thief.exec("ROLLBACK"));
    // A name that merely contains the prefix elsewhere is the client's own business.
    PGT_CHECK_OK(thief.exec("SELECT 'EXECUTE pgtether_1' AS text"));

    // The victim's statement survived all of it.
    auto mine = victim.exec_prepared("mine", {});
    PGT_CHECK_OK(mine);
    CHECK(mine.value() == "victim");
}

// Dynamic SQL that drops every statement on the backend but pgtether's own probe (whose loss
// would tether the client that ran it, and give the next client another backend).
const char* const kDropClientStatements =
    "DO $$DECLARE n text; BEGIN FOR n IN SELECT name FROM pg_prepared_statements WHERE name "
    "NOT LIKE 'pgtether\\_probe\\_%' LOOP EXECUTE format('DEALLOCATE %I', n); END LOOP; END$$";

TEST_CASE("a statement the backend lost is prepared again at its next use") {
    // One backend: the client that drops statements by dynamic SQL shares it with the victim.
    Pgtether pooler(alternating_backends(
        {{"default_pool_size", "1"}, {"min_pool_size", "1"}, {"workers", "1"}}));
    Conn victim = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(victim.prepare("mine", "SELECT 'still here'::text AS v"));
    PGT_REQUIRE_OK(victim.exec_prepared("mine", {}));

    Conn vandal = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(vandal.exec(
        "DO $$DECLARE n text; BEGIN FOR n IN SELECT name FROM pg_prepared_statements LOOP "
        "EXECUTE format('DEALLOCATE %I', n); END LOOP; END$$"));
    // Gone (pgtether's own probe, prepared after the DO block, is all that is left).
    CHECK(vandal
              .exec("SELECT count(*) FROM pg_prepared_statements WHERE name NOT LIKE "
                    "'pgtether\\_probe\\_%'")
              .value() == "0");

    // Outside a transaction block the use that meets the gap is sent again behind a fresh
    // Parse: the client never sees the 26000, as on a direct connection (nobody else's DO block
    // could drop its statement there).
    for (int i = 0; i < 3; ++i) {
        auto again = victim.exec_prepared("mine", {});
        PGT_CHECK_OK(again);
        if (again.ok()) CHECK(again.value() == "still here");
    }
    CHECK(pooler.wait_for_log("was lost on the backend (26000): prepared again"));
    auto described = victim.describe_prepared("mine");
    PGT_CHECK_OK(described);

    // Inside a block the 26000 has aborted the transaction: it cannot be taken back, so the
    // client gets it (and the statement is prepared again at its next use).
    PGT_REQUIRE_OK(vandal.exec(kDropClientStatements));
    PGT_REQUIRE_OK(victim.exec("BEGIN"));
    PGT_CHECK_SQLSTATE(victim.exec_prepared("mine", {}), "26000");
    PGT_REQUIRE_OK(victim.exec("ROLLBACK"));
    auto after = victim.exec_prepared("mine", {});
    PGT_CHECK_OK(after);
    if (after.ok()) CHECK(after.value() == "still here");
}

TEST_CASE("a lost statement's batch goes again only when nothing else could have run") {
    Pgtether pooler(alternating_backends(
        {{"default_pool_size", "1"}, {"min_pool_size", "1"}, {"workers", "1"}}));
    const TestEnv& env = TestEnv::get();
    // A raw client: libpq 15's PQpipelineSync flushes every batch on its own, so "the second
    // batch sent before the first's answer" would depend on scheduling; one send() makes it so.
    RawConn victim(pooler.host(), pooler.port());
    REQUIRE(victim.startup(env.superuser, env.database).back().type == 'Z');
    auto simple = [&](const std::string& sql) {
        REQUIRE(victim.send(wire::query(sql)));
        return victim.read_until_ready_or_error();
    };
    // Bind + Execute + Sync of "ins" with one parameter: one batch.
    auto insert_batch = [](int n) {
        const std::string value = std::to_string(n);
        return wire::message('B', wire::cstr("") + wire::cstr("ins") + wire::i16(0) + wire::i16(1) +
                                      wire::i32(static_cast<std::int32_t>(value.size())) + value +
                                      wire::i16(0)) +
               wire::message('E', wire::cstr("") + wire::i32(0)) + wire::sync();
    };
    // Each batch's outcome up to its ReadyForQuery: its SQLSTATE, or "ok".
    auto batch_outcomes = [&](int batches) {
        std::vector<std::string> outcomes;
        std::optional<std::string> state;
        while (static_cast<int>(outcomes.size()) < batches) {
            auto msg = victim.read_message();
            REQUIRE_MESSAGE(msg.has_value(), "no ReadyForQuery after " << outcomes.size() << " batches");
            if (msg->type == 'E') state = wire::error_fields(*msg)['C'];
            if (msg->type == 'Z') {
                outcomes.push_back(state.value_or("ok"));
                state.reset();
            }
        }
        return outcomes;
    };
    auto count_rows = [&](const std::string& where) {
        return wire::first_value(simple("SELECT count(*) FROM pgt_lost_rows WHERE " + where));
    };
    REQUIRE(wire::first_error_sqlstate(simple("CREATE TABLE IF NOT EXISTS pgt_lost_rows (n int)")) ==
            std::nullopt);
    REQUIRE(wire::first_error_sqlstate(simple("TRUNCATE pgt_lost_rows")) == std::nullopt);
    REQUIRE(victim.send(wire::message('P', wire::cstr("ins") +
                                               wire::cstr("INSERT INTO pgt_lost_rows VALUES ($1) RETURNING n") +
                                               wire::i16(0)) +
                        insert_batch(1)));
    REQUIRE(batch_outcomes(1) == std::vector<std::string>{"ok"});
    Conn vandal = Conn::must(pooler.conninfo());
    auto drop_all = [&] { PGT_REQUIRE_OK(vandal.exec(kDropClientStatements)); };
    // A write goes again exactly once: one row, not two, not none.
    drop_all();
    REQUIRE(victim.send(insert_batch(2)));
    CHECK(batch_outcomes(1) == std::vector<std::string>{"ok"});
    CHECK(count_rows("n = 2") == "1");
    // Pipelined batches (the second sent before the first's answer): the first's error cannot
    // be taken back without reordering them, so both fail as they would have before.
    drop_all();
    REQUIRE(victim.send(insert_batch(3) + insert_batch(4)));
    CHECK(batch_outcomes(2) == std::vector<std::string>{"26000", "26000"});
    CHECK(count_rows("n IN (3, 4)") == "0");
    REQUIRE(victim.send(insert_batch(5)));
    CHECK(batch_outcomes(1) == std::vector<std::string>{"ok"});
    REQUIRE(wire::first_error_sqlstate(simple("DROP TABLE pgt_lost_rows")) == std::nullopt);
}

TEST_CASE("max_prepared_statement_bytes_total bounds all clients together: 54000 beyond it") {
    Pgtether pooler(alternating_backends({{"max_prepared_statement_bytes_total", "1048576"}}));
    // 300 kB of statement text per statement: a comment keeps the query trivial.
    auto big_query = [](int n) {
        return "SELECT " + std::to_string(n) + " AS n /* " + std::string(300 * 1024, 'x') + " */";
    };
    auto a = std::make_unique<Conn>(Conn::must(pooler.conninfo()));
    for (int i = 0; i < 3; ++i) {
        PGT_REQUIRE_OK(a->prepare("a" + std::to_string(i), big_query(i)));  // 900 kB in all
    }
    Conn b = Conn::must(pooler.conninfo());
    // Each client is well within max_prepared_statement_bytes (8 MiB); together they are not.
    PGT_CHECK_SQLSTATE(b.prepare("b0", big_query(10)), "54000");
    PGT_CHECK_OK(b.exec("SELECT 1"));  // the connection stays usable
    PGT_CHECK_OK(b.prepare("small", "SELECT 2 AS two"));
    // Room again once a goes.
    a.reset();
    bool room = false;
    for (int i = 0; i < 50 && !room; ++i) {
        room = b.prepare("b" + std::to_string(i + 1), big_query(11)).ok();
        if (!room) std::this_thread::sleep_for(20ms);
    }
    CHECK(room);
}
