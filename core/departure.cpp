#include "core/departure.hpp"

#include "core/tether_policy.hpp"

namespace pgtether {

DepartureDecision decide_departure(const Departure& d) {
    using Action = DepartureDecision::Action;
    if (d.internal_query_running) return {Action::FinishQuery, nullptr};
    // The backend would read whatever comes next as the rest of the message: no clean-up query
    // can reach it (PgBouncer closes such servers too).
    if (d.mid_message) return {Action::Close, "client left in the middle of a message"};
    // A library loaded into the backend cannot be unloaded: nobody else may use it.
    if (d.tether_kinds & kStateLoad) return {Action::Close, "its client used LOAD"};
    // In session mode the client never shared its backend: leaving between transactions is the
    // ordinary end of a session, handled by server_reset_query (plan_reset).
    const bool tethered = (d.tether_kinds & kTetherKinds) != 0;
    const bool clean = d.backend_idle && (d.session_mode || (!tethered && d.effects == 0));
    return {clean ? Action::Release : Action::Scrub, nullptr};
}

DepartureDecision decide_orphaned_query_end(bool was_probe, bool clean) {
    using Action = DepartureDecision::Action;
    if (was_probe) return {Action::Scrub, nullptr};
    if (clean) return {Action::Release, nullptr};
    return {Action::Close, "failed"};
}

CleanupPlan plan_scrub(const ScrubState& s) {
    CleanupPlan plan;
    // A probe pipelined behind the client's last statement is answered too (and thrown away).
    plan.extra_ready = s.left_running + (s.probe_pipelined ? 1 : 0);
    plan.copy_fail = s.in_copy_in;  // the server then reports an error and awaits Sync
    if (s.unsynced || s.in_copy_in) {
        plan.sync = true;  // ends error-skipping too, and gets its own ReadyForQuery
        ++plan.extra_ready;
    }
    // Whether the transaction block is still open is known only once the drained requests have
    // answered; ROLLBACK is harmless (a warning) when none is.
    if (plan.extra_ready > 0 || s.transaction_open) plan.queries.emplace_back(kRollback);
    // With nothing tracked pgtether behaves like PgBouncer: state stays where the client left it.
    plan.probe_kinds = s.tracked & kProbedKinds;
    if (plan.probe_kinds != 0) plan.queries.emplace_back(kDiscardAll);
    // A query the client left running (maybe waiting for a lock) is cancelled rather than waited
    // for; a COPY FROM STDIN ends with the CopyFail instead.
    plan.cancel = s.left_running > 0 && !s.in_copy_in;
    return plan;
}

CleanupPlan plan_reset(const std::string& reset_query, std::uint32_t tracked) {
    // server_reset_query is the operator's choice of what a session leaves behind (PgBouncer's
    // semantics), with one exception: a backend never serves another client while it holds a
    // departed client's advisory locks, so with tracking on those are released and verified.
    CleanupPlan plan;
    plan.queries.push_back(reset_query);
    plan.probe_kinds = tracked & (kStateAdvisoryLock | kStateSettings);
    if (plan.probe_kinds & kStateAdvisoryLock) plan.queries.emplace_back(kUnlockAllQuery);
    return plan;
}

CleanupPlan plan_sweep(std::uint32_t tracked) {
    CleanupPlan plan;
    plan.probe_kinds = tracked & kProbedKinds & ~static_cast<std::uint32_t>(kStateSettings);
    return plan;
}

CleanupOutcome decide_cleanup_outcome(CleanupKind kind, const CleanupAnswer& answer) {
    using Action = CleanupOutcome::Action;
    switch (kind) {
        case CleanupKind::Reset:
            return {answer.verified && answer.present == 0 ? Action::Release : Action::Close};
        case CleanupKind::Scrub:
            if (answer.cancelled && answer.scrub_repeats < kMaxScrubRepeats) return {Action::Rerun};
            return {answer.verified && answer.present == 0 ? Action::Release : Action::Close};
        case CleanupKind::Sweep:
            // A leak is not the backend's fault: clean it like a departed client's.
            if (!answer.verified) return {Action::Close};
            return {answer.present == 0 ? Action::Release : Action::ScrubLeak};
    }
    return {Action::Close};
}


}  // namespace pgtether
