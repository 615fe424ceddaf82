// Exact lock accounting, the statement half (protocol/lock_statement.hpp): which texts are a
// SELECT of lock calls only, with which keys, and how a Query splits into statements.
#include <doctest/doctest.h>

#include "protocol/lock_statement.hpp"

using namespace pgtether::protocol;

namespace {

LockCall call(LockFunction f, std::initializer_list<LockArgument> args) {
    LockCall c;
    c.function = f;
    for (const auto& a : args) c.arguments[c.argument_count++] = a;
    return c;
}
LockArgument lit(std::int64_t v) { return {v, 0, 0}; }
LockArgument param(std::uint16_t n, std::uint8_t cast = 0) { return {0, n, cast}; }

const SqlScanner& scanner() {
    static const SqlScanner s({"acquire_job_lock"});
    return s;
}

}  // namespace

TEST_CASE("exact lock SELECTs and their calls") {
    struct Case {
        const char* sql;
        LockCalls calls;
    };
    const Case cases[] = {
        {"SELECT pg_advisory_lock(42)", {call(LockFunction::Lock, {lit(42)})}},
        {"select PG_ADVISORY_LOCK(-7);", {call(LockFunction::Lock, {lit(-7)})}},
        {"SELECT pg_catalog.pg_try_advisory_lock(1, 2)",
         {call(LockFunction::TryLock, {lit(1), lit(2)})}},
        {"SELECT \"pg_advisory_unlock\"($1)", {call(LockFunction::Unlock, {param(1)})}},
        {"SELECT pg_advisory_lock_shared($1::bigint)",
         {call(LockFunction::LockShared, {param(1, 8)})}},
        {"SELECT pg_try_advisory_lock_shared($2::int4, $1::integer)",
         {call(LockFunction::TryLockShared, {param(2, 4), param(1, 4)})}},
        {"SELECT pg_advisory_unlock_shared(+9223372036854775807)",
         {call(LockFunction::UnlockShared, {lit(9223372036854775807LL)})}},
        {"SELECT pg_advisory_unlock_all()", {call(LockFunction::UnlockAll, {})}},
        {"/* c */ SELECT -- x\n pg_advisory_lock(1), pg_advisory_unlock(1)",
         {call(LockFunction::Lock, {lit(1)}), call(LockFunction::Unlock, {lit(1)})}},
        // Output names and parentheses (graphile-migrate, node-pg-migrate).
        {"SELECT pg_try_advisory_lock($1) AS locked", {call(LockFunction::TryLock, {param(1)})}},
        {"select pg_try_advisory_lock($1) as \"lockObtained\"",
         {call(LockFunction::TryLock, {param(1)})}},
        {"SELECT pg_advisory_lock(1) got, pg_advisory_unlock(2) AS \"released\"",
         {call(LockFunction::Lock, {lit(1)}), call(LockFunction::Unlock, {lit(2)})}},
        {"SELECT (pg_try_advisory_lock(5)) AS locked;", {call(LockFunction::TryLock, {lit(5)})}},
        {"SELECT ((pg_advisory_unlock_all()))", {call(LockFunction::UnlockAll, {})}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.sql);
        auto calls = parse_lock_select(c.sql);
        REQUIRE(calls);
        CHECK(*calls == c.calls);
    }
}

TEST_CASE("anything else is not exact") {
    const char* cases[] = {
        "SELECT pg_advisory_lock(1) FROM t",
        "SELECT pg_advisory_lock(1) WHERE true",
        "SELECT pg_advisory_lock(1) AS",  // no name after AS
        "SELECT pg_advisory_lock(1) AS got FROM t",
        "SELECT pg_advisory_lock(1) got extra",
        "SELECT pg_advisory_lock(1) IS NULL",
        "SELECT (pg_advisory_lock(1)",
        "SELECT (pg_advisory_lock(1)) = true",
        "SELECT pg_advisory_lock(1) AS 'got'",  // a string is not a name
        "SELECT pg_advisory_lock(1 + 1)",
        "SELECT pg_advisory_lock(id) FROM jobs",
        "SELECT pg_advisory_lock('42')",
        "SELECT pg_advisory_lock(1.5)",
        "SELECT pg_advisory_lock(1e3)",
        "SELECT pg_advisory_lock(9223372036854775808)",  // numeric: no such function
        "SELECT pg_advisory_lock(3000000000, 1)",        // not int4
        "SELECT pg_advisory_lock($1::bigint, $2)",       // no (bigint, int4) function
        "SELECT pg_advisory_lock(70000::smallint)",      // out of range: an error
        "SELECT pg_advisory_lock(-$1)",
        "SELECT pg_advisory_lock(NULL)",
        "SELECT pg_advisory_lock()",
        "SELECT pg_advisory_lock(1, 2, 3)",
        "SELECT pg_advisory_unlock_all(1)",
        "SELECT myschema.pg_advisory_lock(1)",
        "SELECT \"PG_ADVISORY_LOCK\"(1)",  // quoted: case matters
        "SELECT pg_advisory_xact_lock(1)",
        "SELECT acquire_job_lock(1)",
        "SELECT pg_advisory_lock(1)::text",
        "SELECT pg_advisory_lock(1); SELECT 2",  // two statements in one Parse
        "VALUES (pg_advisory_lock(1))",
        "SELECT",
        "",
    };
    for (const char* sql : cases) {
        CAPTURE(sql);
        CHECK_FALSE(parse_lock_select(sql));
    }
}

TEST_CASE("a Query splits into statements; exact only if nothing else can touch locks") {
    SUBCASE("lock statements among unrelated ones") {
        auto plan = plan_query_locks(
            "SELECT 1; SELECT pg_advisory_lock(5);; UPDATE t SET x = ';' WHERE y = $$;$$; "
            "SELECT pg_advisory_unlock(5)",
            scanner());
        CHECK(plan.exact);
        CHECK(plan.statement_count == 4);
        REQUIRE(plan.lock_statements.size() == 2);
        CHECK(plan.lock_statements[0].first == 1);
        CHECK(plan.lock_statements[1].first == 3);
        CHECK(plan.lock_statements[1].second[0].function == LockFunction::Unlock);
    }
    SUBCASE("parentheses and comments do not split") {
        auto plan = plan_query_locks("SELECT (1); /* ; */ SELECT pg_advisory_lock(2) -- ;", scanner());
        CHECK(plan.exact);
        CHECK(plan.statement_count == 2);
        REQUIRE(plan.lock_statements.size() == 1);
        CHECK(plan.lock_statements[0].first == 1);
    }
    SUBCASE("a statement that names a lock function otherwise is uncertain") {
        CHECK_FALSE(plan_query_locks("SELECT pg_advisory_lock(1); SELECT pg_advisory_lock(id) FROM t",
                                     scanner())
                        .exact);
        CHECK_FALSE(plan_query_locks("SELECT acquire_job_lock(3)", scanner()).exact);
        CHECK_FALSE(plan_query_locks("DO $$ BEGIN PERFORM pg_advisory_lock(1); END $$", scanner())
                        .exact);
        CHECK_FALSE(plan_query_locks("SELECT 1; DISCARD ALL", scanner()).exact);
    }
    SUBCASE("texts the server may split differently are uncertain") {
        // A backslash in a plain literal: standard_conforming_strings decides where it ends.
        CHECK_FALSE(plan_query_locks("SELECT 'a\\'; SELECT pg_advisory_lock(1)", scanner()).exact);
        CHECK_FALSE(plan_query_locks("SELECT pg_advisory_lock(1); SELECT 'open", scanner()).exact);
        CHECK_FALSE(plan_query_locks("SELECT pg_advisory_lock(1) /* open", scanner()).exact);
        CHECK_FALSE(plan_query_locks(
                        "CREATE FUNCTION f() RETURNS int BEGIN ATOMIC SELECT 1; SELECT 2; END; "
                        "SELECT pg_advisory_lock(1)",
                        scanner())
                        .exact);
    }
    SUBCASE("transaction control and COPY are noticed (nothing may run right behind them)") {
        CHECK(plan_query_locks("SELECT pg_advisory_lock(1) FROM t", scanner()).safe_to_follow);
        CHECK(plan_query_locks("SELECT 'begin'", scanner()).safe_to_follow);
        CHECK_FALSE(plan_query_locks("begin; SELECT pg_advisory_lock(1) FROM t", scanner())
                        .safe_to_follow);
        CHECK_FALSE(plan_query_locks("SELECT 1; COMMIT", scanner()).safe_to_follow);
        CHECK_FALSE(plan_query_locks("COPY t FROM STDIN", scanner()).safe_to_follow);
        CHECK_FALSE(plan_query_locks("SELECT 'x\\'; SELECT 1", scanner()).safe_to_follow);
    }
    SUBCASE("escape strings and dollar quotes are lexed as the server does") {
        auto plan = plan_query_locks(
            "SELECT E'it\\'s;'; SELECT $tag$ ; $$ ; $tag$; SELECT pg_try_advisory_lock(3)", scanner());
        CHECK(plan.exact);
        CHECK(plan.statement_count == 3);
        REQUIRE(plan.lock_statements.size() == 1);
        CHECK(plan.lock_statements[0].first == 2);
    }
}
