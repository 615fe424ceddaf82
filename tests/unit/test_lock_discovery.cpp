// Lock-wrapper discovery (core/lock_discovery.hpp): which functions, tables and views of a
// catalog snapshot can take or release session advisory locks, to a fixed point. Each case states
// the whole expected result, so a case also fails when discovery finds too much.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/lock_discovery.hpp"

using namespace pgtether;

namespace {

CatalogFunction plpgsql(std::string oid, std::string name, std::string body) {
    return {std::move(oid), "public", std::move(name), "plpgsql", false, std::move(body)};
}
CatalogFunction sql(std::string oid, std::string name, std::string body) {
    return {std::move(oid), "public", std::move(name), "sql", false, std::move(body)};
}

// "source schema.name kind [detail]" per entry, for readable failures.
std::vector<std::string> describe(const std::vector<LockName>& names) {
    std::vector<std::string> out;
    for (const LockName& n : names) {
        std::string line =
            std::string(to_string(n.source)) + " " + n.schema + "." + n.name + " " + n.kind;
        if (!n.detail.empty()) line += " [" + n.detail + "]";
        out.push_back(line);
    }
    return out;
}

std::vector<std::string> discover(const CatalogSnapshot& snapshot,
                                  const std::vector<std::string>& configured = {}) {
    const auto found = discover_lock_names(snapshot, configured);
    CHECK(found.complete);
    return describe(found.names);
}

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("lock discovery: bodies that call a session lock function, and those that do not") {
    struct Case {
        const char* what;
        CatalogFunction function;
        bool found;
    };
    const Case cases[] = {
        {"plpgsql PERFORM", plpgsql("1", "f", "BEGIN PERFORM pg_advisory_lock(k); END"), true},
        {"sql SELECT", sql("1", "f", "SELECT pg_try_advisory_lock($1)"), true},
        {"shared", sql("1", "f", "SELECT pg_advisory_lock_shared(1)"), true},
        {"unlock", sql("1", "f", "SELECT pg_advisory_unlock(1)"), true},
        {"unlock all", sql("1", "f", "SELECT pg_advisory_unlock_all()"), true},
        {"qualified, upper case", sql("1", "f", "SELECT PG_CATALOG.PG_ADVISORY_LOCK(1)"), true},
        {"quoted", sql("1", "f", "SELECT \"pg_advisory_lock\"(1)"), true},
        {"dynamic SQL",
         plpgsql("1", "f", "BEGIN EXECUTE 'SELECT pg_advisory_lock(' || k || ')'; END"), true},
        {"SQL-standard body (deparsed)",
         sql("1", "f",
             "CREATE OR REPLACE FUNCTION public.f(k bigint)\n RETURNS void\n LANGUAGE sql\n"
             "BEGIN ATOMIC\n SELECT pg_advisory_lock(k) AS pg_advisory_lock;\nEND\n"),
         true},
        {"xact lock only", sql("1", "f", "SELECT pg_advisory_xact_lock(1)"), false},
        {"try xact lock only", sql("1", "f", "SELECT pg_try_advisory_xact_lock_shared(1)"), false},
        {"in a comment", plpgsql("1", "f", "BEGIN -- pg_advisory_lock(1)\n RETURN; END"), false},
        {"unrelated", sql("1", "f", "SELECT count(*) FROM locks"), false},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        CatalogSnapshot snapshot;
        snapshot.functions.push_back(c.function);
        const Lines expected = c.found ? Lines{"discovered public.f function"} : Lines{};
        CHECK(discover(snapshot) == expected);
    }
}

TEST_CASE("lock discovery: wrappers calling wrappers, to a fixed point") {
    CatalogSnapshot snapshot;
    // d calls c calls b calls a, which locks; listed in the worst order for one pass.
    snapshot.functions = {
        plpgsql("4", "level_d", "BEGIN PERFORM app.level_c(1); END"),
        sql("3", "level_c", "SELECT \"LEVEL_B\"($1)"),  // quoted, other case: still a match
        plpgsql("2", "level_b", "BEGIN EXECUTE 'SELECT level_a(1)'; END"),
        sql("1", "level_a", "SELECT pg_advisory_lock($1)"),
        sql("5", "bystander", "SELECT 1"),
    };
    snapshot.functions[1].schema = "app";
    CHECK(discover(snapshot) == Lines{
                                    "discovered app.level_c function",
                                    "discovered public.level_a function",
                                    "discovered public.level_b function",
                                    "discovered public.level_d function",
                                });
}

TEST_CASE("lock discovery: configured names seed the fixed point") {
    CatalogSnapshot snapshot;
    snapshot.functions = {
        sql("1", "calls_configured", "SELECT my_c_lock(1)"),
        sql("2", "bystander", "SELECT 1"),
    };
    CHECK(discover(snapshot, {"my_c_lock"}) ==
          Lines{"discovered public.calls_configured function"});
    CHECK(discover(snapshot) == Lines{});
}

TEST_CASE("lock discovery: procedures, overloads and schemas") {
    CatalogSnapshot snapshot;
    snapshot.functions = {
        {"1", "jobs", "take", "plpgsql", true, "BEGIN PERFORM pg_advisory_lock(k); END"},
        {"2", "jobs", "take", "plpgsql", true, "BEGIN PERFORM pg_advisory_lock(a, b); END"},
        {"3", "other", "take", "sql", false, "SELECT 1"},  // same name, no lock: not listed
    };
    CHECK(discover(snapshot) == Lines{"discovered jobs.take procedure"});
}

TEST_CASE("lock discovery: trigger functions map to the tables their triggers are on") {
    CatalogSnapshot snapshot;
    snapshot.functions = {
        plpgsql("10", "lock_job_row", "BEGIN PERFORM pg_advisory_lock(NEW.id); RETURN NEW; END"),
        plpgsql("11", "audit_row", "BEGIN INSERT INTO audit VALUES (NEW.id); RETURN NEW; END"),
        // Inserts into a table whose trigger locks: a wrapper too.
        sql("12", "enqueue", "INSERT INTO jobs (id) VALUES ($1)"),
    };
    snapshot.triggers = {
        {"10", "public", "jobs", "jobs_lock"},
        {"10", "public", "jobs", "jobs_lock_again"},  // two triggers: one entry
        {"11", "public", "accounts", "accounts_audit"},
        {"99", "public", "orphan", "unknown_function"},  // function not in the snapshot
    };
    CHECK(discover(snapshot) ==
          Lines{
              "discovered public.enqueue function",
              "discovered public.lock_job_row function",
              "via trigger public.jobs table [jobs_lock (function public.lock_job_row)]",
          });
}

TEST_CASE("lock discovery: views whose definition calls a wrapper") {
    CatalogSnapshot snapshot;
    snapshot.functions = {sql("1", "grab", "SELECT pg_try_advisory_lock($1)")};
    snapshot.views = {
        {"public", "grabbing", " SELECT grab(jobs.id) AS grab\n   FROM jobs;"},
        {"public", "direct", " SELECT pg_advisory_lock(1) AS pg_advisory_lock;"},
        {"public", "plain", " SELECT jobs.id\n   FROM jobs;"},
        // A view over a lock-taking view: found in a later round.
        {"reports", "over_view", " SELECT grabbing.grab\n   FROM grabbing;"},
    };
    CHECK(discover(snapshot) == Lines{
                                    "discovered public.grab function",
                                    "via view public.direct view",
                                    "via view public.grabbing view",
                                    "via view reports.over_view view",
                                });
}

TEST_CASE("lock discovery: unreadable bodies are unknown, not guessed") {
    CatalogSnapshot snapshot;
    snapshot.functions = {
        {"1", "public", "c_func", "c", false, "c_func_symbol"},
        {"2", "public", "internal_func", "internal", false, "pg_advisory_lock_int8"},
        {"3", "public", "py_lock", "plpython3u", false,
         "plpy.execute('SELECT pg_advisory_lock(1)')"},
        {"4", "public", "py_other", "plpython3u", false, "return 1"},
    };
    // A trigger whose function is unknown does not make its table lock-relevant.
    snapshot.triggers = {{"1", "public", "t", "t_c_trigger"}};
    CHECK(discover(snapshot) == Lines{
                                    "discovered public.py_lock function",
                                    "unknown public.c_func function [language c]",
                                    "unknown public.internal_func function [language internal]",
                                    "unknown public.py_other function [language plpython3u]",
                                });
}

TEST_CASE("lock discovery: the names the trigger matches") {
    CatalogSnapshot snapshot;
    snapshot.functions = {
        plpgsql("10", "lock_job_row", "BEGIN PERFORM pg_advisory_lock(NEW.id); RETURN NEW; END"),
        {"2", "public", "c_func", "c", false, "c_func_symbol"},
        {"3", "app", "lock_job_row", "sql", false, "SELECT pg_advisory_lock(1)"},
    };
    snapshot.triggers = {{"10", "public", "jobs", "jobs_lock"}};
    snapshot.views = {{"public", "v", "SELECT lock_job_row(1)"}};
    const auto found = discover_lock_names(snapshot, {"configured_one"}).names;
    // Unqualified, each once, configured first; unknown functions are not matched.
    CHECK(trigger_names({"configured_one"}, found) ==
          std::vector<std::string>{"configured_one", "lock_job_row", "jobs", "v"});
}

TEST_CASE("lock discovery: a fixed point cut short says so") {
    const auto name = [](int i, std::size_t length) {
        std::string n = "wrapper_" + std::to_string(i);
        return n + std::string(length - n.size(), 'x');
    };
    // A chain: f0 locks, f1 calls f0, ... listed deepest first, so each round finds one more.
    const auto chain = [&](int n, std::size_t length) {
        CatalogSnapshot snapshot;
        for (int i = n - 1; i >= 1; --i) {
            snapshot.functions.push_back(
                sql(std::to_string(i), name(i, length), "SELECT " + name(i - 1, length) + "(1)"));
        }
        snapshot.functions.push_back(sql("0", name(0, length), "SELECT pg_advisory_lock(1)"));
        return snapshot;
    };
    // As deep as the rounds allow: complete.
    auto shallow = discover_lock_names(chain(kMaxDiscoveryRounds - 1, 20), {});
    CHECK(shallow.complete);
    CHECK(shallow.names.size() == static_cast<std::size_t>(kMaxDiscoveryRounds - 1));
    // Deeper: cut short, incomplete.
    auto deep = discover_lock_names(chain(kMaxDiscoveryRounds + 5, 20), {});
    CHECK_FALSE(deep.complete);
    CHECK(deep.names.size() == static_cast<std::size_t>(kMaxDiscoveryRounds));
    // Names past the byte limit: 2,000 functions found in one round (they all lock directly).
    CatalogSnapshot wide;
    for (int i = 0; i < 2000; ++i) {
        wide.functions.push_back(sql(std::to_string(i), name(i, 60), "SELECT pg_advisory_lock(1)"));
    }
    auto many = discover_lock_names(wide, {});
    CHECK_FALSE(many.complete);
    CHECK(trigger_too_large(trigger_names({}, many.names)));
    CHECK_FALSE(trigger_too_large({"pg_advisory_lock", "acquire_job_lock"}));
}

TEST_CASE("lock discovery: decoding the query's rows") {
    using R = Row;
    std::vector<Row> rows = {
        R{"f", "1", "public", "f", "sql", "f", "SELECT 1"},
        R{"f", "2", "app", "p", "plpgsql", "p", std::nullopt},
        R{"t", "1", "public", "jobs", "jobs_lock", std::nullopt, std::nullopt},
        R{"v", "3", "public", "v", std::nullopt, std::nullopt, " SELECT 1;"},
        R{"n", "", "", "count", std::nullopt, std::nullopt, std::nullopt},
        R{"n", "", "", "Orders", std::nullopt, std::nullopt, std::nullopt},
        R{"c", "", "", "3301:9120/4:40/150:600", std::nullopt, std::nullopt, std::nullopt},
    };
    auto snapshot = decode_lock_discovery(rows);
    REQUIRE(snapshot);
    REQUIRE(snapshot->functions.size() == 2);
    CHECK(snapshot->functions[0].body == "SELECT 1");
    CHECK_FALSE(snapshot->functions[0].procedure);
    CHECK(snapshot->functions[1].procedure);
    CHECK(snapshot->functions[1].body.empty());
    REQUIRE(snapshot->triggers.size() == 1);
    CHECK(snapshot->triggers[0].function_oid == "1");
    CHECK(snapshot->triggers[0].trigger_name == "jobs_lock");
    REQUIRE(snapshot->views.size() == 1);
    CHECK(snapshot->views[0].definition == " SELECT 1;");
    CHECK(snapshot->known_names == std::vector<std::string>{"count", "Orders"});
    CHECK(snapshot->fingerprint == "3301:9120/4:40/150:600");
    CHECK(discover_lock_names(*snapshot, {}).fingerprint == "3301:9120/4:40/150:600");

    CHECK_FALSE(decode_lock_discovery({R{"x", "1", "s", "n", "", "", ""}}));
    CHECK_FALSE(decode_lock_discovery({R{"f", "1", "s"}}));
    CHECK_FALSE(decode_lock_discovery({R{"f", "1", "s", "n", std::nullopt, "f", ""}}));
    CHECK(decode_lock_discovery({})->functions.empty());
}

TEST_CASE("the fingerprint's last part: the optional event trigger, installed and enabled") {
    CHECK(fingerprint_has_notify_trigger("3301:9120/4:40/150:600/1"));
    CHECK_FALSE(fingerprint_has_notify_trigger("3301:9120/4:40/150:600/0"));
    CHECK_FALSE(fingerprint_has_notify_trigger("3301:9120/4:40/150:600/"));
    CHECK_FALSE(fingerprint_has_notify_trigger(""));
    CHECK_FALSE(fingerprint_has_notify_trigger("no separator"));
    CHECK_FALSE(fingerprint_has_notify_trigger("3301:9120/4:40/150:600"));  // no count part
}

TEST_CASE("lock discovery: the catalog's known names come with the result, within a bound") {
    CatalogSnapshot snapshot;
    CHECK_FALSE(discover_lock_names(snapshot, {}).known_names);  // none read: calls not looked at
    snapshot.known_names = {"values", "count", "orders", "count"};
    const auto found = discover_lock_names(snapshot, {});
    REQUIRE(found.known_names);
    CHECK(found.known_names->names() == std::vector<std::string>{"count", "orders", "values"});
    snapshot.known_names.assign(kMaxKnownNames + 1, "x");
    CHECK_FALSE(discover_lock_names(snapshot, {}).known_names);
}
