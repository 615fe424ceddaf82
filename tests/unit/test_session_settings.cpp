// Session settings: the options start-up parameter, the sync SQL, custom setting names.
#include <doctest/doctest.h>

#include "core/session_settings.hpp"

using namespace pgtether;

TEST_CASE("settings maps are keyed by lower-cased name") {
    SettingsMap m;
    m.set("Search_Path", "a");
    m.set("statement_timeout", "5000");
    REQUIRE(m.find("search_path"));
    CHECK(*m.find("SEARCH_PATH") == "a");
    m.set("search_path", "b");
    CHECK(m.size() == 2);
    CHECK(*m.find("search_path") == "b");
    CHECK(m.erase("STATEMENT_TIMEOUT"));
    CHECK_FALSE(m.erase("statement_timeout"));
    SettingsMap overlay;
    overlay.set("search_path", "c");
    overlay.set("work_mem", "8192");
    auto merged = SettingsMap::merged(m, overlay);
    CHECK(*merged.find("search_path") == "c");
    CHECK(*merged.find("work_mem") == "8192");
}

TEST_CASE("the options start-up parameter") {
    auto parsed = parse_startup_options("-c statement_timeout=5s --search-path=app\\ data -cwork_mem=8MB");
    auto* settings = std::get_if<std::vector<SettingsMap::Entry>>(&parsed);
    REQUIRE(settings);
    REQUIRE(settings->size() == 3);
    CHECK((*settings)[0] == SettingsMap::Entry{"statement_timeout", "5s"});
    CHECK((*settings)[1] == SettingsMap::Entry{"search_path", "app data"});
    CHECK((*settings)[2] == SettingsMap::Entry{"work_mem", "8MB"});
    CHECK(std::holds_alternative<std::string>(parse_startup_options("-B 100")));
    CHECK(std::holds_alternative<std::string>(parse_startup_options("-c novalue")));
    CHECK(std::holds_alternative<std::string>(parse_startup_options("--novalue")));
    CHECK(std::holds_alternative<std::string>(parse_startup_options("-c")));
    // An empty name (PgBouncer 1.20-1.26.0 spun forever on it: CVE-2026-107349) is refused.
    CHECK(std::holds_alternative<std::string>(parse_startup_options("-c=")));
    CHECK(std::holds_alternative<std::string>(parse_startup_options("-c=1")));
    CHECK(std::holds_alternative<std::string>(parse_startup_options("--=x")));
    CHECK(std::holds_alternative<std::string>(parse_startup_options("-c a=1 -c=")));
    // PgBouncer's words, which its clients and test suite match.
    auto refused = parse_startup_options("-c timezone");
    REQUIRE(std::holds_alternative<std::string>(refused));
    CHECK(std::get<std::string>(refused) ==
          "unsupported options startup parameter: only '-c config=val' and '--config=val' are "
          "allowed, not \"-c timezone\"");
    auto empty = parse_startup_options("   ");
    REQUIRE(std::get_if<std::vector<SettingsMap::Entry>>(&empty));
    CHECK(std::get<std::vector<SettingsMap::Entry>>(empty).empty());
}

TEST_CASE("what a setting inside options becomes (PgBouncer 1.24's set_startup_options)") {
    using U = StartupOptionUse;
    struct Row {
        bool tracked, listed, options_listed, replay;
        U use;
    };
    const Row rows[] = {
        // A tracked parameter (TimeZone, ...) is applied whatever is listed, as PgBouncer does.
        {true, false, false, false, U::Apply},
        {true, false, true, false, U::Apply},
        {true, false, true, true, U::Apply},
        // A name in ignore_startup_parameters is ignored inside options too.
        {false, true, false, false, U::Ignore},
        {false, true, false, true, U::Ignore},
        // "options" listed ignores every untracked name, also under replay.
        {false, false, true, false, U::Ignore},
        {false, false, true, true, U::Ignore},
        // Anything else: replayed (session_settings = replay) or refused (ignore).
        {false, false, false, true, U::Apply},
        {false, false, false, false, U::Refuse},
    };
    for (const Row& r : rows) {
        CAPTURE(r.tracked);
        CAPTURE(r.listed);
        CAPTURE(r.options_listed);
        CAPTURE(r.replay);
        CHECK(startup_option_use({.tracked = r.tracked,
                                  .listed = r.listed,
                                  .options_listed = r.options_listed,
                                  .replay = r.replay}) == r.use);
    }
}

TEST_CASE("sync SQL sets what differs and resets what the client does not have") {
    SettingsMap wanted, applied;
    CHECK(build_settings_sync(wanted, applied).empty());
    wanted.set("search_path", "app, public");
    wanted.set("myapp.tenant", "o'hara");
    applied.set("search_path", "app, public");
    applied.set("statement_timeout", "5000");
    CHECK(build_settings_sync(wanted, applied) ==
          "SELECT pg_catalog.set_config(E'myapp.tenant', E'o''hara', false);"
          "RESET \"statement_timeout\";");
}

TEST_CASE("sync SQL takes the session's identity away first and gives it back last") {
    // role and session_authorization: reset before the other settings (which then run as the
    // login user), set after them, session_authorization before role (it resets the role).
    struct Case {
        const char* name;
        std::vector<SettingsMap::Entry> wanted;
        std::vector<SettingsMap::Entry> applied;
        const char* sql;
    };
    const Case cases[] = {
        {"same identity on both: nothing", {{"role", "payroll"}}, {{"role", "payroll"}}, ""},
        {"the backend's role goes", {}, {{"role", "payroll"}}, "RESET \"role\";"},
        {"the client's role comes",
         {{"role", "payroll"}},
         {},
         "SELECT pg_catalog.set_config(E'role', E'payroll', false);"},
        {"another role: reset, then set",
         {{"role", "payroll"}},
         {{"role", "audit"}},
         "RESET \"role\";SELECT pg_catalog.set_config(E'role', E'payroll', false);"},
        {"session authorization and role: authorization first",
         {{"role", "payroll"}, {"session_authorization", "alice"}},
         {},
         "SELECT pg_catalog.set_config(E'session_authorization', E'alice', false), "
         "pg_catalog.set_config(E'role', E'payroll', false);"},
        {"a changed authorization re-sets an unchanged role",
         {{"role", "payroll"}, {"session_authorization", "alice"}},
         {{"role", "payroll"}, {"session_authorization", "bob"}},
         "RESET \"session_authorization\";RESET \"role\";"
         "SELECT pg_catalog.set_config(E'session_authorization', E'alice', false), "
         "pg_catalog.set_config(E'role', E'payroll', false);"},
        {"other settings run between: as the login user",
         {{"work_mem", "8MB"}},
         {{"role", "payroll"}, {"statement_timeout", "5000"}},
         "RESET \"role\";SELECT pg_catalog.set_config(E'work_mem', E'8MB', false);"
         "RESET \"statement_timeout\";"},
        {"an unchanged identity is cycled around other settings",
         {{"role", "payroll"}, {"work_mem", "8MB"}},
         {{"role", "payroll"}},
         "RESET \"role\";SELECT pg_catalog.set_config(E'work_mem', E'8MB', false);"
         "SELECT pg_catalog.set_config(E'role', E'payroll', false);"},
        {"an unchanged identity with nothing else to do: nothing",
         {{"session_authorization", "alice"}},
         {{"session_authorization", "alice"}},
         ""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        SettingsMap wanted, applied;
        for (const auto& [n, v] : c.wanted)
            wanted.set(n, v);
        for (const auto& [n, v] : c.applied)
            applied.set(n, v);
        CHECK(build_settings_sync(wanted, applied) == c.sql);
    }
}

TEST_CASE("custom setting names are collected from SET, RESET and set_config") {
    std::vector<std::string> names;
    collect_custom_setting_names("SET myapp.tenant = 'a'; RESET Other.Thing; SET work_mem = 1",
                                 names, 10);
    collect_custom_setting_names("select set_config('x.y', 'v', false), 'set z.w'", names, 10);
    collect_custom_setting_names("SET SESSION myapp.tenant TO 'b' -- SET hidden.name = 1", names,
                                 10);
    CHECK(names == std::vector<std::string>{"myapp.tenant", "other.thing", "x.y"});
    collect_custom_setting_names("SET a.b = 1; SET c.d = 2", names, 4);
    CHECK(names.size() == 4);
}

TEST_CASE("a search_path that names pg_temp, from the session or the start-up packet") {
    struct Case {
        const char* startup;  // nullptr: not set
        const char* session;
        bool names_temp;
    };
    const Case cases[] = {
        {nullptr, nullptr, false},
        {nullptr, "pg_temp, public", true},
        {nullptr, "public, \"PG_TEMP\"", true},
        {"pg_temp_3, public", nullptr, true},
        {"pg_temp, public", "public", false},  // the session's SET overrides the start-up value
        {"public", "\"$user\", public", false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.startup ? c.startup : "-");
        CAPTURE(c.session ? c.session : "-");
        SettingsMap startup, session;
        if (c.startup) startup.set("search_path", c.startup);
        if (c.session) session.set("search_path", c.session);
        CHECK(search_path_names_temp_schema(startup, session) == c.names_temp);
    }
}
