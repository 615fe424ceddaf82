// Tracked client parameters and the SET statements that align a backend with a client.
#include <doctest/doctest.h>

#include <optional>
#include <string_view>

#include "core/session_params.hpp"

using namespace pgtether;

TEST_CASE("tracked parameter names are found case-insensitively") {
    CHECK(find_tracked_param("datestyle") == TrackedParam::DateStyle);
    CHECK(find_tracked_param("DateStyle") == TrackedParam::DateStyle);
    CHECK(find_tracked_param("TIMEZONE") == TrackedParam::TimeZone);
    CHECK(find_tracked_param("application_name") == TrackedParam::ApplicationName);
    CHECK_FALSE(find_tracked_param("search_path"));
    CHECK_FALSE(find_tracked_param("date"));
    CHECK(tracked_param_name(TrackedParam::IntervalStyle) == "IntervalStyle");
}

TEST_CASE("quote_literal is safe for quotes and backslashes") {
    CHECK(quote_literal("UTC") == "E'UTC'");
    CHECK(quote_literal("it's") == "E'it''s'");
    CHECK(quote_literal("a\\b") == "E'a\\\\b'");
    CHECK(quote_literal("") == "E''");
}

TEST_CASE("quote_literal: non-ASCII values are dollar-quoted with a tag they do not contain") {
    // The SJIS attack: \x95\x5c is one character, so a doubled backslash would become \' after
    // the server's conversion. Dollar quotes have no escapes at all.
    const std::string sjis = "\x95\x5c'; DROP TABLE t; --";
    CHECK(quote_literal(sjis) == "$pgt$" + sjis + "$pgt$");
    // The tag grows past every "$pgt..." in the value.
    CHECK(quote_literal("\xc3\xa9$pgt$") == "$pgtx$\xc3\xa9$pgt$$pgtx$");
    CHECK(quote_literal("\xc3\xa9$pgtxx$") == "$pgtxxx$\xc3\xa9$pgtxx$$pgtxxx$");
    CHECK(quote_literal("$pgtx \xc3\xa9 $pgt") == "$pgtxx$$pgtx \xc3\xa9 $pgt$pgtxx$");
    // A value ending in "$pgt" would meet the closing "$pgt$" half-way: a longer tag, again.
    CHECK(quote_literal("\xc3\xa9$pgt") == "$pgtx$\xc3\xa9$pgt$pgtx$");

    // Whatever the value, its quoted form ends exactly where the closing tag does, which is all
    // PostgreSQL's lexer looks for in a dollar-quoted string.
    const std::string values[] = {
        "\x95\x5c",
        "\x95\x5c'",
        "\x95'$$",
        "\xff$pgt$pgtx$pgtxx",
        "$\x81$",
        "\x81\x27\x5c$pgt",
        "a$pgtxxxxxxxxxx\xe3\x81\x82",
        std::string(1000, '\x95') + "$pgt",
    };
    for (const auto& value : values) {
        CAPTURE(value);
        std::string quoted = quote_literal(value);
        REQUIRE(quoted.size() > value.size() + 4);
        std::size_t tag_size = (quoted.size() - value.size()) / 2;
        std::string tag = quoted.substr(0, tag_size);
        CHECK(tag.front() == '$');
        CHECK(tag.back() == '$');
        CHECK(quoted.substr(tag_size, value.size()) == value);
        CHECK(quoted.substr(tag_size + value.size()) == tag);
        CHECK(quoted.find(tag, tag_size) == tag_size + value.size());
    }
}

TEST_CASE("parameter sync: a client-only encoding's value stays one literal") {
    ParamValues defaults;
    ParamValues backend;
    ParamValues client;
    client.set(TrackedParam::ClientEncoding, "SJIS");
    client.set(TrackedParam::ApplicationName, "\x95\x5c'; SELECT 1; --");
    ParameterSync sync = build_parameter_sync(client, defaults, backend);
    CHECK(sync.encoding == "SET client_encoding = E'SJIS';");
    CHECK(sync.rest == "SET application_name = $pgt$\x95\x5c'; SELECT 1; --$pgt$;");
}

TEST_CASE("parameter sync: a change of client_encoding is a query of its own, before the rest") {
    // The backend converts each query string from the client_encoding in force when it arrives:
    // the client's values must reach it in a later string than the change.
    struct Case {
        const char* what;
        std::optional<std::string_view> client_encoding;  // unset: the default, UTF8
        std::string_view application_name;                // "": the default
        std::string_view backend_encoding;
        std::string_view encoding_query;
        std::string_view rest;
    };
    const Case cases[] = {
        {"only the encoding changes", "SJIS", "", "UTF8", "SET client_encoding = E'SJIS';", ""},
        {"the encoding changes, then the value in it", "SJIS", "\x95\x5c", "UTF8",
         "SET client_encoding = E'SJIS';", "SET application_name = $pgt$\x95\x5c$pgt$;"},
        {"the backend already speaks SJIS: one string", "SJIS", "\x95\x5c", "SJIS", "",
         "SET application_name = $pgt$\x95\x5c$pgt$;"},
        {"back to the default encoding first", std::nullopt, "caf\xc3\xa9", "SJIS",
         "SET client_encoding = E'UTF8';", "SET application_name = $pgt$caf\xc3\xa9$pgt$;"},
    };
    ParamValues defaults;
    defaults.set(TrackedParam::ClientEncoding, "UTF8");
    defaults.set(TrackedParam::ApplicationName, "");
    for (const Case& c : cases) {
        CAPTURE(c.what);
        ParamValues client;
        if (c.client_encoding) client.set(TrackedParam::ClientEncoding, *c.client_encoding);
        if (!c.application_name.empty()) {
            client.set(TrackedParam::ApplicationName, c.application_name);
        }
        ParamValues backend = defaults;
        backend.set(TrackedParam::ClientEncoding, c.backend_encoding);
        const ParameterSync sync = build_parameter_sync(client, defaults, backend);
        CHECK(sync.encoding == c.encoding_query);
        CHECK(sync.rest == c.rest);
    }
}

TEST_CASE("parameter sync sends only what differs") {
    ParamValues defaults;
    defaults.set(TrackedParam::DateStyle, "ISO, MDY");
    defaults.set(TrackedParam::TimeZone, "UTC");
    defaults.set(TrackedParam::ApplicationName, "");

    ParamValues backend = defaults;
    ParamValues client;
    CHECK(build_parameter_sync(client, defaults, backend).empty());

    client.set(TrackedParam::TimeZone, "Europe/Berlin");
    CHECK(build_parameter_sync(client, defaults, backend).rest ==
          "SET TimeZone = E'Europe/Berlin';");

    // The backend carries another client's DateStyle: the client that never chose one gets the
    // default back.
    backend.set(TrackedParam::DateStyle, "German, DMY");
    CHECK(build_parameter_sync(client, defaults, backend).rest ==
          "SET DateStyle = E'ISO, MDY';SET TimeZone = E'Europe/Berlin';");

    client.set(TrackedParam::ApplicationName, "o'brien");
    CHECK(build_parameter_sync(client, defaults, backend).rest ==
          "SET DateStyle = E'ISO, MDY';SET TimeZone = E'Europe/Berlin';"
          "SET application_name = E'o''brien';");
}

TEST_CASE("parameters_in_sync says exactly when the sync would be empty") {
    // Every combination of unset, empty and two values for two parameters, in the client, the
    // defaults and the backend (4^6 cases), the second parameter's value before the first's
    // in the string so that offsets differ between the three.
    const std::optional<std::string_view> choices[] = {std::nullopt, "", "a", "bb"};
    auto fill = [&](ParamValues& values, int first, int second) {
        if (choices[second]) values.set(TrackedParam::ApplicationName, *choices[second]);
        if (choices[first]) values.set(TrackedParam::TimeZone, *choices[first]);
    };
    int in_sync = 0;
    for (int code = 0; code < 4096; ++code) {
        ParamValues client;
        ParamValues defaults;
        ParamValues backend;
        fill(client, code & 3, (code >> 2) & 3);
        fill(defaults, (code >> 4) & 3, (code >> 6) & 3);
        fill(backend, (code >> 8) & 3, (code >> 10) & 3);
        backend.set(TrackedParam::DateStyle, "ISO, MDY");  // only the backend has it: no SET
        const bool empty = build_parameter_sync(client, defaults, backend).empty();
        CAPTURE(code);
        CHECK(parameters_in_sync(client, defaults, backend) == empty);
        in_sync += empty ? 1 : 0;
    }
    CHECK(in_sync > 0);
    CHECK(in_sync < 4096);
}

TEST_CASE("ParamValues keeps each value apart, set or not") {
    ParamValues values;
    for (std::size_t i = 0; i < kTrackedParamCount; ++i) {
        CHECK_FALSE(values.get(static_cast<TrackedParam>(i)));
    }
    // An empty value is set: application_name = '' differs from "never chosen".
    values.set(TrackedParam::ApplicationName, "");
    REQUIRE(values.get(TrackedParam::ApplicationName));
    CHECK(*values.get(TrackedParam::ApplicationName) == "");
    CHECK_FALSE(values.get(TrackedParam::StandardConformingStrings));

    values.set(TrackedParam::TimeZone, "UTC");
    values.set(TrackedParam::ClientEncoding, "UTF8");
    values.set(TrackedParam::IntervalStyle, "postgres");
    values.set(TrackedParam::ApplicationName, "pgbench");
    CHECK(values.get(TrackedParam::ClientEncoding) == "UTF8");
    CHECK_FALSE(values.get(TrackedParam::DateStyle));
    CHECK(values.get(TrackedParam::TimeZone) == "UTC");
    CHECK(values.get(TrackedParam::IntervalStyle) == "postgres");
    CHECK(values.get(TrackedParam::ApplicationName) == "pgbench");

    // Growing, shrinking and clearing one value moves the ones after it, not their contents.
    values.set(TrackedParam::TimeZone, "America/Argentina/Buenos_Aires");
    values.set(TrackedParam::DateStyle, "ISO, DMY");
    CHECK(values.get(TrackedParam::ClientEncoding) == "UTF8");
    CHECK(values.get(TrackedParam::DateStyle) == "ISO, DMY");
    CHECK(values.get(TrackedParam::TimeZone) == "America/Argentina/Buenos_Aires");
    CHECK(values.get(TrackedParam::IntervalStyle) == "postgres");
    values.set(TrackedParam::TimeZone, "");
    values.clear(TrackedParam::ClientEncoding);
    CHECK_FALSE(values.get(TrackedParam::ClientEncoding));
    CHECK(values.get(TrackedParam::DateStyle) == "ISO, DMY");
    CHECK(values.get(TrackedParam::TimeZone) == "");
    CHECK(values.get(TrackedParam::IntervalStyle) == "postgres");
    CHECK(values.get(TrackedParam::ApplicationName) == "pgbench");

    // Copies are independent.
    ParamValues copy = values;
    copy.set(TrackedParam::IntervalStyle, "iso_8601");
    CHECK(values.get(TrackedParam::IntervalStyle) == "postgres");
    CHECK(copy.get(TrackedParam::IntervalStyle) == "iso_8601");
    CHECK(copy.get(TrackedParam::ApplicationName) == "pgbench");
}
