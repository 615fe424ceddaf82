// Literals taken out of statement text (protocol/statement_redaction.hpp), table by table: each
// row is the exact output, so a case fails both when a literal survives and when code is lost.
#include <doctest/doctest.h>

#include <string_view>

#include "protocol/statement_redaction.hpp"

using pgtether::protocol::redact_statement_literals;

namespace {

struct Case {
    std::string_view sql;
    std::string_view redacted;
};

void check_table(const Case* begin, const Case* end) {
    for (const Case* c = begin; c != end; ++c) {
        CAPTURE(c->sql);
        CHECK(redact_statement_literals(c->sql) == c->redacted);
    }
}

}  // namespace

TEST_CASE("redaction: string literals in every form") {
    static constexpr Case kCases[] = {
        {"ALTER ROLE alice PASSWORD 'hunter2'", "ALTER ROLE alice PASSWORD ?"},
        {"SELECT 'it''s', 'x'", "SELECT ?, ?"},
        {"SELECT E'a\\'b secret'", "SELECT ?"},
        {"SELECT e'\\\\', 'next'", "SELECT ?, ?"},
        {"SELECT B'0101', X'1F', N'nat'", "SELECT ?, ?, ?"},
        {"SELECT U&'d\\0061t\\+000061'", "SELECT ?"},
        {"SELECT 'a'\n'b'", "SELECT ?\n?"},
        {"SELECT interval '1 day'", "SELECT interval ?"},
        {"SELECT '{1,2}'::int[]", "SELECT ?::int[]"},
        {"", ""},
    };
    check_table(std::begin(kCases), std::end(kCases));
}

TEST_CASE("redaction: dollar-quoted bodies, parameters and lone dollars") {
    static constexpr Case kCases[] = {
        {"SELECT $$secret$$", "SELECT ?"},
        {"SELECT $tag$ it's $$ inside $tag$, 1", "SELECT ?, ?"},
        {"DO $$BEGIN PERFORM pg_advisory_lock(7); END$$", "DO ?"},
        {"SELECT $1, $23::text", "SELECT $1, $23::text"},
        {"SELECT a$b, c$1 FROM t$", "SELECT a$b, c$1 FROM t$"},
        {"SELECT $ 1", "SELECT $ ?"},
    };
    check_table(std::begin(kCases), std::end(kCases));
}

TEST_CASE("redaction: numbers") {
    static constexpr Case kCases[] = {
        {"SELECT pg_advisory_lock(42)", "SELECT pg_advisory_lock(?)"},
        {"SELECT pg_advisory_lock(1, -2)", "SELECT pg_advisory_lock(?, -?)"},
        {"SELECT 4.2, .5, 1e-10, 1E+3, 0x1F, 1_000, 12abc", "SELECT ?, ?, ?, ?, ?, ?, ?"},
        {"SELECT * FROM t1 WHERE c2>=3", "SELECT * FROM t1 WHERE c2>=?"},
        {"SELECT x.y FROM s.t", "SELECT x.y FROM s.t"},
    };
    check_table(std::begin(kCases), std::end(kCases));
}

TEST_CASE("redaction: names, keywords, comments and prefixes that are not literals") {
    static constexpr Case kCases[] = {
        {"SELECT \"it's\", \"a\"\"b\" FROM \"T\"", "SELECT \"it's\", \"a\"\"b\" FROM \"T\""},
        {"SELECT U&\"d\\0061t\"", "SELECT U&\"d\\0061t\""},
        {"SELECT 1 /* where am I */", "SELECT ? /* where am I */"},
        {"SELECT 1 /* outer /* inner */ still */ , 2",
         "SELECT ? /* outer /* inner */ still */ , ?"},
        {"SELECT 1 -- it's a comment\n, 'x'", "SELECT ? -- it's a comment\n, ?"},
        // Longest match: only a one-letter word is a prefix.
        {"SELECT somee'x', be'y', e 'z'", "SELECT somee?, be?, e ?"},
        {"SELECT n, e, b, x, u FROM t", "SELECT n, e, b, x, u FROM t"},
        {"SELECT résumé FROM café", "SELECT résumé FROM café"},
    };
    check_table(std::begin(kCases), std::end(kCases));
}

TEST_CASE("redaction: where the server's reading is uncertain, the rest is hidden") {
    static constexpr Case kCases[] = {
        // Under standard_conforming_strings = on the first literal ends at the backslash and
        // 'secret' is a literal of its own; under off, \' escapes the quote. Either way nothing
        // of it may show.
        {"SELECT 'a\\', 'secret'", "SELECT ?"},
        {"SELECT 1, 'a\\' , secret '", "SELECT ?, ?"},
        {"SELECT N'a\\', 'secret'", "SELECT ?"},
        // Cut short (SHOW LOCKS keeps 200 bytes) or unterminated.
        {"ALTER ROLE bob PASSWORD 'half a sec", "ALTER ROLE bob PASSWORD ?"},
        {"SELECT $x$ never closed", "SELECT ?"},
        {"SELECT E'ends in a backslash\\", "SELECT ?"},
        {"SELECT \"unterminated name, 'secret'", "SELECT ?"},
    };
    check_table(std::begin(kCases), std::end(kCases));
}
