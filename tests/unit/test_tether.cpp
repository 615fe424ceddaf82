// Decoding the tether probe's pg_locks rows (PostgreSQL docs §54.12: a bigint key is split into
// classid/objid with objsubid 1; two int4 keys are classid, objid with objsubid 2).
#include <doctest/doctest.h>

#include "proxy/tether.hpp"

using namespace pgtether;

TEST_CASE("probe rows decode into keys in both key spaces") {
    std::vector<Row> rows = {
        {"0", "42", "1", "ExclusiveLock"},
        {"1", "2", "2", "ShareLock"},
        {"4294967295", "4294967295", "1", "ExclusiveLock"},  // bigint key -1
        {"1", "0", "1", "ExclusiveLock"},                    // bigint key 2^32
        {"4294967295", "7", "2", "ExclusiveLock"},           // int4 keys -1, 7
    };
    auto keys = decode_advisory_locks(rows);
    REQUIRE(keys);
    REQUIRE(keys->size() == 5);
    CHECK((*keys)[0].bigint_key() == 42);
    CHECK((*keys)[0].describe() == "42 exclusive");
    CHECK_FALSE((*keys)[1].is_bigint);
    CHECK((*keys)[1].describe() == "1,2 shared");
    CHECK((*keys)[2].bigint_key() == -1);
    CHECK((*keys)[3].bigint_key() == 4294967296LL);
    CHECK((*keys)[4].key_text() == "-1,7");
    CHECK(describe_locks(*keys).starts_with("42 exclusive, 1,2 shared"));
}

TEST_CASE("no rows means no locks") {
    auto keys = decode_advisory_locks({});
    REQUIRE(keys);
    CHECK(keys->empty());
}

TEST_CASE("rows that are not the probe's are refused") {
    CHECK_FALSE(decode_advisory_locks({{"0", "42", "1"}}));
    CHECK_FALSE(decode_advisory_locks({{"0", "42", "3", "ExclusiveLock"}}));
    CHECK_FALSE(decode_advisory_locks({{"x", "42", "1", "ExclusiveLock"}}));
    CHECK_FALSE(decode_advisory_locks({{std::nullopt, "42", "1", "ExclusiveLock"}}));
    CHECK_FALSE(decode_advisory_locks({{"0", "42", "1", std::nullopt}}));
    CHECK_FALSE(decode_advisory_locks({{"4294967296", "42", "1", "ExclusiveLock"}}));
}

TEST_CASE("when to probe") {
    CHECK_FALSE(should_probe(LockTracking::Off, true));
    CHECK(should_probe(LockTracking::EveryTransaction, false));
    CHECK(should_probe(LockTracking::On, true));
    CHECK_FALSE(should_probe(LockTracking::On, false));
}
