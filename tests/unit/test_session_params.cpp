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
