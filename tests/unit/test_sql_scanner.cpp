// The trigger half of the tether: which texts may take or release a session advisory lock, and
// which statements change other session state. Every expectation is the exact flag set, so a
// case also fails when the scanner reports something it should not.
#include <doctest/doctest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/scan_memo.hpp"
#include "protocol/sql_scanner.hpp"

using namespace pgtether::protocol;

namespace {

constexpr std::uint32_t L = kEffectAdvisoryLock;
constexpr std::uint32_t D = kEffectDiscard;
constexpr std::uint32_t T = kEffectTempObject;
constexpr std::uint32_t N = kEffectListen;
constexpr std::uint32_t C = kEffectCursor;
constexpr std::uint32_t P = kEffectSqlPrepare;
constexpr std::uint32_t O = kEffectLoad;
constexpr std::uint32_t S = kEffectSet;
constexpr std::uint32_t F = kEffectCatalogChange;
constexpr std::uint32_t U = kEffectOpaque;
constexpr std::uint32_t K = kEffectCreate;
constexpr std::uint32_t W = kEffectUnknownCall;
constexpr std::uint32_t V = kEffectSavepoint;

// Names the flags, so a failing case prints "AdvisoryLock|Set" instead of a number.
std::string describe(std::uint32_t flags) {
    static constexpr std::pair<std::uint32_t, std::string_view> kNames[] = {
        {L, "AdvisoryLock"},  {D, "Discard"},    {T, "TempObject"}, {N, "Listen"},
        {C, "Cursor"},        {P, "SqlPrepare"}, {O, "Load"},       {S, "Set"},
        {F, "CatalogChange"}, {U, "Opaque"},     {K, "Create"},     {V, "Savepoint"},
    };
    std::string out;
    for (const auto& [bit, name] : kNames) {
        if ((flags & bit) == 0) continue;
        if (!out.empty()) out += '|';
        out += name;
        flags &= ~bit;
    }
    if (flags != 0) out += (out.empty() ? "" : "|") + std::string("unknown bits");
    return out.empty() ? "none" : out;
}

struct Case {
    std::string_view sql;
    std::uint32_t expected;
};

// `shown`: the flags a table is about. Most tables leave kEffectCreate out (it rides along with
// every CREATE); its own table below shows it.
void check_cases(const SqlScanner& scanner, std::initializer_list<Case> cases,
                 std::uint32_t shown = ~K) {
    for (const Case& c : cases) {
        INFO("sql: ", std::string(c.sql));
        CHECK(describe(scanner.scan(c.sql) & shown) == describe(c.expected & shown));
    }
}

}  // namespace

TEST_CASE("sql scanner: every session lock function, in any case and form") {
    check_cases(
        SqlScanner{},
        {
            {"SELECT pg_advisory_lock(1)", L},
            {"SELECT pg_advisory_lock_shared(1)", L},
            {"SELECT pg_try_advisory_lock(1)", L},
            {"SELECT pg_try_advisory_lock_shared(1, 2)", L},
            {"SELECT pg_advisory_unlock(1)", L},
            {"SELECT pg_advisory_unlock_shared(1)", L},
            {"SELECT pg_advisory_unlock_all()", L},
            {"select PG_ADVISORY_LOCK(42)", L},
            {"SeLeCt Pg_Try_Advisory_Lock_Shared(1)", L},
            {"SELECT pg_catalog.pg_advisory_lock(1)", L},
            {"SELECT PG_CATALOG . pg_advisory_unlock(1)", L},
            {"SELECT \"pg_advisory_lock\"(1)", L},
            {"SELECT \"pg_catalog\".\"pg_advisory_lock\"(1)", L},
            {"SELECT \"PG_CATALOG\".\"pg_advisory_lock\"(1)", L},
            // The server would not find this function, but quoted names match in any case anyway.
            {"SELECT \"PG_ADVISORY_UNLOCK_ALL\"()", L},
            {"SELECT pg_advisory_lock /* why */ (1)", L},
            {"SELECT pg_advisory_lock\n-- why\n(1)", L},
            {"SELECT pg_advisory_lock\t\r\n(1)", L},
            // A mention without a call still counts (e.g. a function reference in a FROM list).
            {"SELECT * FROM pg_advisory_lock(1) AS l", L},
            {"SELECT 'pg_advisory_lock'::regproc", L},
            {"SELECT pg_advisory_lock", L},
            // Parameters and casts around the call.
            {"SELECT pg_advisory_lock($1::bigint)", L},
            {"SELECT pg_try_advisory_lock(hashtext('job')::bigint)", L},
            // Identifiers that contain a name are hits: a wrapper with such a name most likely
            // takes the lock (over-inclusive by design).
            {"SELECT my_pg_advisory_lock_wrapper(1)", L},
            {"SELECT app.pg_advisory_lock_or_wait(1)", L},
            {"SELECT x$pg_advisory_unlock$y", L},
        });
}

TEST_CASE("sql scanner: _xact_ variants alone do not need a tether") {
    check_cases(SqlScanner{},
                {
                    {"SELECT pg_advisory_xact_lock(1)", 0},
                    {"SELECT pg_advisory_xact_lock_shared(1)", 0},
                    {"SELECT pg_try_advisory_xact_lock(1)", 0},
                    {"SELECT PG_TRY_ADVISORY_XACT_LOCK_SHARED(1, 2)", 0},
                    {"BEGIN; SELECT pg_advisory_xact_lock(1); COMMIT", 0},
                    {"SELECT pg_advisory_xact_lock(1); SELECT pg_advisory_unlock(2)", L},
                    {"SELECT pg_advisory_xact_lock(1), pg_try_advisory_lock(2)", L},
                });
}

TEST_CASE("sql scanner: comments hide names") {
    check_cases(SqlScanner{},
                {
                    {"SELECT 1 -- pg_advisory_lock(1)", 0},
                    {"-- pg_advisory_lock(1)\nSELECT 1", 0},
                    {"SELECT 1 /* pg_advisory_lock(1) */", 0},
                    {"SELECT /* outer /* pg_advisory_lock(1) */ still outer */ 1", 0},
                    {"SELECT /* outer /* inner */ pg_advisory_lock(1) is still a comment */ 1", 0},
                    {"SELECT /**/ 1 /*/ pg_advisory_lock(1) */", 0},
                    {"SELECT 1 --+ pg_advisory_lock(1)", 0},
                    // ... but only until they end.
                    {"SELECT /* a */ pg_advisory_lock(1)", L},
                    {"SELECT /* a /* b */ c */ pg_advisory_lock(1)", L},
                    {"SELECT 1 -- a\nSELECT pg_advisory_lock(1)", L},
                    {"SELECT 1 -- a\rSELECT pg_advisory_lock(1)", L},  // \r ends a line comment too
                    {"SELECT 1+-- a\n pg_advisory_lock(1)", L},
                    {"SELECT 2 - 1, pg_advisory_lock(1)", L},  // a single '-' is an operator
                    {"SELECT 4 / 2, pg_advisory_lock(1)", L},
                    // A name split by a comment is two identifiers.
                    {"SELECT pg_advisory/**/_lock(1)", 0},
                });
}

TEST_CASE("sql scanner: string literals are searched (dynamic SQL)") {
    check_cases(SqlScanner{},
                {
                    {"SELECT 'pg_advisory_lock(1)'", L},
                    {"SELECT 'it''s pg_advisory_lock'", L},
                    {"DO $$BEGIN EXECUTE 'SELECT pg_advisory_lock(1)'; END$$", L | U},
                    // A comment inside a literal is text: nothing is skipped there.
                    {"SELECT '-- pg_advisory_lock(1)'", L},
                    // Literal continuation across a newline is one literal (§4.1.2.1).
                    {"SELECT 'SELECT pg_advisory'\n'_lock(1)'", L},
                    {"SELECT 'SELECT pg_advisory' -- split\n   '_lock(1)'", L},
                    {"SELECT 'pg_advisory', '_lock'", 0},
                    // E'' escapes: \' does not end the literal; what follows the real end is code.
                    {"SELECT E'it\\'s -- ', pg_advisory_lock(1)", L},
                    {"SELECT E'\\\\', pg_advisory_lock(1)", L},
                    {"SELECT e'a\\'b' -- pg_advisory_lock(1)", 0},
                    // ... and names spelt with escapes are decoded.
                    {"SELECT E'pg_\\x61dvisory_lock(1)'", L},
                    {"SELECT E'pg_\\141dvisory_lock(1)'", L},
                    {"SELECT E'pg_\\u0061dvisory_lock(1)'", L},
                    {"SELECT E'pg_\\U00000061dvisory_lock(1)'", L},
                    {"SELECT E'pg_\\advisory_lock(1)'", L},
                    {"SELECT E'pg_\\x61dvisory'\n'_lock(1)'", L},
                    // U&'' and U&"": default escape, 6-digit escape, and a UESCAPE character after
                    // the body.
                    {"SELECT U&'pg_\\0061dvisory_lock(1)'", L},
                    {"SELECT U&\"pg_\\+000061dvisory_lock\"(1)", L},
                    {"SELECT u&'pg_!0061dvisory_lock(1)' UESCAPE '!'", L},
                    {"SELECT U&\"pg_#0061dvisory_lock\" /* c */ UESCAPE\n'#' (1)", L},
                    {"SELECT U&'pg_advisory_lock'", L},
                    // B'', X'' and N'' literals are lexed as literals.
                    {"SELECT N'pg_advisory_lock'", L},
                    {"SELECT X'00', B'1' -- pg_advisory_lock", 0},
                });
}

TEST_CASE("sql scanner: backslashes under either standard_conforming_strings setting") {
    check_cases(SqlScanner{},
                {
                    // With the setting off, 'a\' -- ' is one literal and the call is code.
                    {"SELECT 'a\\' -- ', pg_advisory_lock(1)", L},
                    // With it on (the default), 'a\' ends early and '-- x' is a literal.
                    {"SELECT 'a\\', '-- x', pg_advisory_lock(1)", L},
                    {"SELECT 'a\\'; SET x = 1; SELECT '\\'", S},
                    {"SELECT 'C:\\temp' -- pg_advisory_lock(1)", 0},
                });
}

TEST_CASE("sql scanner: dollar-quoted bodies (DO blocks, function bodies)") {
    check_cases(
        SqlScanner{},
        {
            {"SELECT $$pg_advisory_lock$$", L},
            {"DO $$ BEGIN PERFORM pg_advisory_lock(1); END $$", L | U},
            {"DO $body$ BEGIN PERFORM PG_ADVISORY_UNLOCK_ALL(); END $body$", L | U},
            {"DO $$ BEGIN PERFORM pg_advisory_xact_lock(1); END $$", U},
            {"DO $outer$ BEGIN EXECUTE $inner$SELECT pg_advisory_lock(1)$inner$; END $outer$",
             L | U},
            {"DO $a$ BEGIN EXECUTE $b$ SELECT $c$x$c$ $b$; PERFORM pg_advisory_lock(1); END $a$",
             L | U},
            {"CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $fn$ BEGIN "
             "PERFORM pg_try_advisory_lock(1); END $fn$",
             L | F},
            {"CREATE FUNCTION f() RETURNS void LANGUAGE sql AS 'SELECT pg_advisory_unlock(1)'",
             L | F},
            // Inside a body nothing is skipped: a commented-out call still counts (over-inclusive).
            {"DO $$ BEGIN -- PERFORM pg_advisory_lock(1)\n END $$", L | U},
            // The body ends at its own tag only; other tags and '$' are body text.
            {"SELECT $a$ $b$ $a$, 1 -- pg_advisory_lock(1)", 0},
            {"SELECT $a$ x $A$ pg_advisory_lock $a$", L},
            {"SELECT $$ ' $$ -- pg_advisory_lock(1)", 0},
            {"SELECT $$a$$||$$b$$ -- pg_advisory_lock(1)", 0},
            // '$' inside an identifier or after a parameter number does not open a body.
            {"SELECT a$$ -- $$, pg_advisory_lock(1)", 0},
            {"SELECT $1, pg_advisory_lock($2)", L},
            {"SELECT 1$$ pg_advisory_lock $$", L},
        });
}

TEST_CASE("sql scanner: many statements in one Query") {
    check_cases(SqlScanner{}, {
                                  {"SELECT 1; SELECT pg_advisory_lock(1); SELECT 2", L},
                                  {"BEGIN; SELECT pg_advisory_lock(1); COMMIT;", L},
                                  {"SELECT 1;SELECT 2;", 0},
                                  {";;;", 0},
                                  {"DISCARD ALL; SELECT pg_advisory_lock(1)", D | L},
                              });
}

TEST_CASE("sql scanner: extra configured lock functions") {
    const SqlScanner scanner({"take_job_lock", "app.Acquire_Mutex", ""});
    check_cases(scanner, {
                             {"SELECT take_job_lock(1)", L},
                             {"SELECT TAKE_JOB_LOCK(1)", L},
                             {"SELECT jobs.\"take_job_lock\"(1)", L},
                             {"SELECT app.acquire_mutex()",
                              L},  // configured qualified, matched by its last part
                             {"SELECT acquire_mutex()", L},
                             {"SELECT 'take_job_lock(1)'", L},
                             {"SELECT 1 -- take_job_lock(1)", 0},
                             {"SELECT take_job(1)", 0},
                             {"SELECT pg_advisory_lock(1)", L},  // the built-in names still count
                             {"SELECT 1", 0},  // and the empty name matches nothing
                         });
    check_cases(SqlScanner{}, {{"SELECT take_job_lock(1)", 0}});
}

TEST_CASE("sql scanner: unterminated constructs end the scan safely") {
    check_cases(
        SqlScanner{},
        {
            {"", 0},
            {"SELECT 'pg_advisory_lock(1)", L},
            {"SELECT E'pg_advisory_lock(1)\\", L},
            {"SELECT E'\\", 0},
            {"SELECT E'\\x", 0},
            {"SELECT E'\\u00", 0},
            {"SELECT U&'", 0},
            {"SELECT U&\"pg_advisory_lock", L},
            {"SELECT U&'\\+0000", 0},
            {"SELECT U&'x' UESCAPE '", 0},
            {"SELECT \"pg_advisory_lock", L},
            {"SELECT $$ pg_advisory_lock(1)", L},
            {"SELECT $tag$ pg_advisory_lock(1) $tag", L},
            {"SELECT $tag", 0},
            {"SELECT $", 0},
            {"SELECT 'a' -- ", 0},
            {"SELECT 'a'\n", 0},
            // The server rejects an unterminated block comment; the scanner still looks inside.
            {"SELECT 1 /* pg_advisory_lock(1)", L},
            {"SELECT 1 /* /* */ pg_advisory_lock(1)", L},
            {"/*", 0},
            {"--", 0},
            {"(((((", 0},
            {")))) ; SET x = 1", S},
        });
}

TEST_CASE("sql scanner: unterminated constructs in very long texts") {
    const SqlScanner scanner;
    std::string text(1 << 20, '(');
    CHECK(scanner.scan(text) == 0);
    text.assign(1 << 20, '\'');  // a million doubled quotes: one long literal
    CHECK(scanner.scan(text) == 0);
    text = "/*";
    for (int i = 0; i < 100000; ++i)
        text += "/*";
    text += "pg_advisory_lock";
    CHECK(scanner.scan(text) == L);
    text = "SELECT $xy$";  // many near-misses of the closing tag
    for (int i = 0; i < 100000; ++i)
        text += "$x";
    text += "pg_advisory_lock";
    CHECK(scanner.scan(text) == L);
    text = "SELECT E'";
    for (int i = 0; i < 100000; ++i)
        text += "\\'";
    CHECK(scanner.scan(text) == 0);
    text += "pg_advisory_unlock_all";
    CHECK(scanner.scan(text) == L);
}

TEST_CASE("sql scanner: SET and RESET at statement level") {
    check_cases(
        SqlScanner{},
        {
            {"set search_path = x", S},
            {"SET statement_timeout TO 1000", S},
            {"SET SESSION statement_timeout = 1", S},
            {"SET SESSION AUTHORIZATION alice", S},
            {"SET ROLE alice", S},
            {"SET TIME ZONE 'UTC'", S},
            {"SET \"search_path\" = x", S},
            // SET SESSION CHARACTERISTICS changes the session's default transaction modes.
            {"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", S},
            {"RESET ALL", S},
            {"reset search_path", S},
            {"BEGIN; SET statement_timeout=1; COMMIT", S},
            {"  (SELECT 1);\n\tSet x = 1", S},
            {"SELECT 1; SET", S},
            // Transaction-scoped forms.
            {"SET LOCAL statement_timeout = 1", 0},
            {"set local search_path = x", 0},
            {"SET/**/LOCAL x = 1", 0},
            {"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", 0},
            {"SET CONSTRAINTS ALL DEFERRED", 0},
            // SET that is not a statement.
            {"UPDATE t SET x = 1", 0},
            {"UPDATE t SET x = 1; UPDATE u SET y = 2", 0},
            {"ALTER TABLE t ALTER c SET DEFAULT 1", 0},
            {"INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET x = 2", 0},
            {"CREATE FUNCTION f() RETURNS int LANGUAGE sql SET search_path = x AS 'SELECT 1'", F},
            {"SELECT 'SET x = 1'", 0},
            {"SELECT ';SET x = 1'", 0},
            {"SELECT $$;SET x = 1$$", 0},
            {"SELECT \";SET x\"", 0},
            {"SELECT 1 -- ;SET x = 1", 0},
            {"SELECT 1 /* ;SET x = 1 */", 0},
            {"SELECT (1;SET x = 1)", 0},
            {"SELECT settings FROM t", 0},
            // set_config anywhere, even in a literal or body; a transaction-local call counts too.
            {"select set_config('a','b',false)", S},
            {"SELECT pg_catalog.set_config('search_path', '', true)", S},
            {"DO $$ BEGIN PERFORM set_config('a', 'b', false); END $$", S | U},
            {"SELECT 1 -- set_config('a', 'b', false)", 0},
        });
}

TEST_CASE("sql scanner: temporary objects") {
    check_cases(SqlScanner{}, {
                                  {"create temporary table t (a int)", T},
                                  {"CREATE TEMP TABLE t (a int)", T},
                                  {"DROP TABLE t", T},
                                  {"drop table if exists scratch cascade", T},
                                  {"SELECT 1 AS drop", 0},
                                  {"CREATE GLOBAL TEMPORARY TABLE t (a int)", T},
                                  {"CREATE LOCAL TEMP SEQUENCE s", T},
                                  {"CREATE TEMP VIEW v AS SELECT 1", T | F},
                                  {"CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1", T | F},
                                  {"CREATE TEMP TABLE t AS SELECT 1; SELECT * FROM t", T},
                                  {"EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1", T},
                                  {"EXPLAIN ANALYZE SELECT 1 AS a INTO TEMP t",
                                   T},  // creates it, checked on PG 15
                                  {"CREATE TABLE pg_temp.t (a int)", T},
                                  {"SELECT * FROM PG_TEMP_3.t", T},
                                  {"SELECT * INTO TEMP t FROM x", T},
                                  {"SELECT * INTO TEMPORARY TABLE t FROM x", T},
                                  {"SELECT * INTO LOCAL TEMP t FROM x", T},
                                  {"WITH q AS (SELECT 1) SELECT * INTO TEMP t FROM q", T},
                                  {"CREATE UNLOGGED TABLE t (a int)", 0},
                                  {"CREATE TABLE t (a int)", 0},
                                  {"CREATE TABLE temp (a int)", 0},
                                  {"SELECT * INTO t FROM x", 0},
                                  {"INSERT INTO temp VALUES (1)", 0},
                                  {"MERGE INTO temp USING s ON true WHEN MATCHED THEN DELETE", 0},
                                  {"SELECT create, temp FROM t", 0},
                                  {"SELECT 'CREATE TEMP TABLE t'", 0},
                                  {"SELECT 1 -- CREATE TEMP TABLE t", 0},
                              });
}

TEST_CASE("sql scanner: LISTEN, cursors, SQL PREPARE, LOAD, DISCARD") {
    check_cases(SqlScanner{},
                {
                    {"LISTEN x", N},
                    {"listen \"Chan\"", N},
                    {"UNLISTEN *", N},
                    {"SELECT 1; LISTEN x", N},
                    {"NOTIFY x", 0},
                    {"SELECT pg_notify('x', 'y')", 0},
                    {"DECLARE c CURSOR WITH HOLD FOR SELECT 1", C},
                    {"declare c no scroll cursor with hold for select 1", C},
                    {"DECLARE c CURSOR FOR SELECT 1", 0},
                    {"DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1", 0},
                    {"BEGIN; DECLARE c CURSOR FOR SELECT 1; FETCH c; COMMIT", 0},
                    {"SELECT 1 FROM t WITH hold", 0},  // WITH HOLD counts only after DECLARE
                    {"CLOSE c", C},
                    {"CLOSE ALL", C},
                    {"PREPARE p AS SELECT 1", P},
                    {"PREPARE p (int) AS SELECT $1", P},
                    {"EXECUTE p (1)", P},
                    {"DEALLOCATE ALL", P},
                    {"deallocate prepare p", P},
                    {"SELECT * FROM execute", 0},
                    {"DO $$ BEGIN EXECUTE 'SELECT 1'; END $$", U},
                    {"LOAD 'auto_explain'", O},
                    {"SELECT load FROM t", 0},
                    {"DISCARD ALL", D},
                    {"discard plans", D},
                    {"SELECT discard FROM t", 0},
                });
}

TEST_CASE("sql scanner: statements that may change which functions take locks") {
    check_cases(SqlScanner{},
                {
                    {"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", F},
                    {"create or replace function app.f() returns int return 1", F},
                    {"CREATE PROCEDURE p() LANGUAGE sql AS $$ SELECT 1 $$", F},
                    {"CREATE OR REPLACE PROCEDURE p() BEGIN ATOMIC SELECT 1; END", F},
                    {"ALTER FUNCTION f() RENAME TO g", F},
                    {"ALTER PROCEDURE p() SET SCHEMA s", F},
                    {"ALTER ROUTINE r() OWNER TO u", F},
                    {"DROP FUNCTION f(int)", T | F},
                    {"DROP PROCEDURE IF EXISTS p", T | F},
                    {"DROP ROUTINE r", T | F},
                    {"CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW EXECUTE FUNCTION f()", F},
                    {"CREATE OR REPLACE TRIGGER t BEFORE UPDATE ON x EXECUTE PROCEDURE f()", F},
                    {"CREATE CONSTRAINT TRIGGER t AFTER INSERT ON x EXECUTE FUNCTION f()", F},
                    {"DROP TRIGGER t ON x", T | F},
                    {"CREATE VIEW v AS SELECT 1", F},
                    {"CREATE OR REPLACE RECURSIVE VIEW v (n) AS SELECT 1", F},
                    {"CREATE MATERIALIZED VIEW m AS SELECT 1", F},
                    {"DROP VIEW v", T | F},
                    {"CREATE EXTENSION IF NOT EXISTS pgcrypto", F},
                    {"SELECT 1; CREATE FUNCTION f() RETURNS int RETURN 1", F},
                    // Not a definition of one of those objects.
                    {"CREATE TABLE function (a int)", 0},
                    {"CREATE INDEX ON t (a)", 0},
                    {"ALTER TABLE t ADD COLUMN view int", 0},
                    {"ALTER TABLE t DISABLE TRIGGER ALL", 0},
                    {"SELECT 'CREATE FUNCTION f()'", 0},
                    {"SELECT 1 -- CREATE FUNCTION f()", 0},
                    {"SELECT function, view FROM create_log", 0},
                    {"GRANT EXECUTE ON FUNCTION f() TO u", 0},
                });
}

TEST_CASE("substring matcher: overlapping patterns, case and masks") {
    const SubstringMatcher::Pattern patterns[] = {
        {"he", 1}, {"she", 2}, {"his", 4}, {"hers", 8}, {"", 16},
    };
    const SubstringMatcher matcher(patterns);
    CHECK(matcher.min_length() == 2);
    CHECK(matcher.find_all("") == 0);
    CHECK(matcher.find_all("ushers") == (1 | 2 | 8));
    CHECK(matcher.find_all("USHERS") == (1 | 2 | 8));
    CHECK(matcher.find_all("ahishe") == (1 | 2 | 4));
    CHECK(matcher.find_all("h e s") == 0);
    CHECK(matcher.find_all("hhhhhis") == 4);
    CHECK(matcher.find_all("sh\xc3\xa9") == 0);

    const SubstringMatcher empty(std::span<const SubstringMatcher::Pattern>{});
    CHECK(empty.min_length() == 0);
    CHECK(empty.find_all("anything") == 0);

    // A pattern that is a suffix of another's prefix: "ab" must be found inside "aab".
    const SubstringMatcher::Pattern nested[] = {{"aac", 1}, {"ab", 2}};
    const SubstringMatcher m2(nested);
    CHECK(m2.find_all("aab") == 2);
    CHECK(m2.find_all("aaac") == 1);
}

TEST_CASE("substring matcher: words end at a non-word byte and report any pattern inside") {
    const SubstringMatcher::Pattern patterns[] = {{"he", 1}, {"she", 2}, {"hers", 8}};
    std::array<bool, 256> letters{};
    for (int b = 'a'; b <= 'z'; ++b) {
        letters[static_cast<std::size_t>(b)] = true;
        letters[static_cast<std::size_t>(b - 'a' + 'A')] = true;
    }
    const SubstringMatcher matcher(patterns, letters);
    using Word = SubstringMatcher::Word;
    auto word = [&](std::string_view text, std::size_t start) {
        const Word w = matcher.read_word(text, start);
        return std::pair{w.end, w.hit};
    };
    CHECK(word("ushers x", 0) == std::pair{std::size_t{6}, true});
    CHECK(word("USHERS", 0) == std::pair{std::size_t{6}, true});  // to the end of the text
    CHECK(word("usher", 0) == std::pair{std::size_t{5}, true});   // ends in a hit state
    CHECK(word("sh e", 0) == std::pair{std::size_t{2}, false});   // "she" across a word end
    CHECK(word("abc.he", 0) == std::pair{std::size_t{3}, false});
    CHECK(word("abc.he", 4) == std::pair{std::size_t{6}, true});
    CHECK(word("h", 0) == std::pair{std::size_t{1}, false});
    // The first byte is taken whatever it is; a hit stays a hit to the word's end.
    CHECK(word(".he", 0) == std::pair{std::size_t{3}, true});
    CHECK(word(". he", 0) == std::pair{std::size_t{1}, false});
    CHECK(word("hexxxxxxxxxxxxx;", 0) == std::pair{std::size_t{15}, true});

    // Without word bytes, a word is its first byte.
    const SubstringMatcher bytes_only(patterns);
    CHECK(bytes_only.read_word("she", 0).end == 1);
    CHECK_FALSE(bytes_only.read_word("she", 0).hit);
}

TEST_CASE("scan memo: the scanner's answer, remembered per text, bounded") {
    const SqlScanner scanner({"take_job_lock"});
    ScanMemo memo;
    const std::string lock = "SELECT pg_advisory_lock($1)";
    const std::string plain = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
    CHECK_FALSE(memo.holds(lock));
    CHECK(memo.scan(scanner, lock) == kEffectAdvisoryLock);
    CHECK(memo.holds(lock));
    CHECK(memo.scan(scanner, lock) == kEffectAdvisoryLock);  // from the memo
    CHECK(memo.scan(scanner, plain) == 0);
    CHECK(memo.scan(scanner, "SET search_path = app") == kEffectSet);
    CHECK(memo.scan(scanner, "select TAKE_JOB_LOCK(1)") == kEffectAdvisoryLock);

    // Two texts in one slot: the later replaces the earlier, and neither ever gets the other's
    // answer.
    std::string rival;
    const std::size_t slot = std::hash<std::string_view>{}(lock) % ScanMemo::kSlots;
    for (int i = 0; rival.empty(); ++i) {
        std::string candidate = "SELECT " + std::to_string(i);
        if (std::hash<std::string_view>{}(candidate) % ScanMemo::kSlots == slot) rival = candidate;
    }
    CHECK(memo.scan(scanner, rival) == 0);
    CHECK_FALSE(memo.holds(lock));
    CHECK(memo.scan(scanner, lock) == kEffectAdvisoryLock);
    CHECK_FALSE(memo.holds(rival));
    CHECK(memo.scan(scanner, rival) == 0);

    // Texts beyond kMaxText are scanned every time, never kept.
    const std::string long_text =
        "SELECT pg_advisory_lock(1) /*" + std::string(ScanMemo::kMaxText, 'x') + "*/";
    CHECK(memo.scan(scanner, long_text) == kEffectAdvisoryLock);
    CHECK_FALSE(memo.holds(long_text));

    memo.clear();
    CHECK_FALSE(memo.holds(rival));
    CHECK(memo.scan(scanner, plain) == 0);
}

TEST_CASE("sql scanner: a DO block's effects are not in its text, so every kind is probed") {
    check_cases(SqlScanner{},
                {
                    // The lock function's name is built at run time: no name to find.
                    {"DO $$ BEGIN EXECUTE 'SELECT pg_advisory_' || 'lock(3)'; END $$", U},
                    {"do $$ begin execute 'LIS' || 'TEN jobs'; end $$", U},
                    {"DO LANGUAGE plpgsql $$ BEGIN NULL; END $$", U},
                    {"SELECT 1; DO $$ BEGIN NULL; END $$", U},
                    // Only a statement that starts with DO.
                    {"SELECT 'do'", 0},
                    {"SELECT do_something()", 0},
                    {"INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", 0},
                });
}

TEST_CASE("sql scanner: statements that may create a relation in the search_path's first schema") {
    check_cases(SqlScanner{},
                {
                    {"CREATE TABLE orders (id int)", K},
                    {"create unlogged table t (n int)", K},
                    {"CREATE TEMP TABLE t (n int)", T | K},
                    {"CREATE VIEW v AS SELECT 1", F | K},
                    {"SELECT 1 AS n INTO orders", K},
                    {"EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", K},
                    {"INSERT INTO orders VALUES (1)", 0},
                    {"MERGE INTO t USING s ON true WHEN MATCHED THEN DO NOTHING", 0},
                    {"SELECT 'create table x'", 0},
                },
                ~0u);
}

TEST_CASE("sql scanner: with the catalog's names, a call of any other name is an unknown call") {
    constexpr std::uint32_t X = W | L;
    const auto known = std::make_shared<const KnownNames>(
        std::vector<std::string>{"count", "now", "values", "in", "exists", "pgbench_history",
                                 "Orders", "numeric", "pg_advisory_lock", "coalesce"});
    check_cases(SqlScanner({}, known),
                {
                    {"SELECT count(*), now() FROM t", 0},
                    {"SELECT COUNT (*) FROM t WHERE x IN (1, 2) AND EXISTS (SELECT 1)", 0},
                    {"INSERT INTO pgbench_history (tid) VALUES (1)", 0},
                    {"SELECT 1::numeric(10, 2)", 0},
                    {"SELECT coalesce(a, b) /* take_lock( */ FROM t -- take_lock(", 0},
                    {"INSERT INTO \"Orders\"(n) VALUES (1)", 0},
                    // A wrapper created since the catalog was read.
                    {"SELECT take_job_lock(42)", X},
                    {"SELECT app.take_job_lock (42)", X},
                    {"SELECT take_job_lock/* c */(42)", X},
                    {"CALL \"TakeJobLock\"(42)", X},
                    {"INSERT INTO orders(n) VALUES (1)", X},  // "Orders" is another name
                    {"SELECT pg_advisory_lock(1)", L},
                    // Not a call: no '(' after the name; inside literals and bodies nothing is.
                    {"SELECT take_job_lock FROM t", 0},
                    {"SELECT 'take_job_lock(1)'", 0},
                    {"SELECT $$ take_job_lock(1) $$", 0},
                },
                ~K & ~kEffectOpaque);
    // Without known names (no discovery yet, or too many names), calls are not looked at.
    check_cases(SqlScanner{}, {{"SELECT take_job_lock(42)", 0}});
}

TEST_CASE("sql scanner: SAVEPOINT as a statement, not as a word elsewhere") {
    check_cases(SqlScanner{},
                {
                    {"SAVEPOINT s1", V},
                    {"savepoint \"x\"", V},
                    {"BEGIN; SAVEPOINT a; LISTEN jobs", V | N},
                    {"/* c */ SaVePoInT a", V},
                    {"RELEASE SAVEPOINT a", 0},
                    {"ROLLBACK TO SAVEPOINT a", 0},
                    {"SELECT 'SAVEPOINT a'", 0},
                    {"SELECT savepoint FROM t", 0},
                    {"LISTEN savepoint", N},
                });
}
