// The tether's probe: which kinds a transaction is probed for, the probe's SQL, and decoding its
// rows (PostgreSQL docs §54.12 for pg_locks: a bigint key is split into classid/objid with
// objsubid 1; two int4 keys are classid, objid with objsubid 2).
#include <doctest/doctest.h>

#include "core/state_probe.hpp"
#include "protocol/sql_scanner.hpp"

using namespace pgtether;
using namespace pgtether::protocol;

namespace {
Row advisory(const char* classid, const char* objid, const char* objsubid, const char* mode) {
    return {"advisory", classid, objid, objsubid, mode};
}
}  // namespace

TEST_CASE("advisory rows decode into keys in both key spaces") {
    std::vector<Row> rows = {
        advisory("0", "42", "1", "ExclusiveLock"),
        advisory("1", "2", "2", "ShareLock"),
        advisory("4294967295", "4294967295", "1", "ExclusiveLock"),  // bigint key -1
        advisory("1", "0", "1", "ExclusiveLock"),                    // bigint key 2^32
        advisory("4294967295", "7", "2", "ExclusiveLock"),           // int4 keys -1, 7
    };
    auto report = decode_state_probe(rows);
    REQUIRE(report);
    CHECK(report->present == kStateAdvisoryLock);
    const auto& keys = report->locks;
    // Sorted: bigint keys first, then int4 pairs, each in numeric order.
    REQUIRE(keys.size() == 5);
    CHECK(keys[0].bigint_key() == -1);
    CHECK(keys[1].bigint_key() == 42);
    CHECK(keys[1].describe() == "42 exclusive");
    CHECK(keys[2].bigint_key() == 4294967296LL);
    CHECK_FALSE(keys[3].is_bigint);
    CHECK(keys[3].key_text() == "-1,7");
    CHECK(keys[4].describe() == "1,2 shared");
    CHECK(describe_locks(keys) ==
          "-1 exclusive, 42 exclusive, 4294967296 exclusive, -1,7 exclusive, 1,2 shared");
}

TEST_CASE("other kinds and settings decode too") {
    std::vector<Row> rows = {
        {"temp", "2", "scratch", std::nullopt, std::nullopt},
        {"listen", "1", "jobs", std::nullopt, std::nullopt},
        {"setting", "search_path", "app, public", std::nullopt, std::nullopt},
        {"setting", "myapp.tenant", std::nullopt, std::nullopt, std::nullopt},  // never set
    };
    auto report = decode_state_probe(rows);
    REQUIRE(report);
    CHECK(report->present == (kStateTempTable | kStateListen));
    REQUIRE(report->summaries.size() == 2);
    CHECK(report->summaries[0].second == "2: scratch, ...");
    CHECK(report->summaries[1].second == "1: jobs");
    CHECK(report->settings.size() == 1);
    REQUIRE(report->settings.find("search_path"));
    CHECK(*report->settings.find("search_path") == "app, public");
    CHECK(describe_state(report->present, describe_locks(report->locks), report->summaries) ==
          "temp tables 2: scratch, ...; listen 1: jobs");
}

TEST_CASE("no rows means no state; malformed rows are refused") {
    auto empty = decode_state_probe({});
    REQUIRE(empty);
    CHECK(empty->present == 0);
    CHECK_FALSE(decode_state_probe({{"advisory", "0", "42", "1"}}));
    CHECK_FALSE(decode_state_probe({advisory("0", "42", "3", "ExclusiveLock")}));
    CHECK_FALSE(decode_state_probe({advisory("x", "42", "1", "ExclusiveLock")}));
    CHECK_FALSE(decode_state_probe({{std::nullopt, "0", "42", "1", "ExclusiveLock"}}));
    CHECK_FALSE(decode_state_probe({{"advisory", "0", "42", "1", std::nullopt}}));
    CHECK_FALSE(decode_state_probe({advisory("4294967296", "42", "1", "ExclusiveLock")}));
    CHECK_FALSE(decode_state_probe({{"mystery", "1", "x", std::nullopt, std::nullopt}}));
}

TEST_CASE("what a transaction is probed for") {
    Config config;
    CHECK(kinds_to_probe(kEffectNone, config) == 0);
    CHECK(kinds_to_probe(kEffectAdvisoryLock, config) == kStateAdvisoryLock);
    CHECK(kinds_to_probe(kEffectTempObject | kEffectListen, config) ==
          (kStateTempTable | kStateListen));
    CHECK(kinds_to_probe(kEffectSet, config) == kStateSettings);
    CHECK(kinds_to_probe(kEffectDiscard, config) == kProbedKinds);
    // A DO block may have done anything its text does not show.
    CHECK(kinds_to_probe(kEffectOpaque, config) == kProbedKinds);
    // LOAD is never probed: it cannot be undone.
    CHECK(kinds_to_probe(kEffectLoad, config) == 0);

    config.session_state_temp_tables = StateHandling::Ignore;
    CHECK(kinds_to_probe(kEffectTempObject, config) == 0);
    config.advisory_lock_tracking = LockTracking::Off;
    CHECK(kinds_to_probe(kEffectAdvisoryLock, config) == 0);
    config.advisory_lock_tracking = LockTracking::EveryTransaction;
    CHECK(kinds_to_probe(kEffectNone, config) == (kProbedKinds & ~kStateTempTable));
}

TEST_CASE("the probe asks only for the kinds requested") {
    auto sql = build_state_probe(kStateAdvisoryLock, {}, "app");
    CHECK(sql.find("pg_locks") != std::string::npos);
    CHECK(sql.find("UNION") == std::string::npos);
    sql = build_state_probe(kStateTempTable | kStateSettings, {"myapp.tenant"}, "app");
    CHECK(sql.find("pg_my_temp_schema") != std::string::npos);
    CHECK(sql.find("pg_settings") != std::string::npos);
    CHECK(sql.find("E'myapp.tenant'") != std::string::npos);
    CHECK(sql.find("pg_locks") == std::string::npos);
    // Who the session acts as, which pg_settings does not list: a role, and an authorization
    // other than the login user's.
    CHECK(sql.find("current_setting('role')") != std::string::npos);
    CHECK(sql.find("current_setting('session_authorization') <> E'app'") != std::string::npos);
    CHECK(build_state_probe(0, {}, "app").empty());
}
