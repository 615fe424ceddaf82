// The lock ledger (core/lock_ledger.hpp): stacking, shared and exclusive, both key spaces, and
// what a probe's uncounted answer means for later unlocks.
#include <doctest/doctest.h>

#include "core/lock_ledger.hpp"

using namespace pgtether;
using protocol::LockFunction;

namespace {

ResolvedLockCall on(LockFunction f, std::int64_t key) {
    const bool exclusive = f != LockFunction::LockShared && f != LockFunction::TryLockShared &&
                           f != LockFunction::UnlockShared;
    return {f, AdvisoryLockKey::bigint(key, exclusive)};
}

}  // namespace

TEST_CASE("keys in both key spaces, as pg_locks shows them") {
    auto big = AdvisoryLockKey::bigint(-1, true);
    CHECK(big.classid == 0xFFFFFFFFu);
    CHECK(big.objid == 0xFFFFFFFFu);
    CHECK(big.bigint_key() == -1);
    CHECK(AdvisoryLockKey::bigint(4294967296LL, false).describe() == "4294967296 shared");
    auto pair = AdvisoryLockKey::int4_pair(-1, 7, true);
    CHECK_FALSE(pair.is_bigint);
    CHECK(pair.key_text() == "-1,7");
    // The key spaces never meet: bigint 1 is not the pair (0, 1).
    CHECK_FALSE(AdvisoryLockKey::bigint(1, true) == AdvisoryLockKey::int4_pair(0, 1, true));
}

TEST_CASE("counted from statements: stacking and modes") {
    struct Step {
        LockFunction f;
        std::int64_t key;
        bool result;
        bool consistent;
        const char* after;
    };
    const Step steps[] = {
        {LockFunction::Lock, 1, true, true, "1 exclusive"},
        {LockFunction::Lock, 1, true, true, "1 exclusive x2"},
        {LockFunction::TryLockShared, 1, true, true, "1 exclusive x2, 1 shared"},
        {LockFunction::TryLock, 2, false, true, "1 exclusive x2, 1 shared"},  // not taken
        {LockFunction::Unlock, 1, true, true, "1 exclusive, 1 shared"},
        {LockFunction::UnlockShared, 1, true, true, "1 exclusive"},
        {LockFunction::UnlockShared, 1, false, true, "1 exclusive"},  // held no shared lock
        {LockFunction::Unlock, 1, true, true, ""},
        {LockFunction::Unlock, 1, false, true, ""},
        {LockFunction::LockShared, -5, true, true, "-5 shared"},
        {LockFunction::Lock, 3, true, true, "-5 shared, 3 exclusive"},
        {LockFunction::UnlockAll, 0, true, true, ""},
    };
    LockLedger ledger;
    for (const auto& s : steps) {
        CAPTURE(s.after);
        CHECK(ledger.apply(on(s.f, s.key), s.result) == s.consistent);
        CHECK(ledger.describe() == s.after);
    }
    CHECK(ledger.empty());
}

TEST_CASE("an outcome that contradicts the ledger says it was wrong") {
    LockLedger ledger;
    // Unlock succeeded for a lock the ledger did not have.
    CHECK_FALSE(ledger.apply(on(LockFunction::Unlock, 9), true));
    // Unlock failed for a lock the ledger counted.
    LockLedger held;
    REQUIRE(held.apply(on(LockFunction::Lock, 9), true));
    CHECK_FALSE(held.apply(on(LockFunction::Unlock, 9), false));
}

TEST_CASE("after a probe the counts are unknown; an unlock leaves 'maybe'") {
    LockLedger ledger;
    ledger.reset_from_probe({AdvisoryLockKey::bigint(7, true), AdvisoryLockKey::bigint(8, true)});
    CHECK_FALSE(ledger.has_maybe());
    // Taken again: still held, how often unknown.
    CHECK(ledger.apply(on(LockFunction::Lock, 8), true));
    // One unlock succeeded: it may have been the last one.
    CHECK(ledger.apply(on(LockFunction::Unlock, 7), true));
    CHECK(ledger.has_maybe());
    CHECK(ledger.describe() == "7 exclusive (maybe released), 8 exclusive");
    // Another unlock that fails settles it: 7 is gone.
    CHECK(ledger.apply(on(LockFunction::Unlock, 7), false));
    CHECK_FALSE(ledger.has_maybe());
    CHECK(ledger.describe() == "8 exclusive");
    // A 'maybe' that is taken again is held for sure.
    CHECK(ledger.apply(on(LockFunction::Unlock, 8), true));
    CHECK(ledger.apply(on(LockFunction::Lock, 8), true));
    CHECK_FALSE(ledger.has_maybe());
    // Unlocking an uncounted lock and failing contradicts it.
    CHECK_FALSE(ledger.apply(on(LockFunction::Unlock, 8), false));
}

TEST_CASE("an unknown ledger lists nothing for sure until a probe or unlock_all") {
    LockLedger ledger;
    REQUIRE(ledger.apply(on(LockFunction::Lock, 1), true));
    ledger.mark_unknown();
    CHECK_FALSE(ledger.complete());
    CHECK(ledger.needs_probe());
    CHECK_FALSE(ledger.holds_nothing());
    CHECK(ledger.describe() == "1 exclusive (maybe released), others unknown");
    // An unlock of a lock it did not list is no contradiction now.
    CHECK(ledger.apply(on(LockFunction::Unlock, 9), true));
    CHECK(ledger.apply(on(LockFunction::Unlock, 1), false));
    CHECK(ledger.describe() == "others unknown");
    CHECK_FALSE(ledger.holds_nothing());
    // unlock_all settles it.
    CHECK(ledger.apply(on(LockFunction::UnlockAll, 0), true));
    CHECK(ledger.holds_nothing());
    // So does a probe.
    ledger.mark_unknown();
    ledger.reset_from_probe({});
    CHECK(ledger.holds_nothing());
}
