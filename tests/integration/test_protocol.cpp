// What a libpq client speaks goes through pgtether unchanged: simple and extended queries,
// multi-statement strings, empty queries, errors, notices, notifications, ParameterStatus and
// pipelines with many Syncs in flight. The differential tests run one rich session directly
// against PostgreSQL and through pgtether (transaction and session mode) and require identical
// replies: rows, command tags, SQLSTATEs and notices.
#include <doctest/doctest.h>
#include <poll.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/differential.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

PoolerConfig pooled(const std::string& mode, int pool_size) {
    PoolerConfig config;
    config.settings = {{"pool_mode", mode},
                       {"default_pool_size", std::to_string(pool_size)},
                       {"query_wait_timeout", "30"}};
    return config;
}

// A session touching most of what a client can observe. Session state that would not survive
// transaction pooling with several backends (prepared statements, temp tables, SET) is fine here:
// with one client the pool hands it the same backend every time, in either mode, and the point is
// that every reply is forwarded unchanged.
std::vector<Step> rich_session() {
    using namespace steps;
    std::string big(300'000, 'x');  // a DataRow larger than one socket read: streamed
    return {
        simple("SELECT 1 AS one, NULL::text AS nothing, 'x'::varchar(3) AS x, 2.5::numeric, "
               "true, '2024-02-29'::date, '{1,2,3}'::int[], '\\x00ff'::bytea, 'é€'::text"),
        simple("SELECT 1; SELECT 'two' AS second; VALUES (3, 'three'), (4, 'four')"),
        simple(""),
        simple(";"),
        simple("   -- just a comment\n"),
        simple("SELECT 1; SELECT 1/0; SELECT 3"),  // stops at the error
        simple("SELEC 1"),                         // 42601 with a position
        simple("SELECT * FROM no_such_table"),
        simple("SELECT no_such_column FROM pgbench_branches"),
        simple("DO $$ BEGIN RAISE NOTICE 'hello %', 42 USING DETAIL = 'd', HINT = 'h'; "
               "RAISE WARNING 'careful'; RAISE INFO 'info'; END $$"),
        simple("DO $$ BEGIN RAISE EXCEPTION 'custom' USING ERRCODE = 'P0042', DETAIL = 'why'; "
               "END $$"),
        simple("CREATE TEMP TABLE proto_t (id int PRIMARY KEY, v text)"),
        simple("CREATE TEMP TABLE IF NOT EXISTS proto_t (id int)"),  // NOTICE 42P07
        params("INSERT INTO proto_t VALUES ($1, $2), ($3, $4)", {"1", "a", "2", std::nullopt}),
        params("INSERT INTO proto_t VALUES ($1, 'dup')", {"1"}),  // 23505 with DETAIL
        params("SELECT $1::int + 1", {"not a number"}),            // 22P02
        params("SELECT $1::text, $2::int, $3::text IS NULL", {"α", "7", std::nullopt}),
        params("SELECT repeat('x', $1::int) AS big", {std::to_string(big.size())}),
        simple("SELECT g, md5(g::text) FROM generate_series(1, 5000) g"),
        prepare("sel", "SELECT id, v FROM proto_t WHERE id >= $1 ORDER BY id"),
        describe("sel"),
        exec_prepared("sel", {"0"}),
        exec_prepared("sel", {"2"}),
        prepare("sel", "SELECT 1"),  // 42P05: already exists
        exec_prepared("no_such_statement", {}),
        prepare("bad", "SELECT FROM WHERE"),
        simple("PREPARE sq(int) AS SELECT $1 * 2"),
        simple("EXECUTE sq(21)"),
        simple("DEALLOCATE sq"),
        simple("BEGIN"),
        simple("UPDATE proto_t SET v = 'b' WHERE id = 2"),
        simple("SAVEPOINT s1"),
        simple("SELECT 1/0"),
        simple("ROLLBACK TO SAVEPOINT s1"),
        simple("SELECT v FROM proto_t WHERE id = 2"),
        simple("SELECT 1/0"),
        simple("SELECT 1"),  // 25P02: the transaction is aborted
        params("SELECT $1::int", {"5"}),
        simple("COMMIT"),  // ROLLBACK tag
        simple("BEGIN; DECLARE c CURSOR FOR SELECT g FROM generate_series(1, 10) g"),
        simple("FETCH 3 FROM c"),
        simple("MOVE 2 IN c"),
        simple("FETCH ALL FROM c"),
        simple("COMMIT"),
        simple("COMMIT"),  // WARNING 25P01, no transaction in progress
        simple("BEGIN; INSERT INTO proto_t VALUES (3, 'c'); COMMIT; SELECT count(*) FROM proto_t"),
        simple("SET application_name = 'differential'"),
        simple("SHOW application_name"),
        simple("SET DateStyle = 'SQL, DMY'; "
               "SELECT '2024-03-01'::date, current_setting('DateStyle')"),
        simple("RESET DateStyle"),
        simple("SET LOCAL work_mem = '1MB'"),  // WARNING outside a transaction block
        pipeline({params("SELECT $1::int * 2", {"21"}),
                  prepare("p2", "SELECT count(*) FROM proto_t"), exec_prepared("p2", {}),
                  simple("SELECT 'boom'::int"), params("SELECT 'skipped'", {})}),
        pipeline({simple("BEGIN"), params("INSERT INTO proto_t VALUES ($1, 'p')", {"10"}),
                  simple("COMMIT")}),
        simple("SELECT id, v FROM proto_t ORDER BY id"),
        simple("SELECT aid, abalance FROM pgbench_accounts WHERE aid IN (1, 2) ORDER BY aid"),
        simple("SELECT pg_sleep(0.05)"),
        simple("LISTEN differential_channel; NOTIFY differential_channel, 'x'; UNLISTEN *"),
        simple("DROP TABLE proto_t"),
        simple("DISCARD ALL"),
        simple("SELECT current_setting('application_name')"),
    };
}

// Steps that stay correct under transaction pooling with several backends and busy neighbours:
// no session state outlives a transaction.
std::vector<Step> transaction_safe_session() {
    using namespace steps;
    return {
        simple("SELECT 1 AS a, 'b' AS b"),
        simple("BEGIN; CREATE TEMP TABLE ts_t (id int) ON COMMIT DROP; "
               "INSERT INTO ts_t SELECT generate_series(1, 100); "
               "SELECT sum(id) FROM ts_t; COMMIT"),
        params("SELECT $1::int * $2::int", {"6", "7"}),
        simple("SELECT 1/0"),
        simple("BEGIN"),
        simple("SELECT count(*) FROM pgbench_branches"),
        simple("SELECT x"),
        simple("ROLLBACK"),
        pipeline({params("SELECT $1::text", {"one"}), simple("SELECT 1/0"),
                  params("SELECT 'never'", {})}),
        simple(""),
        simple("DO $$ BEGIN RAISE NOTICE 'n1'; END $$"),
    };
}

// Busy clients on the same pool while the differential session runs: the session must see
// nothing of theirs and they nothing of its.
class Neighbours {
  public:
    Neighbours(const Pgtether& pooler, int count) {
        for (int i = 0; i < count; ++i) {
            threads_.emplace_back([this, &pooler, i] {
                try {
                    Conn conn = Conn::must(pooler.conninfo());
                    const std::string token = "neighbour-" + std::to_string(i);
                    while (!stop_) {
                        Result r = conn.exec_params("SELECT $1::text", {token});
                        if (!r.ok() || r.value() != token) ++errors_;
                        Result t = conn.exec("BEGIN; SELECT pg_sleep(0.002); COMMIT");
                        if (!t.ok()) ++errors_;
                    }
                } catch (const std::exception&) {
                    ++errors_;
                }
            });
        }
    }
    ~Neighbours() { join(); }
    int join() {
        stop_ = true;
        for (auto& t : threads_) {
            if (t.joinable()) t.join();
        }
        return errors_;
    }

  private:
    std::atomic<bool> stop_{false};
    std::atomic<int> errors_{0};
    std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("simple and extended queries, multi-statement strings, empty queries and errors") {
    Pgtether pooler(pooled("transaction", 2));
    Conn conn = Conn::must(pooler.conninfo());

    auto r = conn.exec("SELECT 41 + 1 AS answer, 'text' AS t, NULL::int AS n");
    PGT_REQUIRE_OK(r);
    CHECK(r.columns == std::vector<std::string>{"answer", "t", "n"});
    CHECK(r.value(0, 0) == "42");
    CHECK(r.is_null(0, 2));
    CHECK(r.command_tag == "SELECT 1");

    auto all = conn.exec_all("SELECT 1; CREATE TEMP TABLE m (x int); INSERT INTO m VALUES (1), "
                             "(2); SELECT sum(x) FROM m; DROP TABLE m");
    REQUIRE(all.size() == 5);
    CHECK(all[1].command_tag == "CREATE TABLE");
    CHECK(all[2].command_tag == "INSERT 0 2");
    CHECK(all[3].value() == "3");
    CHECK(all[4].command_tag == "DROP TABLE");

    auto stopped = conn.exec_all("SELECT 1; SELECT 1/0; SELECT 3");
    REQUIRE(stopped.size() == 2);
    CHECK(stopped[0].value() == "1");
    PGT_CHECK_SQLSTATE(stopped[1], "22012");
    CHECK(conn.transaction_status() == PQTRANS_IDLE);

    CHECK(conn.exec("").status == PGRES_EMPTY_QUERY);
    CHECK(conn.exec_params("", {}).status == PGRES_EMPTY_QUERY);

    auto p = conn.exec_params("SELECT $1::int * 2, $2::text IS NULL", {"21", std::nullopt});
    PGT_REQUIRE_OK(p);
    CHECK(p.value(0, 0) == "42");
    CHECK(p.value(0, 1) == "t");
    PGT_CHECK_SQLSTATE(conn.exec_params("SELECT $1::int", {"x"}), "22P02");
    PGT_CHECK_SQLSTATE(conn.exec("SELEC 1"), "42601");
    // After every error the connection is still fine.
    CHECK(scalar(conn, "SELECT 'still here'") == "still here");

    // Binary results through the extended protocol.
    PGresult* bin =
        PQexecParams(conn.raw(), "SELECT 258::int4", 0, nullptr, nullptr, nullptr, nullptr, 1);
    REQUIRE(PQresultStatus(bin) == PGRES_TUPLES_OK);
    REQUIRE(PQgetlength(bin, 0, 0) == 4);
    const auto* bytes = reinterpret_cast<const unsigned char*>(PQgetvalue(bin, 0, 0));
    CHECK((bytes[2] == 1 && bytes[3] == 2));
    PQclear(bin);
}

TEST_CASE("differential: a rich session gives identical replies directly and through pgtether") {
    Conn direct = Conn::must(direct_conninfo());
    SUBCASE("transaction mode") {
        Pgtether pooler(pooled("transaction", 1));
        Conn pooled_conn = Conn::must(pooler.conninfo());
        PGT_CHECK_SAME_REPLIES(direct, pooled_conn, rich_session());
    }
    SUBCASE("session mode") {
        Pgtether pooler(pooled("session", 1));
        Conn pooled_conn = Conn::must(pooler.conninfo());
        PGT_CHECK_SAME_REPLIES(direct, pooled_conn, rich_session());
    }
    SUBCASE("statement mode (transaction blocks aside)") {
        // Statement mode refuses transaction blocks; everything else must be identical.
        Pgtether pooler(pooled("statement", 1));
        Conn pooled_conn = Conn::must(pooler.conninfo());
        std::vector<Step> session;
        for (auto& step : rich_session()) {
            bool block = step.sql.find("BEGIN") != std::string::npos ||
                         step.sql.find("COMMIT") != std::string::npos ||
                         step.sql.find("ROLLBACK") != std::string::npos ||
                         step.sql.find("SAVEPOINT") != std::string::npos ||
                         step.sql.find("FETCH") != std::string::npos ||
                         step.sql.find("MOVE") != std::string::npos ||
                         step.kind == Step::Kind::Pipeline;
            if (!block) session.push_back(step);
        }
        PGT_CHECK_SAME_REPLIES(direct, pooled_conn, session);
    }
}

TEST_CASE("differential: transaction pooling with busy neighbours on two backends") {
    Pgtether pooler(pooled("transaction", 2));
    Conn direct = Conn::must(direct_conninfo());
    Conn pooled_conn = Conn::must(pooler.conninfo());
    Neighbours neighbours(pooler, 4);
    for (int round = 0; round < 5; ++round) {
        CAPTURE(round);
        PGT_CHECK_SAME_REPLIES(direct, pooled_conn, transaction_safe_session());
    }
    CHECK(neighbours.join() == 0);
}

TEST_CASE("pipeline mode: many Syncs outstanding, an error in the middle, busy neighbours") {
    Pgtether pooler(pooled("transaction", 2));
    Neighbours neighbours(pooler, 3);
    Conn conn = Conn::must(pooler.conninfo());
    PGconn* pg = conn.raw();
    REQUIRE(PQenterPipelineMode(pg) == 1);

    // 60 sync groups sent before anything is read, so dozens of Syncs are outstanding at once.
    // Group 30 fails half-way (its last command is skipped); groups 40..42 form one transaction
    // spanning three Syncs, which must stay on one backend.
    constexpr int kGroups = 60;
    constexpr int kBad = 30;
    auto send = [&](const std::string& sql, const std::vector<std::string>& args = {}) {
        std::vector<const char*> values;
        for (const auto& a : args) values.push_back(a.c_str());
        REQUIRE(PQsendQueryParams(pg, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                  values.empty() ? nullptr : values.data(), nullptr, nullptr,
                                  0) == 1);
    };
    for (int i = 0; i < kGroups; ++i) {
        if (i == 40) send("BEGIN");
        send("SELECT $1::int, pg_backend_pid()", {std::to_string(i)});
        if (i == kBad) {
            send("SELECT 1/0");
            send("SELECT 'skipped'");
        }
        if (i == 42) send("COMMIT");
        REQUIRE(PQpipelineSync(pg) == 1);
    }
    REQUIRE(PQflush(pg) == 0);

    // One command's results: every PGresult until the NULL that ends it.
    auto command = [&]() {
        std::vector<Result> results;
        for (int guard = 0; guard < 10; ++guard) {
            PGresult* res = PQgetResult(pg);
            if (res == nullptr) break;
            results.push_back(Result::from(res));
            PQclear(res);
        }
        return results;
    };
    auto sync = [&]() {
        PGresult* res = PQgetResult(pg);
        ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        PQclear(res);
        return status;
    };
    std::vector<std::string> tx_pids;
    for (int i = 0; i < kGroups; ++i) {
        CAPTURE(i);
        if (i == 40) {
            auto begin = command();
            REQUIRE(begin.size() == 1);
            CHECK(begin[0].command_tag == "BEGIN");
        }
        auto row = command();
        REQUIRE(row.size() == 1);
        REQUIRE_MESSAGE(row[0].status == PGRES_TUPLES_OK, row[0].describe());
        CHECK(row[0].value(0, 0) == std::to_string(i));
        if (i >= 40 && i <= 42) tx_pids.push_back(row[0].value(0, 1));
        if (i == kBad) {
            auto err = command();
            REQUIRE(err.size() == 1);
            PGT_CHECK_SQLSTATE(err[0], "22012");
            auto skipped = command();
            REQUIRE(skipped.size() == 1);
            CHECK(skipped[0].status == PGRES_PIPELINE_ABORTED);
        }
        if (i == 42) {
            auto commit = command();
            REQUIRE(commit.size() == 1);
            CHECK(commit[0].command_tag == "COMMIT");
        }
        REQUIRE(sync() == PGRES_PIPELINE_SYNC);
    }
    REQUIRE(tx_pids.size() == 3);
    CHECK(tx_pids[0] == tx_pids[1]);
    CHECK(tx_pids[1] == tx_pids[2]);
    CHECK(PQexitPipelineMode(pg) == 1);
    CHECK(conn.transaction_status() == PQTRANS_IDLE);
    CHECK(scalar(conn, "SELECT 'after the pipeline'") == "after the pipeline");
    CHECK(neighbours.join() == 0);
}

TEST_CASE("pipeline mode: thousands of queries in flight both ways (back-pressure)") {
    // The client writes far more than socket buffers hold before reading anything, and every
    // reply is larger than its request: pgtether must stop and resume reading on both sides
    // without losing, reordering or deadlocking anything.
    Pgtether pooler(pooled("transaction", 2));
    Conn conn = Conn::must(pooler.conninfo());
    PGconn* pg = conn.raw();
    REQUIRE(PQenterPipelineMode(pg) == 1);
    constexpr int kQueries = 5000;
    for (int i = 0; i < kQueries; ++i) {
        std::string n = std::to_string(i);
        const char* values[] = {n.c_str()};
        REQUIRE(PQsendQueryParams(pg, "SELECT $1::int, repeat(md5($1::int::text), 64)", 1,
                                  nullptr, values, nullptr, nullptr, 0) == 1);
        if (i % 100 == 99) REQUIRE(PQpipelineSync(pg) == 1);
    }
    REQUIRE(PQpipelineSync(pg) == 1);
    int rows = 0, syncs = 0, bad = 0;
    while (syncs < kQueries / 100 + 1) {
        PGresult* res = PQgetResult(pg);
        if (res == nullptr) {
            if (PQstatus(pg) != CONNECTION_OK) break;
            continue;
        }
        ExecStatusType status = PQresultStatus(res);
        if (status == PGRES_PIPELINE_SYNC) {
            ++syncs;
        } else if (status == PGRES_TUPLES_OK && PQntuples(res) == 1) {
            std::string n = std::to_string(rows);
            std::string h = md5_hex(n);
            std::string expected;
            for (int k = 0; k < 64; ++k) expected += h;
            if (PQgetvalue(res, 0, 0) != n || PQgetvalue(res, 0, 1) != expected) ++bad;
            ++rows;
        } else {
            ++bad;
        }
        PQclear(res);
    }
    CHECK(rows == kQueries);
    CHECK(syncs == kQueries / 100 + 1);
    CHECK(bad == 0);
    CHECK(PQexitPipelineMode(pg) == 1);
    CHECK(scalar(conn, "SELECT 'done'") == "done");
}

TEST_CASE("NoticeResponse: RAISE NOTICE / WARNING reach the client with their fields") {
    Pgtether pooler(pooled("transaction", 2));
    Conn conn = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(conn.exec("DO $$ BEGIN RAISE NOTICE 'n %', 1 USING HINT = 'a hint'; "
                             "RAISE WARNING 'w' USING DETAIL = 'a detail', ERRCODE = '01000'; "
                             "END $$"));
    auto notices = conn.take_notices();
    REQUIRE(notices.size() == 2);
    CHECK(notices[0].severity == "NOTICE");
    CHECK(notices[0].message == "n 1");
    CHECK(notices[0].hint == "a hint");
    CHECK(notices[1].severity == "WARNING");
    CHECK(notices[1].sqlstate == "01000");
    CHECK(notices[1].detail == "a detail");
    // A notice from an extended-protocol query and one that ends a transaction.
    PGT_REQUIRE_OK(conn.exec_params("SELECT set_config('client_min_messages', 'notice', false)",
                                    {}));
    PGT_REQUIRE_OK(conn.exec("COMMIT"));  // WARNING: there is no transaction in progress
    notices = conn.take_notices();
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].sqlstate == "25P01");
}

TEST_CASE("NotificationResponse: LISTEN/NOTIFY in session mode and within one transaction") {
    SUBCASE("session mode: an idle listener receives another session's NOTIFY") {
        Pgtether pooler(pooled("session", 2));
        Conn listener = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(listener.exec("LISTEN pgt_channel"));
        // Own notification, delivered at the end of the NOTIFY's transaction.
        PGT_REQUIRE_OK(listener.exec("NOTIFY pgt_channel, 'self'"));
        PGnotify* own = PQnotifies(listener.raw());
        REQUIRE(own != nullptr);
        CHECK(std::string(own->relname) == "pgt_channel");
        CHECK(std::string(own->extra) == "self");
        PQfreemem(own);

        // From another session (direct): arrives while the listener is idle, without any query.
        Conn other = Conn::must(direct_conninfo());
        PGT_REQUIRE_OK(other.exec("NOTIFY pgt_channel, 'from-other'"));
        PGnotify* got = nullptr;
        bool arrived = eventually(
            [&] {
                PQconsumeInput(listener.raw());
                got = PQnotifies(listener.raw());
                return got != nullptr;
            },
            5s);
        REQUIRE(arrived);
        CHECK(std::string(got->extra) == "from-other");
        PQfreemem(got);
    }
    SUBCASE("transaction mode: LISTEN and NOTIFY in one transaction") {
        Pgtether pooler(pooled("transaction", 2));
        Conn conn = Conn::must(pooler.conninfo());
        PGT_REQUIRE_OK(conn.exec(
            "BEGIN; LISTEN pgt_tx_channel; NOTIFY pgt_tx_channel, 'in-tx'; SELECT 1; COMMIT"));
        PGnotify* got = PQnotifies(conn.raw());
        REQUIRE(got != nullptr);
        CHECK(std::string(got->relname) == "pgt_tx_channel");
        CHECK(std::string(got->extra) == "in-tx");
        PQfreemem(got);
        PGT_REQUIRE_OK(conn.exec("UNLISTEN *"));
    }
}

TEST_CASE("ParameterStatus after SET reaches the client, in transaction and session mode") {
    for (const char* mode : {"transaction", "session"}) {
        CAPTURE(mode);
        Pgtether pooler(pooled(mode, 2));
        Conn conn = Conn::must(pooler.conninfo("", "", "", "application_name=start_name"));
        CHECK(conn.parameter("application_name") == "start_name");
        CHECK(conn.parameter("server_version").rfind("15", 0) == 0);
        CHECK(conn.parameter("client_encoding") == "UTF8");
        CHECK(conn.parameter("integer_datetimes") == "on");

        PGT_REQUIRE_OK(conn.exec("SET application_name = 'renamed'"));
        CHECK(conn.parameter("application_name") == "renamed");
        PGT_REQUIRE_OK(conn.exec("SET TimeZone = 'Asia/Tokyo'"));
        CHECK(conn.parameter("TimeZone") == "Asia/Tokyo");
        PGT_REQUIRE_OK(conn.exec("SET DateStyle = 'German'"));
        CHECK(conn.parameter("DateStyle") == "German, DMY");
        PGT_REQUIRE_OK(conn.exec("SET IntervalStyle = 'iso_8601'"));
        CHECK(conn.parameter("IntervalStyle") == "iso_8601");
        // Extended protocol too.
        PGT_REQUIRE_OK(conn.exec_params("SELECT set_config('application_name', $1, false)",
                                        {"via_set_config"}));
        CHECK(conn.parameter("application_name") == "via_set_config");
        // The settings stick for the next transactions.
        CHECK(scalar(conn, "SHOW TimeZone") == "Asia/Tokyo");
        CHECK(scalar(conn, "SHOW application_name") == "via_set_config");
        CHECK(scalar(conn, "SELECT '2024-03-01'::date::text") == "01.03.2024");
        CHECK(scalar(conn, "SELECT interval '1 day 2 hours'::text") == "P1DT2H");
    }
}

TEST_CASE("SSLRequest is answered 'N': sslmode=prefer continues in plain text, require fails") {
    Pgtether pooler(pooled("transaction", 1));
    const TestEnv& env = TestEnv::get();
    std::string base = "host=" + pooler.host() + " port=" + std::to_string(pooler.port()) +
                       " user=" + env.superuser + " dbname=" + env.database +
                       " connect_timeout=10 gssencmode=disable";
    Conn prefer(base + " sslmode=prefer");
    REQUIRE_MESSAGE(prefer.ok(), prefer.error());
    CHECK(PQsslInUse(prefer.raw()) == 0);
    CHECK(scalar(prefer, "SELECT 'plain text'") == "plain text");
    Conn require(base + " sslmode=require");
    CHECK_FALSE(require.ok());
    CHECK_MESSAGE(require.error().find("SSL") != std::string::npos, require.error());
    CHECK(pooler.running());
}

TEST_CASE("FunctionCall (fast path, PQfn) goes through") {
    Pgtether pooler(pooled("transaction", 1));
    Conn conn = Conn::must(pooler.conninfo());
    const int oid = std::stoi(scalar(conn, "SELECT 'int4pl'::regproc::oid"));
    PQArgBlock args[2];
    args[0].len = 4;
    args[0].isint = 1;
    args[0].u.integer = 40;
    args[1].len = 4;
    args[1].isint = 1;
    args[1].u.integer = 2;
    int result = 0;
    int result_len = 0;
    PGresult* res = PQfn(conn.raw(), oid, &result, &result_len, 1, args, 2);
    REQUIRE(res != nullptr);
    CHECK(PQresultStatus(res) == PGRES_COMMAND_OK);
    PQclear(res);
    CHECK(result == 42);
    CHECK(scalar(conn, "SELECT 'after fast path'") == "after fast path");
}

TEST_CASE("a backend is not handed on while a client's message to it is only partly sent") {
    // The backend reads the rest of a message before anything else, so a message that arrives
    // in pieces keeps the backend with its client even when everything else has been answered
    // (a CopyData outside a COPY gets no answer): another client's query must not become the
    // rest of it.
    Pgtether pooler(pool_config("transaction", 1,
                                {{"query_wait_timeout", "20"}, {"tether_reserve_size", "0"}}));
    const TestEnv& env = TestEnv::get();
    RawConn a(pooler.host(), pooler.port());
    REQUIRE(a.startup(env.superuser, env.database).back().type == 'Z');
    const std::string copy_data = wire::message('d', std::string(1000, 'x'));
    REQUIRE(a.send(wire::query("SELECT pg_sleep(0.2)") + copy_data.substr(0, 100)));
    auto slept = a.read_until_ready_or_error();
    REQUIRE_MESSAGE((!slept.empty() && slept.back().type == 'Z'), wire::describe(slept));
    // The Query is answered; the CopyData is not complete. Another client waits for the one
    // backend (it would otherwise get it, and its query would be read as CopyData bytes).
    Conn b = Conn::must(pooler.conninfo());
    send_query(b, "SELECT 'b'");
    CHECK_FALSE(wait_result(b, 500ms).has_value());
    REQUIRE(a.send(copy_data.substr(100)));
    auto answer = wait_result(b, 5s);
    REQUIRE(answer.has_value());
    CHECK(answer->value() == "b");
    // a's session is intact.
    REQUIRE(a.send(wire::query("SELECT 'a'")));
    auto reply = a.read_until_ready_or_error();
    bool saw_a = false;
    for (const auto& m : reply) saw_a = saw_a || (m.type == 'D' && m.body.find('a') != std::string::npos);
    CHECK_MESSAGE(saw_a, wire::describe(reply));
}

TEST_CASE(
    "disable_pqexec = 1: a simple Query ends the connection, the extended protocol is "
    "served (PgBouncer's words, the console included, fixed at start-up)") {
    const std::string role = private_role("protocol_pqexec");
    PoolerConfig config = pooled("transaction", 2);
    config.settings["disable_pqexec"] = "1";
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    Pgtether pooler(config);

    // The extended protocol works: unnamed and named statements, in and out of a transaction.
    Conn conn = Conn::must(pooler.conninfo(role));
    auto sum = conn.exec_params("SELECT $1::int + 1", {"41"});
    PGT_REQUIRE_OK(sum);
    CHECK(sum.value() == "42");
    PGT_REQUIRE_OK(conn.prepare("twice", "SELECT $1::int * 2"));
    auto twice = conn.exec_prepared("twice", {"21"});
    PGT_REQUIRE_OK(twice);
    CHECK(twice.value() == "42");

    // A Query while no server is linked: refused before one is borrowed.
    // libpq keeps only the last result of PQexec (the lost connection): the first is the error.
    auto refused = first_error(conn.exec_all("SELECT 1"));
    CHECK(refused.is_error());
    CHECK(refused.severity == "FATAL");
    CHECK(refused.sqlstate == "08P01");
    CHECK(refused.message == "PQexec disallowed");
    CHECK(PQstatus(conn.raw()) == CONNECTION_BAD);
    CHECK(pooler.wait_for_log("client used \"Query\" packet type"));
    CHECK(pooler.wait_for_log("closing because: PQexec disallowed"));

    // A Query inside a transaction opened with the extended protocol: the connection ends and
    // the backend does not stay idle in that transaction.
    Conn in_tx = Conn::must(pooler.conninfo(role));
    PGT_REQUIRE_OK(in_tx.exec_params("BEGIN", {}));
    PGT_REQUIRE_OK(in_tx.exec_params("SELECT 1", {}));
    CHECK(in_tx.transaction_status() == PQTRANS_INTRANS);
    auto refused_in_tx = first_error(in_tx.exec_all("COMMIT"));
    CHECK(refused_in_tx.sqlstate == "08P01");
    CHECK(refused_in_tx.message == "PQexec disallowed");
    CHECK(eventually([&] { return backends_of(role, "state = 'idle in transaction'") == 0; }));
    // Another client of the pool is served as before.
    Conn next = Conn::must(pooler.conninfo(role));
    auto served = next.exec_params("SELECT 'served'", {});
    PGT_REQUIRE_OK(served);
    CHECK(served.value() == "served");

    // The admin console speaks only the simple protocol, and PgBouncer refuses the Query before
    // it tells the console apart: the console is closed too.
    Conn admin = console(pooler);
    REQUIRE(admin.ok());
    auto show = first_error(admin.exec_all("SHOW POOLS"));
    CHECK(show.sqlstate == "08P01");
    CHECK(show.message == "PQexec disallowed");

    // Fixed at start-up, as PgBouncer's CF_NO_RELOAD: a reload to 0 keeps refusing.
    config.settings["disable_pqexec"] = "0";
    pooler.reload(config);
    CHECK(pooler.wait_for_log("disable_pqexec: cannot be changed while pgtether runs"));
    Conn after_reload = Conn::must(pooler.conninfo(role));
    CHECK(first_error(after_reload.exec_all("SELECT 1")).message == "PQexec disallowed");
}
