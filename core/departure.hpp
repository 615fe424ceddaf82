// What happens to a backend when its client is done with it, as values (docs/advisory-locks.md,
// "Scrub"; docs/architecture.md, "Servers"): whether a departing client's backend is released,
// scrubbed or closed, and the clean-up plans (the internal statements and checks) that scrub and
// reset run. Pure: Client::detach_from_server and Server::scrub / reset carry the values out. The
// transaction-end decision lives in core/tether_policy.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pgtether {

// What a client leaving its linked backend depends on.
struct Departure {
    // pgtether's own query for the client runs (check, parameter sync, probe): the server
    // finishes it and decides alone (see decide_orphaned_query_end).
    bool internal_query_running = false;
    // The client left inside a message pgtether was streaming to the backend (a large CopyData).
    bool mid_message = false;
    bool backend_idle = false;    // PipelineTracker::idle(): nothing owed, no transaction block
    bool session_mode = false;    // pool_mode = session
    std::uint32_t tether_kinds = 0;  // the client's tether (StateKind flags)
    std::uint32_t effects = 0;       // the scanner's findings in the unfinished transaction
};

struct DepartureDecision {
    enum class Action {
        FinishQuery,  // unlink only: the running query's end hands the server on
        Release,      // clean: back to the pool (Pool::release)
        Scrub,        // roll back and clean up first (plan_scrub), verified by the probe
        Close,        // no clean-up can make it safe: close the backend
    };
    Action action = Action::Release;
    const char* reason = nullptr;  // why it is closed (Close)

    friend bool operator==(const DepartureDecision& a, const DepartureDecision& b) {
        return a.action == b.action && (a.action != Action::Close ||
                                        std::string(a.reason) == std::string(b.reason));
    }
};

[[nodiscard]] DepartureDecision decide_departure(const Departure& departure);

// pgtether's query for a client ended after the client left (Departure::internal_query_running):
// a probe's client may have left session state behind (scrub), a clean check or parameter sync
// leaves the backend as it was (release), anything else is closed.
[[nodiscard]] DepartureDecision decide_orphaned_query_end(bool was_probe, bool clean);

// A clean-up run on a backend in one write: raw frontend messages first, then simple queries,
// then the state probe for `probe_kinds`, which must find nothing.
struct CleanupPlan {
    bool copy_fail = false;  // CopyFail: end a COPY FROM STDIN the client abandoned
    bool sync = false;       // Sync: close an unsynced extended batch (its ReadyForQuery counts)
    std::vector<std::string> queries;
    std::uint32_t probe_kinds = 0;
    // ReadyForQuery messages owed to what the client left in flight (and the Sync above), to be
    // consumed before the plan's own.
    int extra_ready = 0;
    bool cancel = false;  // cancel the query the client left running rather than wait for it

    friend bool operator==(const CleanupPlan&, const CleanupPlan&) = default;
};

// What the backend owes and holds when its client left (from its PipelineTracker).
struct ScrubState {
    int left_running = 0;           // requests the client left unanswered (outstanding())
    bool probe_pipelined = false;   // a probe sent behind the client's last statement
    bool in_copy_in = false;        // a COPY FROM STDIN is open
    bool unsynced = false;          // an extended batch without its Sync
    bool transaction_open = false;  // the last ReadyForQuery was not 'I'
    std::uint32_t tracked = 0;      // tracked_kinds(config)
};

inline constexpr const char* kRollback = "ROLLBACK";
inline constexpr const char* kDiscardAll = "DISCARD ALL";
inline constexpr const char* kUnlockAllQuery = "SELECT pg_catalog.pg_advisory_unlock_all()";

// The scrub: CopyFail, Sync, ROLLBACK, DISCARD ALL as needed, then the probe.
[[nodiscard]] CleanupPlan plan_scrub(const ScrubState& state);
// server_reset_query before reuse; with advisory-lock tracking also unlock_all, verified, and
// the settings read back so the next client's replay starts from the truth.
[[nodiscard]] CleanupPlan plan_reset(const std::string& reset_query, std::uint32_t tracked);
// The leak sweep of an idle backend: the probe alone (settings are not leaks).
[[nodiscard]] CleanupPlan plan_sweep(std::uint32_t tracked);

// What follows a clean-up's answer: the backend goes back to the pool, the scrub runs again, the
// sweep's find is scrubbed, or the backend is closed (never reused with state nobody can vouch
// for).
enum class CleanupKind : std::uint8_t { Reset, Scrub, Sweep };

struct CleanupAnswer {
    // The verifying probe answered (the queries ran clean and completely, the rows decoded).
    bool verified = false;
    std::uint32_t present = 0;  // the tracked kinds the probe still found
    // The clean-up failed with query_canceled (57014): a cancel meant for what the departed
    // client left running struck the scrub's own statements (see decide_cleanup_outcome).
    bool cancelled = false;
    int scrub_repeats = 0;  // scrubs already run again for this reason
};

struct CleanupOutcome {
    enum class Action : std::uint8_t {
        Release,    // clean: back to the pool
        Rerun,      // a cancelled scrub: run it again
        ScrubLeak,  // the sweep found state on an idle backend: scrub it
        Close,      // the clean-up failed or state remains
    };
    Action action = Action::Close;
    friend bool operator==(const CleanupOutcome&, const CleanupOutcome&) = default;
};

// PostgreSQL may deliver the scrub's cancel twice (the postmaster signals the backend and its
// process group) or late; the scrub's statements are idempotent, so it runs again, this often.
inline constexpr int kMaxScrubRepeats = 3;

[[nodiscard]] CleanupOutcome decide_cleanup_outcome(CleanupKind kind, const CleanupAnswer& answer);

// Why a server comes back to its pool: the argument of Pool::release, the one way back.
enum class ReleaseReason : std::uint8_t {
    LoginDone,       // the release that ends its login
    ClientDone,      // its client's use ended: a transaction's end, the client left cleanly, or
                     // left while pgtether's query for it ran and that ended clean
    CancelsArrived,  // it waited for the cancels meant for its last client (WaitForCancels)
    Scrubbed,        // a scrub cleaned what a departed client left
    ResetRan,        // server_reset_query ran, verified (the Reset plan, done)
    // pgtether's own query on an idle backend -- leak sweep, catalog check, role check --
    // changed nothing: no server_reset_query for it, and it is not use (server_idle_timeout and
    // server_check_delay keep counting from the last client's release).
    Unused,
};

// Pool::release, the one way a server goes back to the pool: what it does next.
struct ReleaseFacts {
    ReleaseReason reason = ReleaseReason::ClientDone;
    bool closing = false;   // already closing: nothing to do
    bool retired = false;   // a reload or RECONNECT retired it: close instead of reuse
    std::uint64_t age_ms = 0;       // since it connected
    std::optional<std::uint64_t> lifetime_ms;  // server_lifetime (0: used once), when known
    bool client_linked = false;     // still linked (server_lifetime waits for the client)
    // (reason LoginDone: server_lifetime does not apply yet, or a lifetime of 0 would close every
    // server before its first client -- PgBouncer: state != SV_LOGIN.)
    bool role_fits = true;          // its host's role still serves target_session_attrs
    bool paused = false;            // PAUSE: servers close as they come back
    bool cancels_in_flight = false; // a cancel for its last client is still on its way
    // Session mode or server_reset_query_always, with a server_reset_query (never due after
    // the login, after the reset itself, or after a query that changed nothing).
    bool reset_due = false;
};

struct ReleasePlan {
    enum class Action : std::uint8_t {
        Nothing,         // already closing
        Close,           // for `why`
        WaitForCancels,  // BeingCancelled until the cancel arrives (then released again)
        Reset,           // server_reset_query first (then released again)
        Return,          // clean: to a client owed one, or the idle list
    };
    enum class Why : std::uint8_t { None, Retired, Lifetime, RoleChanged, Paused };
    Action action = Action::Return;
    Why why = Why::None;
    // Return: the release counts as use -- the server's idle time starts now. Not for Unused,
    // whose idle time goes on from the last client's release.
    bool counts_as_use = true;
    friend bool operator==(const ReleasePlan&, const ReleasePlan&) = default;
};

// Inline: it runs at every release (every transaction in transaction pooling).
[[nodiscard]] inline ReleasePlan plan_release(const ReleaseFacts& facts) {
    using Action = ReleasePlan::Action;
    using Why = ReleasePlan::Why;
    const bool after_login = facts.reason == ReleaseReason::LoginDone;
    if (facts.closing) return {Action::Nothing, Why::None};
    if (facts.retired) return {Action::Close, Why::Retired};
    if (facts.lifetime_ms && facts.age_ms >= *facts.lifetime_ms && !facts.client_linked &&
        !after_login) {
        return {Action::Close, Why::Lifetime};
    }
    // A standby promoted under a standby-only database (or the reverse): it is what it was not
    // chosen for (target_session_attrs).
    if (!facts.role_fits) return {Action::Close, Why::RoleChanged};
    // PAUSE waits for every server of the database to close; released ones go right away.
    if (facts.paused) return {Action::Close, Why::Paused};
    // The backend must not serve someone else before the cancel meant for its last client has
    // arrived.
    if (facts.cancels_in_flight) return {Action::WaitForCancels, Why::None};
    // Not after the login: no client has used it yet, and a connect_query's settings are meant
    // to stay. (A reset there kept the first server busy while the first client came, which
    // then got a second server PgBouncer would not have opened.)
    const bool reset_needed = facts.reason != ReleaseReason::LoginDone &&
                              facts.reason != ReleaseReason::ResetRan &&
                              facts.reason != ReleaseReason::Unused;
    if (facts.reset_due && reset_needed) return {Action::Reset, Why::None};
    return {Action::Return, Why::None, facts.reason != ReleaseReason::Unused};
}

}  // namespace pgtether
