// Tracked client parameters and the SET statements that align a backend with a client.
#include <doctest/doctest.h>

#include "proxy/session_params.hpp"

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

TEST_CASE("parameter sync sends only what differs") {
    ParamValues defaults;
    defaults.set(TrackedParam::DateStyle, "ISO, MDY");
    defaults.set(TrackedParam::TimeZone, "UTC");
    defaults.set(TrackedParam::ApplicationName, "");

    ParamValues backend = defaults;
    ParamValues client;
    CHECK(build_parameter_sync_query(client, defaults, backend).empty());

    client.set(TrackedParam::TimeZone, "Europe/Berlin");
    CHECK(build_parameter_sync_query(client, defaults, backend) ==
          "SET TimeZone = E'Europe/Berlin';");

    // The backend carries another client's DateStyle: the client that never chose one gets the
    // default back.
    backend.set(TrackedParam::DateStyle, "German, DMY");
    CHECK(build_parameter_sync_query(client, defaults, backend) ==
          "SET DateStyle = E'ISO, MDY';SET TimeZone = E'Europe/Berlin';");

    client.set(TrackedParam::ApplicationName, "o'brien");
    CHECK(build_parameter_sync_query(client, defaults, backend) ==
          "SET DateStyle = E'ISO, MDY';SET TimeZone = E'Europe/Berlin';"
          "SET application_name = E'o''brien';");
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
