// The admin console grammar (protocol/admin_command.hpp): what PgBouncer's regular expressions
// accept, checked case by case (the expectations were compared with PgBouncer 1.18's console).
#include <doctest/doctest.h>

#include <string>

#include "protocol/admin_command.hpp"

using namespace pgtether::protocol;

namespace {

AdminCommand ok(const std::string& query) {
    auto result = parse_admin_command(query);
    INFO(query);
    REQUIRE(result.command.has_value());
    CHECK(result.error == AdminParseError::None);
    return *result.command;
}

AdminParseError error_of(const std::string& query) {
    auto result = parse_admin_command(query);
    INFO(query);
    CHECK_FALSE(result.command.has_value());
    return result.error;
}

}  // namespace

TEST_CASE("admin commands: one word, optional argument, optional semicolon") {
    auto c = ok("SHOW POOLS");
    CHECK(c.verb == "show");
    CHECK(c.argument == "POOLS");
    CHECK_FALSE(c.is_set);

    c = ok("reload");
    CHECK(c.verb == "reload");
    CHECK(c.argument.empty());

    c = ok("  \t\r\nShow   pools ;  \n");
    CHECK(c.verb == "show");
    CHECK(c.argument == "pools");

    c = ok("RELOAD;");
    CHECK(c.verb == "reload");

    c = ok("KILL_CLIENT 12");
    CHECK(c.verb == "kill_client");
    CHECK(c.argument == "12");

    // Database names keep their case and may be quoted, with "" for a quote.
    c = ok("PAUSE MyDb");
    CHECK(c.argument == "MyDb");
    c = ok("PAUSE \"my db\"");
    CHECK(c.argument == "my db");
    c = ok("PAUSE \"a\"\"b\"");
    CHECK(c.argument == "a\"b");
    c = ok("\"show\" \"pools\"");
    CHECK(c.verb == "show");
    CHECK(c.argument == "pools");
}

TEST_CASE("admin commands: anything else is a syntax error") {
    for (const char* query :
         {"", "   ", ";", "SHOW POOLS; SHOW VERSION", "show pools extra", "select 1 + 1",
          "SHOW pools;;", "SHOW -x", "PAUSE my-db", "PAUSE \"unterminated",
          "SHOW\tPOOLS -- comment", "SHOWPOOLS!", "PAUSE 'quoted'", "\"\"", " \"\" \"s\"\"\""}) {
        CHECK(error_of(query) == AdminParseError::Syntax);
    }
}

TEST_CASE("admin commands: SET key = value and SET key TO value") {
    auto c = ok("SET default_pool_size = 30");
    CHECK(c.is_set);
    CHECK(c.verb == "set");
    CHECK(c.argument == "default_pool_size");
    CHECK(c.value == "30");

    c = ok("set server_check_query = 'select 2';");
    CHECK(c.argument == "server_check_query");
    CHECK(c.value == "select 2");

    c = ok("SET x TO 'it''s'");
    CHECK(c.value == "it's");

    c = ok("SET x=y");
    CHECK(c.argument == "x");
    CHECK(c.value == "y");

    c = ok("SET x = ''");
    CHECK(c.value.empty());

    // Decimal values need quotes, as in PgBouncer (the unquoted form is a WORD).
    CHECK(error_of("SET stats_period = 1.5") == AdminParseError::Syntax);
    CHECK(ok("SET stats_period = '1.5'").value == "1.5");

    // TO stands apart from the key and value: `SET xTOy` is the command word SET with the
    // argument xTOy (which the console rejects), not SET x TO y.
    c = ok("SET xTOy");
    CHECK_FALSE(c.is_set);
    CHECK(c.argument == "xTOy");
    c = ok("SET x TO y");
    CHECK(c.value == "y");

    // `SET` without the SET form is an ordinary command word (which the console rejects).
    c = ok("SET verbose");
    CHECK_FALSE(c.is_set);
    CHECK(c.verb == "set");
    CHECK(c.argument == "verbose");
    c = ok("SETTINGS");
    CHECK(c.verb == "settings");
    // `select` is a command word too (PgBouncer maps SELECT x to SHOW x).
    c = ok("select 1");
    CHECK(c.verb == "select");
    CHECK(c.argument == "1");

    CHECK(error_of("SET x = 'unterminated") == AdminParseError::Syntax);
    CHECK(error_of("SET x = 1 2") == AdminParseError::Syntax);
    CHECK(error_of("SET = 1") == AdminParseError::Syntax);
}

TEST_CASE("admin commands: overlong words and values are refused, not truncated") {
    std::string long_word(kAdminMaxWord + 1, 'a');
    CHECK(error_of("PAUSE " + long_word) == AdminParseError::TooLong);
    CHECK(error_of("PAUSE \"" + long_word + "\"") == AdminParseError::TooLong);
    CHECK(ok("PAUSE " + std::string(kAdminMaxWord, 'a')).argument.size() == kAdminMaxWord);

    std::string long_value(kAdminMaxValue + 1, 'v');
    CHECK(error_of("SET x = '" + long_value + "'") == AdminParseError::TooLong);
    CHECK(ok("SET x = '" + std::string(kAdminMaxValue, 'v') + "'").value.size() == kAdminMaxValue);
    // An overlong value that is also malformed is a syntax error.
    CHECK(error_of("SET x = '" + long_value) == AdminParseError::Syntax);
}
