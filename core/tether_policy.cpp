#include "core/tether_policy.hpp"

#include "protocol/sql_scanner.hpp"

namespace pgtether {

std::uint32_t probe_kinds_for(std::uint32_t effects, std::uint32_t tracked,
                              bool every_transaction) {
    if (every_transaction) return tracked & kProbedKinds;
    std::uint32_t kinds = 0;
    if (effects & protocol::kEffectAdvisoryLock) kinds |= kStateAdvisoryLock;
    if (effects & protocol::kEffectTempObject) kinds |= kStateTempTable;
    if (effects & protocol::kEffectListen) kinds |= kStateListen;
    if (effects & protocol::kEffectCursor) kinds |= kStateCursor;
    if (effects & protocol::kEffectSqlPrepare) kinds |= kStatePrepare;
    if (effects & protocol::kEffectSet) kinds |= kStateSettings;
    // DISCARD can end any kind of state (DISCARD ALL ends all of them).
    if (effects & protocol::kEffectDiscard) kinds |= kProbedKinds;
    // A DO block may have done anything its text does not show.
    if (effects & protocol::kEffectOpaque) kinds |= kProbedKinds;
    return kinds & tracked & kProbedKinds;
}

TransactionEndDecision decide_transaction_end(const TransactionEnd& end) {
    TransactionEndDecision d;
    std::uint32_t kinds = end.tether_kinds;
    // LOAD cannot be undone and leaves nothing to probe: the client keeps this backend for good.
    if ((end.effects & protocol::kEffectLoad) && (end.tracked & kStateLoad)) kinds |= kStateLoad;
    std::uint32_t probe = probe_kinds_for(end.effects, end.tracked, end.every_transaction);
    const bool locks_tracked = (end.tracked & kStateAdvisoryLock) != 0;
    const bool lock_bit_only = (probe & ~std::uint32_t{kStateAdvisoryLock}) == 0;
    if (locks_tracked && !end.every_transaction && end.locks_armed && end.locks_exact &&
        end.exact_ledger) {
        // Every lock-relevant statement said what it did: the ledger is the truth.
        probe &= ~std::uint32_t{kStateAdvisoryLock};
        d.adopt_ledger = true;
        if (end.exact_ledger->holds_nothing()) {
            kinds &= ~std::uint32_t{kStateAdvisoryLock};
        } else {
            kinds |= kStateAdvisoryLock;
        }
        // Without deferral, a lock that may already be released keeps the tether for one more
        // transaction at most: if it is still uncertain at the next transaction's end, the probe
        // decides. With deferral the idle probe settles it.
        if (!end.defer_lock_probes && end.ledger_had_maybe && end.exact_ledger->needs_probe()) {
            probe |= kStateAdvisoryLock;
        }
    } else if (locks_tracked && !end.every_transaction && end.defer_lock_probes &&
               (probe & kStateAdvisoryLock) && lock_bit_only) {
        // The locks could not be counted and nothing else needs a probe: stay tethered, probe
        // later (should_probe_idle_tether). Tethered longer than needed is safe; untethered while
        // holding a lock never is.
        probe = 0;
        d.adopt_ledger = true;
        d.ledger_unknown = true;
        kinds |= kStateAdvisoryLock;
    } else if (locks_tracked && !end.every_transaction && !end.defer_lock_probes &&
               end.ledger_had_maybe) {
        probe |= kStateAdvisoryLock;
    }
    d.tether_kinds = kinds;
    d.probe_kinds = probe;
    if (probe != 0) {
        d.action = TransactionEndDecision::Action::Probe;
    } else if (kinds & kTetherKinds) {
        d.action = TransactionEndDecision::Action::Keep;
    } else {
        d.action = TransactionEndDecision::Action::Release;
    }
    return d;
}

bool should_probe_idle_tether(const IdleTether& t) {
    if (!t.ledger_needs_probe || !t.backend_idle || t.delay_ms == 0) return false;
    if (t.since_last_probe_ms < t.delay_ms) return false;  // a probe that failed: not in a loop
    return t.others_waiting || t.idle_ms >= t.delay_ms;
}

std::uint32_t tether_kinds_after_probe(std::uint32_t kinds_before, std::uint32_t probed,
                                       const std::uint32_t* present) {
    if (!present) return kinds_before | kStateUnknown;
    const std::uint32_t observed = probed & kTetherKinds;
    return ((kinds_before & ~observed) | (*present & observed)) & ~std::uint32_t{kStateUnknown};
}

}  // namespace pgtether
