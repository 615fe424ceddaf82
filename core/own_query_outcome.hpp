// pgtether's own queries on a server: what each purpose is (purpose_traits: the one table the
// server reads), and what follows from how one ended (decide_own_query_outcome), carried out by
// each query's job (proxy/server/own_queries.hpp). The tether's probe and the cleanups (reset,
// scrub, leak sweep) have decisions of their own (core/departure.hpp: decide_orphaned_query_end,
// decide_cleanup_outcome).
#pragma once

#include <optional>

#include "core/departure.hpp"
#include "core/server_state.hpp"

namespace pgtether {

// Why pgtether runs a query of its own on a server (the results never reach a client).
enum class InternalPurpose {
    ConnectQuery,    // the database entry's connect_query, right after login
    Check,           // server_check_query before reusing a long-idle server
    ParamSync,       // SET the linked client's parameters
    Probe,           // the tether: what session state does this backend hold for its client?
    DiscardedProbe,  // a pipelined probe that ran inside the client's transaction block
    Reset,           // server_reset_query when a session-mode client leaves (or always)
    Scrub,           // clean up after a client left mid-transaction or tethered
    LeakSweep,       // periodic probe of an idle pooled backend
    CatalogCheck,    // lock discovery's catalog fingerprint, read on an idle pooled backend
    // Servers that do not report their role (PostgreSQL 13-), target_session_attrs not any:
    LoginRoleCheck,  // asked at login, before the role decides whether the host serves
    RoleCheck,       // asked again on an idle pooled backend, periodically (server_check_delay)
};

// What a purpose is, in one row per purpose.
struct PurposeTraits {
    ServerState state;  // the server's state while the query runs (several purposes share one)
    const char* name;   // in log lines and close reasons ("scrub failed: ...")
    // Run for the linked client, whose request waits for it: the client goes on afterwards, and
    // a client that left meanwhile leaves the query's end to decide_orphaned_query_end.
    bool for_client;
    bool probe;  // the tether's probe (a client that leaves during it leaves a dirty backend)
    // The cleanups, verified by a probe of their own; decide_cleanup_outcome says what follows.
    std::optional<CleanupKind> cleanup;
};

[[nodiscard]] const PurposeTraits& purpose_traits(InternalPurpose purpose);

// How the query ended.
struct OwnQueryEnd {
    bool clean = false;          // answered without an error, the backend idle outside a block
    bool answer_usable = false;  // its rows said what it asked (a role; for the others unused)
    bool backend_idle = false;   // nothing in flight and outside a transaction block
};

enum class OwnQueryOutcome {
    FinishLogin,   // the login goes on: the server joins the pool
    FailLogin,     // a failed login: the host backed off, the waiting clients told
    ClientGoesOn,  // the linked client's request goes on (after a Check: the parameter sync)
    FailClient,    // the linked client is closed with the error (its parameters cannot be set)
    GiveBack,      // a backend lent while idle goes back to its place, as it was
    Close,         // the server is closed
    NotDecidedHere,  // Probe, DiscardedProbe, Reset, Scrub, LeakSweep
};

[[nodiscard]] OwnQueryOutcome decide_own_query_outcome(InternalPurpose purpose,
                                                       const OwnQueryEnd& end);

}  // namespace pgtether
