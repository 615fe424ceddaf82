// Builders and readers of the protocol messages pgtether generates or inspects, against byte
// literals taken from the protocol documentation (§55.7).
#include <doctest/doctest.h>

#include <string>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/frontend_messages.hpp"

using namespace pgtether::protocol;

namespace {

ByteSpan body_of(const std::string& message) {
    return as_bytes(std::string_view(message).substr(5));
}

}  // namespace

TEST_CASE("backend message builders produce the documented bytes") {
    std::string out;
    append_ready_for_query(out, 'I');
    CHECK(out == std::string("Z\0\0\0\5I", 6));

    out.clear();
    append_authentication(out, AuthRequest::Ok);
    CHECK(out == std::string("R\0\0\0\x08\0\0\0\0", 9));

    out.clear();
    append_auth_md5(out, {1, 2, 3, 4});
    CHECK(out == std::string("R\0\0\0\x0c\0\0\0\x05\x01\x02\x03\x04", 13));

    out.clear();
    append_auth_sasl(out, {"SCRAM-SHA-256"});
    CHECK(out == std::string("R\0\0\0\x17\0\0\0\x0aSCRAM-SHA-256\0\0", 24));

    out.clear();
    append_parameter_status(out, "TimeZone", "UTC");
    CHECK(out == std::string("S\0\0\0\x11TimeZone\0UTC\0", 18));

    out.clear();
    append_backend_key_data(out, {1, 2});
    CHECK(out == std::string("K\0\0\0\x0c\0\0\0\1\0\0\0\2", 13));

    out.clear();
    append_command_complete(out, "SELECT 1");
    CHECK(out == std::string("C\0\0\0\x0dSELECT 1\0", 14));

    out.clear();
    append_data_row(out, {std::string("ab"), std::nullopt});
    CHECK(out == std::string("D\0\0\0\x10\0\x02\0\0\0\x02" "ab\xff\xff\xff\xff", 17));
}

TEST_CASE("ErrorResponse round trip") {
    std::string out;
    append_error_response(out, {"FATAL", "28P01", "password authentication failed", "d", "h"});
    CHECK(out[0] == 'E');
    auto fields = parse_error_fields(body_of(out));
    REQUIRE(fields);
    CHECK(fields->severity == "FATAL");
    CHECK(fields->sqlstate == "28P01");
    CHECK(fields->message == "password authentication failed");
    CHECK(fields->detail == "d");
    CHECK(fields->hint == "h");
    // Unterminated field list.
    CHECK_FALSE(parse_error_fields(as_bytes(std::string("SERROR\0", 7))));
    // Localized severity only (no 'V' field, as from pre-9.6 servers).
    auto old = parse_error_fields(as_bytes(std::string("SFEHLER\0C42P01\0Mx\0\0", 20)));
    REQUIRE(old);
    CHECK(old->severity == "FEHLER");
}

TEST_CASE("a protocol 2.0 error is 'E' and one string") {
    std::string out;
    append_v2_fatal_error(out, "unsupported frontend protocol 2.0: server supports 3.0 to 3.0");
    CHECK(out == std::string("EFATAL:  unsupported frontend protocol 2.0: server supports 3.0 to "
                             "3.0\n\0", 72));
}

TEST_CASE("FATAL and PANIC errors end the session; others do not") {
    auto severity_of = [](const char* severity) {
        return is_fatal(ErrorFields{severity, "57P01", "terminating connection", {}, {}});
    };
    CHECK(severity_of("FATAL"));
    CHECK(severity_of("PANIC"));
    CHECK_FALSE(severity_of("ERROR"));
    CHECK_FALSE(severity_of("WARNING"));
    // The non-localized 'V' field decides over a localized 'S'.
    auto localized =
        parse_error_fields(as_bytes(std::string("SFATALE\0VFATAL\0C57P01\0Mx\0\0", 26)));
    REQUIRE(localized);
    CHECK(is_fatal(*localized));
}

TEST_CASE("backend message readers reject malformed bodies") {
    CHECK(parse_ready_for_query(as_bytes(std::string("T", 1))) == 'T');
    CHECK_FALSE(parse_ready_for_query(as_bytes(std::string("X", 1))));
    CHECK_FALSE(parse_ready_for_query(as_bytes(std::string("II", 2))));
    CHECK_FALSE(parse_ready_for_query(as_bytes(std::string())));

    const std::string status_body("DateStyle\0ISO, MDY\0", 19);  // the views below point into it
    auto ps = parse_parameter_status(as_bytes(status_body));
    REQUIRE(ps);
    CHECK(ps->name == "DateStyle");
    CHECK(ps->value == "ISO, MDY");
    CHECK_FALSE(parse_parameter_status(as_bytes(std::string("DateStyle\0ISO", 13))));

    auto key = parse_backend_key_data(as_bytes(std::string("\0\0\0\1\xff\xff\xff\xff", 8)));
    REQUIRE(key);
    CHECK(key->pid == 1);
    CHECK(key->secret == -1);
    CHECK_FALSE(parse_backend_key_data(as_bytes(std::string("\0\0\0\1", 4))));

    auto auth = parse_authentication(as_bytes(std::string("\0\0\0\x05\x01\x02\x03\x04", 8)));
    REQUIRE(auth);
    CHECK(auth->code == AuthRequest::Md5Password);
    CHECK(auth->data.size() == 4);
    CHECK_FALSE(parse_authentication(as_bytes(std::string("\0\0\0\x05\x01", 5))));

    const std::string mechs_body("SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0", 34);
    auto mechs = parse_sasl_mechanisms(as_bytes(mechs_body));
    REQUIRE(mechs);
    CHECK(mechs->size() == 2);
    CHECK((*mechs)[1] == "SCRAM-SHA-256");

    const std::string row_body("\0\x02\0\0\0\x01x\xff\xff\xff\xff", 11);
    auto row = parse_data_row(as_bytes(row_body));
    REQUIRE(row);
    REQUIRE(row->size() == 2);
    CHECK((*row)[0] == "x");
    CHECK_FALSE((*row)[1]);
    // A column length running past the body.
    CHECK_FALSE(parse_data_row(as_bytes(std::string("\0\x01\0\0\0\x09x", 7))));
    // A negative length other than -1.
    CHECK_FALSE(parse_data_row(as_bytes(std::string("\0\x01\xff\xff\xff\xfe", 6))));
}

TEST_CASE("frontend message readers") {
    std::string q;
    append_query(q, "SELECT 1");
    auto sql = parse_query(body_of(q));
    REQUIRE(sql);
    CHECK(*sql == "SELECT 1");
    CHECK_FALSE(parse_query(as_bytes(std::string("SELECT 1", 8))));

    // Parse: name, query, two parameter OIDs.
    std::string parse_body("stmt\0SELECT $1, $2\0\0\x02\0\0\0\x17\0\0\0\x19", 29);
    auto parse = parse_parse(as_bytes(parse_body));
    REQUIRE(parse);
    CHECK(parse->statement == "stmt");
    CHECK(parse->query == "SELECT $1, $2");
    CHECK(parse->parameter_types.size() == 10);
    // Parameter count larger than the OIDs present.
    CHECK_FALSE(parse_parse(as_bytes(std::string("s\0q\0\0\x03\0\0\0\x17", 10))));

    const std::string bind_body("portal\0stmt\0\0\0", 15);
    auto bind = parse_bind_names(as_bytes(bind_body));
    REQUIRE(bind);
    CHECK(bind->portal == "portal");
    CHECK(bind->statement == "stmt");

    const std::string target_body("Sstmt\0", 6);
    auto target = parse_describe_or_close(as_bytes(target_body));
    REQUIRE(target);
    CHECK(target->kind == 'S');
    CHECK(target->name == "stmt");
    CHECK_FALSE(parse_describe_or_close(as_bytes(std::string("Xstmt\0", 6))));

    std::string sasl;
    append_sasl_initial_response(sasl, "SCRAM-SHA-256", "n,,n=,r=abc");
    auto initial = parse_sasl_initial_response(body_of(sasl));
    REQUIRE(initial);
    CHECK(initial->mechanism == "SCRAM-SHA-256");
    REQUIRE(initial->data);
    CHECK(*initial->data == "n,,n=,r=abc");
    // Declared length longer than the data.
    CHECK_FALSE(parse_sasl_initial_response(as_bytes(std::string("M\0\0\0\0\x09" "abc", 9))));
}

TEST_CASE("extended-protocol builders for pgtether's own parameterised queries") {
    std::string out;
    append_parse(out, "", "SELECT $1");
    CHECK(out == std::string("P\0\0\0\x11\0SELECT $1\0\0\0", 18));
    auto parsed = parse_parse(body_of(out));
    REQUIRE(parsed);
    CHECK(parsed->statement.empty());
    CHECK(parsed->query == "SELECT $1");

    out.clear();
    std::optional<std::string_view> params[] = {std::string_view("bob"), std::nullopt};
    append_bind(out, "", "s1", params);
    // portal "", statement "s1", 0 format codes, 2 parameters ("bob", NULL), 0 result formats.
    CHECK(out ==
          std::string("B\0\0\0\x19\0s1\0\0\0\0\x02\0\0\0\x03" "bob\xff\xff\xff\xff\0\0", 26));
    auto names = parse_bind_names(body_of(out));
    REQUIRE(names);
    CHECK(names->statement == "s1");

    out.clear();
    append_execute(out, "", 0);
    CHECK(out == std::string("E\0\0\0\x09\0\0\0\0\0", 10));
}
