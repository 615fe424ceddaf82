// The tether's decisions as values (docs/advisory-locks.md, docs/session-state.md): what happens
// to a client's backend when a transaction ends and when a probe answers. Pure: the server
// connection executes what these return.
#pragma once

#include <cstdint>

#include "core/lock_ledger.hpp"

namespace pgtether {

// Kinds of session state, as bit flags.
enum StateKind : std::uint32_t {
    kStateAdvisoryLock = 1u << 0,
    kStateTempTable = 1u << 1,   // relations in pg_my_temp_schema()
    kStateListen = 1u << 2,      // pg_listening_channels()
    kStateCursor = 1u << 3,      // WITH HOLD cursors (pg_cursors.is_holdable)
    kStatePrepare = 1u << 4,     // SQL-level PREPARE (pg_prepared_statements.from_sql)
    kStateLoad = 1u << 5,        // LOAD: cannot be undone, so never probed (see tether rules)
    kStateSettings = 1u << 6,    // SET / RESET / set_config: replayed, never a tether
    kStateUnknown = 1u << 7,     // a probe failed: tethered to be safe
};
// The kinds that tether (everything but settings).
inline constexpr std::uint32_t kTetherKinds = kStateAdvisoryLock | kStateTempTable |
                                               kStateListen | kStateCursor | kStatePrepare |
                                               kStateLoad | kStateUnknown;
// The kinds a probe can observe.
inline constexpr std::uint32_t kProbedKinds = kStateAdvisoryLock | kStateTempTable | kStateListen |
                                              kStateCursor | kStatePrepare | kStateSettings;

// Which kinds a transaction must be probed for, given the scanner's findings in its statements
// (protocol::SessionEffect flags), the kinds the configuration keeps correct, and whether
// advisory_lock_tracking = every_transaction.
[[nodiscard]] std::uint32_t probe_kinds_for(std::uint32_t effects, std::uint32_t tracked,
                                            bool every_transaction);

// Everything the decision at a transaction's end depends on.
struct TransactionEnd {
    std::uint32_t effects = 0;         // the scanner's findings in the transaction's statements
    std::uint32_t tracked = 0;         // tracked_kinds(config)
    bool every_transaction = false;    // advisory_lock_tracking = every_transaction
    std::uint32_t tether_kinds = 0;    // the client's tether when the transaction began
    // The client's ledger had entries that may be released already (LockLedger::has_maybe).
    bool ledger_had_maybe = false;
    // The transaction's lock accounting: armed (it touched session locks) and exact, with the
    // ledger it computed.
    bool locks_armed = false;
    bool locks_exact = false;
    const LockLedger* exact_ledger = nullptr;
    // tether_probe_delay > 0: locks that could not be counted keep the client tethered and are
    // probed later (when it is idle, or others wait), not at this transaction's end.
    bool defer_lock_probes = false;
};

struct TransactionEndDecision {
    enum class Action : std::uint8_t {
        Release,  // untethered: the backend goes back to the pool
        Keep,     // still tethered: the client keeps the backend
        Probe,    // ask the backend (probe_kinds); the answer decides (decide_after_probe)
    };
    Action action = Action::Release;
    std::uint32_t probe_kinds = 0;
    // The client's tether kinds from now on (before the probe's answer, for Probe).
    std::uint32_t tether_kinds = 0;
    // The accounting's ledger replaces the client's.
    bool adopt_ledger = false;
    // ... marked unknown (LockLedger::mark_unknown): the locks could not be counted and the probe
    // is deferred.
    bool ledger_unknown = false;
    bool operator==(const TransactionEndDecision&) const = default;
};

[[nodiscard]] TransactionEndDecision decide_transaction_end(const TransactionEnd& end);

// A tethered client between transactions: probe its locks now? Only when the ledger cannot
// settle them (LockLedger::needs_probe), nothing runs on the backend, and the client has been
// idle for tether_probe_delay or other clients wait for a backend.
struct IdleTether {
    bool ledger_needs_probe = false;
    bool backend_idle = false;        // clean boundary, nothing of pgtether's running
    std::uint64_t idle_ms = 0;        // since the client's last request
    std::uint64_t since_last_probe_ms = 0;
    std::uint64_t delay_ms = 0;       // tether_probe_delay
    bool others_waiting = false;      // clients queued for a backend of this pool
};
[[nodiscard]] bool should_probe_idle_tether(const IdleTether& t);

// The probe answered: `present` of the `probed` kinds are held. nullopt `present` = the probe
// failed (the client stays tethered, to be safe). Returns the tether kinds from now on.
[[nodiscard]] std::uint32_t tether_kinds_after_probe(std::uint32_t kinds_before,
                                                     std::uint32_t probed,
                                                     const std::uint32_t* present);

}  // namespace pgtether
