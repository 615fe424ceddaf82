// The tether's decisions (core/tether_policy.hpp), table by table: what happens at a
// transaction's end, and after a probe.
#include <doctest/doctest.h>

#include "core/tether_policy.hpp"
#include "protocol/sql_scanner.hpp"

using namespace pgtether;
using Action = TransactionEndDecision::Action;

namespace {

constexpr std::uint32_t kAll = kTetherKinds | kStateSettings;
constexpr std::uint32_t kLock = protocol::kEffectAdvisoryLock;

LockLedger holding(std::int64_t key) {
    LockLedger l;
    REQUIRE(l.apply({protocol::LockFunction::Lock, AdvisoryLockKey::bigint(key, true)}, true));
    return l;
}

LockLedger maybe_holding(std::int64_t key) {
    LockLedger l;
    l.reset_from_probe({AdvisoryLockKey::bigint(key, true)});
    REQUIRE(l.apply({protocol::LockFunction::Unlock, AdvisoryLockKey::bigint(key, true)}, true));
    return l;
}

}  // namespace

TEST_CASE("transaction end: release, keep or probe") {
    const LockLedger none;
    const LockLedger one = holding(1);
    const LockLedger maybe = maybe_holding(1);
    struct Case {
        const char* name;
        TransactionEnd end;
        TransactionEndDecision want;
    };
    const Case cases[] = {
        {"plain transaction, untethered: release",
         {0, kAll, false, 0, false, false, false, nullptr},
         {Action::Release, 0, 0, false}},
        {"plain transaction, tethered: keep",
         {0, kAll, false, kStateAdvisoryLock, false, false, false, nullptr},
         {Action::Keep, 0, kStateAdvisoryLock, false}},
        {"lock statement not accounted exactly: probe",
         {kLock, kAll, false, 0, false, true, false, &none},
         {Action::Probe, kStateAdvisoryLock, 0, false}},
        {"exact lock: tethered without a probe",
         {kLock, kAll, false, 0, false, true, true, &one},
         {Action::Keep, 0, kStateAdvisoryLock, true}},
        {"exact unlock of the last lock: untethered without a probe",
         {kLock, kAll, false, kStateAdvisoryLock, false, true, true, &none},
         {Action::Release, 0, 0, true}},
        {"exact, but every_transaction: probe",
         {kLock, kAll, true, 0, false, true, true, &one},
         {Action::Probe, kAll & kProbedKinds, 0, false}},
        {"exact lock plus SET: the settings are still probed",
         {kLock | protocol::kEffectSet, kAll, false, 0, false, true, true, &one},
         {Action::Probe, kStateSettings, kStateAdvisoryLock, true}},
        {"exact unlock leaving a 'maybe': kept one more transaction without a probe",
         {kLock, kAll, false, kStateAdvisoryLock, false, true, true, &maybe},
         {Action::Keep, 0, kStateAdvisoryLock, true}},
        {"'maybe' still there at the next end: probe",
         {0, kAll, false, kStateAdvisoryLock, true, false, false, nullptr},
         {Action::Probe, kStateAdvisoryLock, kStateAdvisoryLock, false}},
        {"'maybe' settled by an exact statement: no probe",
         {kLock, kAll, false, kStateAdvisoryLock, true, true, true, &none},
         {Action::Release, 0, 0, true}},
        {"locks not tracked: nothing to do",
         {kLock, kAll & ~std::uint32_t{kStateAdvisoryLock}, false, 0, false, true, true, &one},
         {Action::Release, 0, 0, false}},
        {"LOAD tethers for good, without a probe",
         {protocol::kEffectLoad, kAll, false, 0, false, false, false, nullptr},
         {Action::Keep, 0, kStateLoad, false}},
        {"temp table with an exact unlock: the temp tables are probed",
         {kLock | protocol::kEffectTempObject, kAll, false, kStateAdvisoryLock, false, true, true,
          &none},
         {Action::Probe, kStateTempTable, 0, true}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK(decide_transaction_end(c.end) == c.want);
    }
}

TEST_CASE("transaction end with deferred lock probes (tether_probe_delay > 0)") {
    const LockLedger none;
    const LockLedger one = holding(1);
    LockLedger unknown;
    unknown.mark_unknown();
    auto deferred = [](TransactionEnd e) {
        e.defer_lock_probes = true;
        return decide_transaction_end(e);
    };
    // Uncounted locks: tethered, no probe, the ledger marked unknown.
    CHECK(deferred({kLock, kAll, false, 0, false, true, false, &none}) ==
          TransactionEndDecision{Action::Keep, 0, kStateAdvisoryLock, true, true});
    // Other kinds need a probe anyway: it checks the locks too.
    CHECK(deferred({kLock | protocol::kEffectTempObject, kAll, false, 0, false, true, false, &none})
              .probe_kinds == (kStateAdvisoryLock | kStateTempTable));
    // Counted exactly on top of an unknown ledger: still tethered, no probe.
    LockLedger still_unknown = unknown;
    REQUIRE(still_unknown.apply(
        {protocol::LockFunction::Unlock, AdvisoryLockKey::bigint(5, true)}, true));
    CHECK(deferred({kLock, kAll, false, kStateAdvisoryLock, false, true, true, &still_unknown}) ==
          TransactionEndDecision{Action::Keep, 0, kStateAdvisoryLock, true, false});
    // unlock_all settles everything: untethered without a probe.
    LockLedger settled = unknown;
    REQUIRE(settled.apply({protocol::LockFunction::UnlockAll, {}}, true));
    CHECK(deferred({kLock, kAll, false, kStateAdvisoryLock, false, true, true, &settled}) ==
          TransactionEndDecision{Action::Release, 0, 0, true, false});
    // Exact as before.
    CHECK(deferred({kLock, kAll, false, 0, false, true, true, &one}) ==
          TransactionEndDecision{Action::Keep, 0, kStateAdvisoryLock, true, false});
    // every_transaction is not deferred.
    CHECK(deferred({kLock, kAll, true, 0, false, true, false, &none}).action == Action::Probe);
}

TEST_CASE("an idle tether is probed after the delay, or at once when others wait") {
    struct Case {
        const char* name;
        IdleTether t;
        bool probe;
    };
    const Case cases[] = {
        {"ledger settled: never", {false, true, 5000, 5000, 1000, true}, false},
        {"backend busy: not now", {true, false, 5000, 5000, 1000, true}, false},
        {"idle long enough", {true, true, 1000, 5000, 1000, false}, true},
        {"not idle long enough", {true, true, 999, 5000, 1000, false}, false},
        {"others wait: at once", {true, true, 0, 5000, 1000, true}, true},
        {"probed a moment ago (it failed): not in a loop", {true, true, 5000, 10, 1000, true},
         false},
        {"delay 0: probes run at transaction ends instead", {true, true, 5000, 5000, 0, true},
         false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK(should_probe_idle_tether(c.t) == c.probe);
    }
}

TEST_CASE("after a probe") {
    const std::uint32_t present_lock = kStateAdvisoryLock;
    const std::uint32_t present_none = 0;
    // What was probed is replaced by what is present; the rest stays.
    CHECK(tether_kinds_after_probe(kStateTempTable, kStateAdvisoryLock, &present_lock) ==
          (kStateTempTable | kStateAdvisoryLock));
    CHECK(tether_kinds_after_probe(kStateAdvisoryLock, kStateAdvisoryLock, &present_none) == 0);
    // Settings are probed but never tether.
    CHECK(tether_kinds_after_probe(0, kStateSettings | kStateAdvisoryLock, &present_none) == 0);
    // A failed probe keeps the client tethered, and a later good one clears that.
    CHECK(tether_kinds_after_probe(0, kStateAdvisoryLock, nullptr) == kStateUnknown);
    CHECK(tether_kinds_after_probe(kStateUnknown, kStateAdvisoryLock, &present_none) == 0);
}
