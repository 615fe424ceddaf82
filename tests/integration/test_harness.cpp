// Proves the integration-test support library against the real thing: the throwaway PostgreSQL
// directly, and Debian's PgBouncer (the reference pooler) for the process and differential helpers.
#include <doctest/doctest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <stdexcept>
#include <string>

#include "tests/integration/support/differential.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// A session that exercises what a pooler must forward faithfully; TEMP objects only, so running it
// twice against one database does not collide.
std::vector<Step> sample_session() {
    using namespace steps;
    return {
        simple("SELECT 1 AS one, NULL::text AS nothing, 'x'::varchar AS x"),
        simple("SELECT 1; SELECT 'two' AS second"),
        simple(""),
        simple("SELECT * FROM no_such_table"),
        simple("DO $$ BEGIN RAISE NOTICE 'hello %', 42; RAISE WARNING 'careful'; END $$"),
        simple("CREATE TEMP TABLE diff_t (id int PRIMARY KEY, v text)"),
        params("INSERT INTO diff_t VALUES ($1, $2), ($3, $4)", {"1", "a", "2", std::nullopt}),
        params("INSERT INTO diff_t VALUES ($1, 'dup')", {"1"}),
        prepare("sel", "SELECT id, v FROM diff_t WHERE id >= $1 ORDER BY id"),
        describe("sel"),
        exec_prepared("sel", {"0"}),
        exec_prepared("no_such_statement", {}),
        simple("BEGIN"),
        simple("UPDATE diff_t SET v = 'b' WHERE id = 2"),
        simple("SELECT 1/0"),
        simple("SELECT 1"),  // 25P02: the transaction is aborted
        simple("ROLLBACK"),
        pipeline({params("SELECT $1::int * 2", {"21"}),
                  prepare("p2", "SELECT count(*) FROM diff_t"), exec_prepared("p2", {}),
                  simple("SELECT 'boom'::int"), params("SELECT 'skipped'", {})}),
        pipeline({simple("SELECT pg_advisory_lock(42)"), simple("SELECT pg_advisory_unlock(42)")}),
        simple("SELECT aid, abalance FROM pgbench_accounts WHERE aid IN (1, 2) ORDER BY aid"),
        simple("DISCARD TEMP"),
    };
}

}  // namespace

TEST_CASE("the env file describes the throwaway PostgreSQL") {
    const TestEnv& env = TestEnv::get();
    CHECK(env.pg_host == "127.0.0.1");
    CHECK(env.pg_port > 0);
    CHECK(env.database == "pgtether_test");
    CHECK(access(env.pg_socket_dir.c_str(), F_OK) == 0);
    CHECK(access(env.tmp_dir.c_str(), W_OK) == 0);
    REQUIRE_FALSE(env.auth_users.empty());
    CHECK(env.auth_user("md5").name == "md5_user");
    CHECK(env.auth_user("scram-sha-256").name == "scram_user");
    CHECK_THROWS_AS((void)env.auth_user("no-such-method"), std::runtime_error);

    Conn conn = Conn::must(direct_conninfo());
    CHECK(conn.parameter("server_version").rfind("15", 0) == 0);
    auto r = conn.exec("SELECT inet_server_port(), current_database(), current_user");
    PGT_REQUIRE_OK(r);
    CHECK(r.value(0, 0) == std::to_string(env.pg_port));
    CHECK(r.value(0, 1) == env.database);
    CHECK(r.value(0, 2) == env.superuser);
    // Tests rely on these server settings (pg.sh).
    CHECK(conn.exec("SHOW max_connections").value() == "300");
    CHECK(conn.exec("SHOW password_encryption").value() == "scram-sha-256");
    CHECK(conn.exec("SHOW ssl").value() == "off");
    CHECK(std::stoi(conn.exec("SELECT count(*) FROM pgbench_branches").value()) >= 1);
}

TEST_CASE("Conn copies results, command tags, errors and notices") {
    Conn conn = Conn::must(direct_conninfo());

    auto r = conn.exec("SELECT 1 AS a, NULL::text AS b, 'x' AS c");
    PGT_REQUIRE_OK(r);
    CHECK(r.status == PGRES_TUPLES_OK);
    CHECK(r.columns == std::vector<std::string>{"a", "b", "c"});
    CHECK(r.column_types[0] == 23);  // int4
    REQUIRE(r.rows.size() == 1);
    CHECK(r.value(0, 0) == "1");
    CHECK(r.is_null(0, 1));
    CHECK_THROWS_AS((void)r.value(0, 1), std::runtime_error);
    CHECK(r.value(0, 2) == "x");
    CHECK(r.command_tag == "SELECT 1");

    auto err = conn.exec("SELECT * FROM no_such_table");
    PGT_CHECK_SQLSTATE(err, "42P01");
    CHECK(err.severity == "ERROR");
    CHECK(contains(err.message, "no_such_table"));
    CHECK_FALSE(err.ok());
    CHECK_THROWS_AS(conn.exec_ok("SELECT 1/0"), std::runtime_error);

    PGT_CHECK_OK(conn.exec("CREATE TEMP TABLE t (id int, v text)"));
    CHECK(conn.exec("INSERT INTO t VALUES (1, 'a'), (2, NULL)").command_tag == "INSERT 0 2");
    auto p =
        conn.exec_params("SELECT $1::int + $2::int, $3::text IS NULL", {"2", "3", std::nullopt});
    PGT_REQUIRE_OK(p);
    CHECK(p.value(0, 0) == "5");
    CHECK(p.value(0, 1) == "t");

    PGT_REQUIRE_OK(conn.prepare("by_id", "SELECT v FROM t WHERE id = $1"));
    auto e = conn.exec_prepared("by_id", {"1"});
    PGT_REQUIRE_OK(e);
    CHECK(e.value() == "a");
    auto missing = conn.exec_prepared("nope", {});
    PGT_CHECK_SQLSTATE(missing, "26000");  // invalid_sql_statement_name

    auto all = conn.exec_all("SELECT 1; UPDATE t SET v = 'b'; SELECT 3");
    REQUIRE(all.size() == 3);
    CHECK(all[1].command_tag == "UPDATE 2");
    CHECK(all[2].value() == "3");

    PGT_CHECK_OK(conn.exec("DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$"));
    auto notices = conn.take_notices();
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].severity == "NOTICE");
    CHECK(notices[0].sqlstate == "00000");
    CHECK(notices[0].message == "hello 42");
    CHECK(conn.take_notices().empty());

    conn.close();
    CHECK_FALSE(conn.ok());
}

TEST_CASE("auth-test roles need their password, stored with their method") {
    const TestEnv& env = TestEnv::get();
    Conn admin = Conn::must(direct_conninfo());
    for (const auto& user : env.auth_users) {
        CAPTURE(user.name);
        Conn good(direct_conninfo(user.name, "", user.password));
        REQUIRE_MESSAGE(good.ok(), good.error());
        CHECK(good.exec("SELECT current_user").value() == user.name);

        Conn wrong(direct_conninfo(user.name, "", user.password + "x"));
        CHECK_FALSE(wrong.ok());
        CHECK(contains(wrong.error(), "password authentication failed"));

        auto stored =
            admin.exec_params("SELECT rolpassword FROM pg_authid WHERE rolname = $1", {user.name});
        PGT_REQUIRE_OK(stored);
        const std::string prefix = user.method == "md5" ? "md5" : "SCRAM-SHA-256$";
        CHECK(stored.value().rfind(prefix, 0) == 0);
    }
}

TEST_CASE("RawConn speaks enough protocol to provoke and read server errors") {
    const TestEnv& env = TestEnv::get();

    SUBCASE("trust start-up reaches ReadyForQuery") {
        RawConn raw(env.pg_host, env.pg_port);
        auto msgs = raw.startup(env.superuser, env.database);
        INFO(wire::describe(msgs));
        REQUIRE_FALSE(msgs.empty());
        CHECK(msgs.front().type == 'R');
        CHECK(msgs.front().body == wire::i32(0));  // AuthenticationOk
        CHECK(msgs.back().type == 'Z');
        CHECK_FALSE(wire::first_error_sqlstate(msgs).has_value());

        REQUIRE(raw.send(wire::query("SELECT 1")));
        auto reply = raw.read_until_ready_or_error();
        INFO(wire::describe(reply));
        REQUIRE(reply.size() == 4);  // RowDescription, DataRow, CommandComplete, ReadyForQuery
        CHECK(reply[0].type == 'T');
        CHECK(reply[1].type == 'D');
        CHECK(reply[2].body == wire::cstr("SELECT 1"));

        // An unknown message type is a protocol violation: FATAL 08P01, then the server hangs up.
        REQUIRE(raw.send(wire::message('z', "junk")));
        auto fatal = raw.read_until_ready_or_error();
        INFO(wire::describe(fatal));
        CHECK(wire::first_error_sqlstate(fatal) == "08P01");
        CHECK(wire::error_fields(fatal.back())['S'] == "FATAL");
        CHECK(raw.wait_closed());
    }
    SUBCASE("unsupported protocol version") {
        RawConn raw(env.pg_host, env.pg_port);
        REQUIRE(raw.send(wire::startup({{"user", env.superuser}}, (9 << 16) | 9)));
        auto msgs = raw.read_until_ready_or_error();
        INFO(wire::describe(msgs));
        CHECK(wire::first_error_sqlstate(msgs) == "0A000");  // feature_not_supported
        CHECK(raw.wait_closed());
    }
    SUBCASE("start-up packet without a user") {
        RawConn raw(env.pg_host, env.pg_port);
        REQUIRE(raw.send(wire::startup({{"database", env.database}})));
        auto msgs = raw.read_until_ready_or_error();
        INFO(wire::describe(msgs));
        CHECK(wire::first_error_sqlstate(msgs) == "28000");
    }
    SUBCASE("SSLRequest is answered with a single byte") {
        RawConn raw(env.pg_host, env.pg_port);
        REQUIRE(raw.send(wire::ssl_request()));
        CHECK(raw.read_exact(1) == "N");  // ssl = off
        CHECK(raw.pending().empty());
    }
    SUBCASE("password roles stop at the authentication request") {
        RawConn raw(env.pg_host, env.pg_port);
        auto msgs = raw.startup(env.auth_user("md5").name, env.database);
        REQUIRE(msgs.size() == 1);
        CHECK(msgs[0].type == 'R');
        CHECK(msgs[0].body.substr(0, 4) == wire::i32(5));  // AuthenticationMD5Password
    }
    SUBCASE("reads time out on a silent server") {
        RawConn raw(env.pg_host, env.pg_port);
        REQUIRE(raw.send(wire::startup({{"user", env.superuser}}).substr(0, 6)));  // truncated
        CHECK_FALSE(raw.read_message(300ms).has_value());
        CHECK_FALSE(raw.peer_closed());
    }
}

TEST_CASE("ChildProcess, TempDir and free_port") {
    std::set<int> ports;
    for (int i = 0; i < 20; ++i)
        ports.insert(free_port());
    CHECK(ports.size() == 20);

    TempDir dir("pgt-harness", TestEnv::get().tmp_dir);
    std::string log = dir.path() + "/child.log";

    SUBCASE("exit status and output") {
        ChildProcess child({{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, log, false});
        auto status = child.wait_exit(5s);
        REQUIRE(status.has_value());
        CHECK(describe_status(*status) == "exited with status 3");
        CHECK(read_file(log) == "out\nerr\n");
    }
    SUBCASE("stop() ends a running child with SIGTERM") {
        ChildProcess child({{"/bin/sleep", "60"}, log, false});
        CHECK(child.running());
        auto status = child.stop(5s);
        REQUIRE(status.has_value());
        CHECK(WIFSIGNALED(*status));
        CHECK(WTERMSIG(*status) == SIGTERM);
        CHECK_FALSE(child.running());
    }
    SUBCASE("SIGKILL after the grace period") {
        ChildProcess child(
            {{"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 60 & wait"}, log, false});
        // Wait for the trap to be installed before sending SIGTERM.
        for (int i = 0; i < 100 && read_file(log).empty(); ++i)
            usleep(20000);
        auto status = child.stop(300ms);
        REQUIRE(status.has_value());
        CHECK(WIFSIGNALED(*status));
        CHECK(WTERMSIG(*status) == SIGKILL);
    }
    SUBCASE("a missing program fails at construction") {
        CHECK_THROWS_WITH_AS(ChildProcess({{"/nonexistent/prog"}, log, false}),
                             doctest::Contains("No such file"), std::runtime_error);
    }
    SUBCASE("daemons drop root") {
        ChildProcess child({{"/usr/bin/id", "-un"}, log, true});
        REQUIRE(child.wait_exit(5s).has_value());
        const passwd* me = getpwuid(geteuid());
        REQUIRE(me != nullptr);
        CHECK(read_file(log) == (geteuid() == 0 ? std::string("postgres") : me->pw_name) + "\n");
    }
}

TEST_CASE("Pgbouncer helper: start, connect, reload, stop") {
    const TestEnv& env = TestEnv::get();
    Pgbouncer bouncer;
    CHECK(bouncer.running());
    Conn conn = Conn::must(bouncer.conninfo());
    CHECK(conn.exec("SELECT current_database()").value() == env.database);
    CHECK(conn.exec("SELECT inet_server_port()").value() == std::to_string(env.pg_port));

    // The admin console is reachable with the generated admin_users.
    Conn admin = Conn::must(bouncer.conninfo("", "pgbouncer"));
    auto pools = admin.exec("SHOW POOLS");
    PGT_REQUIRE_OK(pools);
    CHECK_FALSE(pools.rows.empty());

    bouncer.reload();
    CHECK_MESSAGE(bouncer.wait_for_log("SIGHUP"), bouncer.log());

    auto status = bouncer.stop();
    REQUIRE(status.has_value());
    CHECK_FALSE(bouncer.running());
    CHECK_FALSE(Conn(bouncer.conninfo()).ok());
}

TEST_CASE("Pgbouncer helper: password authentication through the pooler") {
    PoolerConfig config;
    config.settings["auth_type"] = "md5";
    Pgbouncer bouncer(config);
    const TestEnv& env = TestEnv::get();
    for (const auto& user : env.auth_users) {
        CAPTURE(user.name);
        Conn good(bouncer.conninfo(user.name, "", user.password));
        REQUIRE_MESSAGE(good.ok(), (good.error() + "\n" + bouncer.log()));
        CHECK(good.exec("SELECT current_user").value() == user.name);
        Conn wrong(bouncer.conninfo(user.name, "", "wrong"));
        CHECK_FALSE(wrong.ok());
    }
}

TEST_CASE("a pooler that cannot start is reported with its ini and log") {
    PoolerConfig config;
    config.settings["pool_mode"] = "no_such_mode";
    SUBCASE("pgbouncer") {
        CHECK_THROWS_WITH_AS(Pgbouncer(config, 5s), doctest::Contains("--- pgbouncer log ---"),
                             std::runtime_error);
    }
    SUBCASE("pgtether") {
        // Holds for any pgtether: an unknown pool_mode must be refused at start-up.
        CHECK_THROWS_WITH_AS(Pgtether(config, 5s), doctest::Contains("pool_mode = no_such_mode"),
                             std::runtime_error);
    }
}

TEST_CASE("differential helper: PgBouncer in session mode replies exactly like PostgreSQL") {
    PoolerConfig config;
    config.settings["pool_mode"] = "session";
    Pgbouncer bouncer(config);
    Conn direct = Conn::must(direct_conninfo());
    Conn pooled = Conn::must(bouncer.conninfo());
    PGT_CHECK_SAME_REPLIES(direct, pooled, sample_session());

    // The session really exercises errors, notices, aborted transactions and pipelines; otherwise
    // matching transcripts would prove little.
    Conn again = Conn::must(direct_conninfo());
    auto session = sample_session();
    Transcript t = run_steps(again, session);
    REQUIRE(t.size() == session.size());
    std::string text;
    for (const auto& outcome : t) {
        for (const auto& line : render(outcome))
            text += line + "\n";
    }
    INFO(text);
    CHECK(t[1].results.size() == 2);
    CHECK(t[2].results.at(0).status == PGRES_EMPTY_QUERY);
    CHECK(t[3].results.at(0).sqlstate == "42P01");
    CHECK(t[4].notices.size() == 2);
    CHECK(t[7].results.at(0).sqlstate == "23505");
    CHECK(t[9].results.at(0).param_types == std::vector<Oid>{23});
    CHECK(t[10].results.at(0).rows.size() == 2);
    CHECK(t[15].results.at(0).sqlstate == "25P02");
    CHECK(t[15].transaction_status == PQTRANS_INERROR);
    CHECK(t[17].results.size() == 6);  // 5 commands + the Sync
    CHECK(t[17].results.at(3).sqlstate == "22P02");
}

TEST_CASE("differential helper: differences are found and shown") {
    Conn a = Conn::must(direct_conninfo());
    Conn b = Conn::must(direct_conninfo());
    using namespace steps;

    std::vector<Step> same = {simple("SELECT 1 AS x")};
    CHECK(run_differential(a, b, same).empty());

    std::vector<Step> one = {simple("SELECT 1 AS x"), simple("SELECT 1/0"),
                             simple("DO $$ BEGIN RAISE NOTICE 'n'; END $$")};
    std::vector<Step> other = {simple("SELECT 2 AS x"), simple("SELECT 1/1"),
                               simple("DO $$ BEGIN NULL; END $$")};
    Transcript ta = run_steps(a, one);
    Transcript tb = run_steps(b, other);
    std::string diff = diff_transcripts(one, ta, tb, "left", "right");
    INFO(diff);
    CHECK(contains(diff, "replies differ (- left, + right)"));
    CHECK(contains(diff, "step 1 simple: SELECT 1 AS x"));
    CHECK(contains(diff, "  -   row: '1'"));
    CHECK(contains(diff, "  +   row: '2'"));
    CHECK(contains(diff, "  - result 1: PGRES_FATAL_ERROR"));
    CHECK(contains(diff, "22012"));  // division_by_zero
    CHECK(contains(diff, "  - notice: NOTICE 00000 n"));
    CHECK(contains(diff, "    transaction: idle"));  // unchanged lines are kept as context

    // A pipeline that fails half-way is recorded result by result.
    Transcript tp = run_steps(
        a, {pipeline({params("SELECT 1", {}), simple("SELECT 1/0"), params("SELECT 3", {})})});
    REQUIRE(tp.size() == 1);
    std::vector<ExecStatusType> statuses;
    for (const auto& r : tp[0].results)
        statuses.push_back(r.status);
    CHECK(statuses == std::vector<ExecStatusType>{PGRES_TUPLES_OK, PGRES_FATAL_ERROR,
                                                  PGRES_PIPELINE_ABORTED, PGRES_PIPELINE_SYNC});
    CHECK(tp[0].transaction_status == PQTRANS_IDLE);
}
