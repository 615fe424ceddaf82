// proxy/server/scram_key_cache.hpp: a server login's SCRAM keys derived once per password, salt
// and iteration count, and the least recently used dropped first.
#include <doctest/doctest.h>

#include <string>

#include "protocol/scram.hpp"
#include "proxy/server/scram_key_cache.hpp"

using pgtether::ScramKeyCache;
using pgtether::protocol::derive_scram_client_keys;

TEST_CASE("ScramKeyCache: derived once per password, salt and iteration count") {
    ScramKeyCache cache;
    auto first = cache.keys("secret", "salt-1", 64);
    REQUIRE(first);
    auto expected = derive_scram_client_keys("secret", "salt-1", 64);
    REQUIRE(expected);
    CHECK(first->client_key == expected->client_key);
    CHECK(first->server_key == expected->server_key);
    CHECK(cache.derivations() == 1);
    // Again: remembered.
    auto again = cache.keys("secret", "salt-1", 64);
    REQUIRE(again);
    CHECK(again->client_key == expected->client_key);
    CHECK(cache.derivations() == 1);
    // Any input different: derived anew (a changed password, a new salt, other iterations), also
    // when the parts only move across their boundary.
    CHECK(cache.keys("secret2", "salt-1", 64));
    CHECK(cache.keys("secret", "salt-2", 64));
    CHECK(cache.keys("secret", "salt-1", 65));
    CHECK(cache.keys("secrets", "alt-1", 64));
    CHECK(cache.derivations() == 5);
    auto other = cache.keys("secret", "salt-2", 64);
    REQUIRE(other);
    CHECK(other->client_key != expected->client_key);
    CHECK(cache.derivations() == 5);
}

TEST_CASE("ScramKeyCache: bounded, the least recently used goes first") {
    ScramKeyCache cache;
    const auto salt = [](std::size_t i) { return "salt-" + std::to_string(i); };
    for (std::size_t i = 0; i < ScramKeyCache::kCapacity; ++i) CHECK(cache.keys("p", salt(i), 8));
    CHECK(cache.derivations() == ScramKeyCache::kCapacity);
    CHECK(cache.keys("p", salt(0), 8));  // used again: now the most recent
    CHECK(cache.derivations() == ScramKeyCache::kCapacity);
    CHECK(cache.keys("p", "one more", 8));  // full: salt(1), the least recent, is dropped
    CHECK(cache.derivations() == ScramKeyCache::kCapacity + 1);
    CHECK(cache.keys("p", salt(0), 8));
    CHECK(cache.derivations() == ScramKeyCache::kCapacity + 1);
    CHECK(cache.keys("p", salt(1), 8));
    CHECK(cache.derivations() == ScramKeyCache::kCapacity + 2);
}
