// Departure decisions and clean-up plans (core/departure.hpp), table by table: what happens to a
// backend when its client leaves, and what scrub, reset and sweep send; and what a client is told
// when its backend is lost (core/server_loss.hpp).
#include <doctest/doctest.h>

#include <string>

#include "core/departure.hpp"
#include "core/server_loss.hpp"
#include "core/tether_policy.hpp"
#include "protocol/sql_scanner.hpp"

using namespace pgtether;
using Action = DepartureDecision::Action;

TEST_CASE("departure: release, scrub, close or leave it to the running query") {
    struct Case {
        const char* name;
        Departure departure;
        DepartureDecision want;
    };
    const std::uint32_t lock = protocol::kEffectAdvisoryLock;
    // Fields: internal_query_running, mid_message, backend_idle, session_mode, tether_kinds,
    // effects.
    const Case cases[] = {
        {"clean boundary, nothing seen", {false, false, true, false, 0, 0}, {Action::Release}},
        {"mid-transaction", {false, false, false, false, 0, 0}, {Action::Scrub}},
        {"clean boundary, lock call seen", {false, false, true, false, 0, lock}, {Action::Scrub}},
        {"clean boundary, tethered", {false, false, true, false, kStateAdvisoryLock, 0},
         {Action::Scrub}},
        {"tethered by a temp table", {false, false, true, false, kStateTempTable, 0},
         {Action::Scrub}},
        {"settings alone do not tether", {false, false, true, false, kStateSettings, 0},
         {Action::Release}},
        {"session mode between transactions", {false, false, true, true, kStateAdvisoryLock, lock},
         {Action::Release}},
        {"session mode mid-transaction", {false, false, false, true, 0, 0}, {Action::Scrub}},
        {"pgtether's query runs", {true, true, false, false, kStateLoad, lock},
         {Action::FinishQuery}},
        {"mid-message", {false, true, true, false, 0, 0},
         {Action::Close, "client left in the middle of a message"}},
        {"mid-message beats LOAD", {false, true, true, false, kStateLoad, 0},
         {Action::Close, "client left in the middle of a message"}},
        {"LOAD, even clean", {false, false, true, false, kStateLoad, 0},
         {Action::Close, "its client used LOAD"}},
        {"LOAD in session mode", {false, false, true, true, kStateLoad, 0},
         {Action::Close, "its client used LOAD"}},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        const DepartureDecision got = decide_departure(c.departure);
        CHECK(got.action == c.want.action);
        CHECK(got == c.want);
    }
}

TEST_CASE("departure: pgtether's query ends after its client left") {
    struct Case {
        bool was_probe;
        bool clean;
        Action want;
    };
    const Case cases[] = {
        {true, true, Action::Scrub},  // the client may have left state the probe did not see
        {true, false, Action::Scrub},
        {false, true, Action::Release},
        {false, false, Action::Close},
    };
    for (const auto& c : cases) {
        CAPTURE(c.was_probe);
        CAPTURE(c.clean);
        CHECK(decide_orphaned_query_end(c.was_probe, c.clean).action == c.want);
    }
}

TEST_CASE("scrub plan: what the departed client left decides the messages") {
    const std::uint32_t all = kProbedKinds;
    struct Case {
        const char* name;
        ScrubState state;
        CleanupPlan want;
    };
    // ScrubState: left_running, probe_pipelined, in_copy_in, unsynced, transaction_open, tracked.
    // CleanupPlan: copy_fail, sync, queries, probe_kinds, extra_ready, cancel.
    const Case cases[] = {
        {"open transaction, idle", {0, false, false, false, true, all},
         {false, false, {"ROLLBACK", "DISCARD ALL"}, all, 0, false}},
        {"tethered at a clean boundary", {0, false, false, false, false, all},
         {false, false, {"DISCARD ALL"}, all, 0, false}},
        {"nothing tracked: like PgBouncer", {0, false, false, false, false, 0},
         {false, false, {}, 0, 0, false}},
        {"nothing tracked, open transaction", {0, false, false, false, true, 0},
         {false, false, {"ROLLBACK"}, 0, 0, false}},
        {"a query left running is cancelled", {1, false, false, false, false, all},
         {false, false, {"ROLLBACK", "DISCARD ALL"}, all, 1, true}},
        {"two requests left", {2, false, false, false, true, all},
         {false, false, {"ROLLBACK", "DISCARD ALL"}, all, 2, true}},
        {"unsynced extended batch", {0, false, false, true, true, all},
         {false, true, {"ROLLBACK", "DISCARD ALL"}, all, 1, false}},
        {"COPY FROM STDIN: CopyFail and Sync, no cancel", {1, false, true, false, true, all},
         {true, true, {"ROLLBACK", "DISCARD ALL"}, all, 2, false}},
        {"pipelined probe is drained", {0, true, false, false, false, all},
         {false, false, {"ROLLBACK", "DISCARD ALL"}, all, 1, false}},
        {"only locks tracked", {0, false, false, false, false, kStateAdvisoryLock},
         {false, false, {"DISCARD ALL"}, kStateAdvisoryLock, 0, false}},
        {"LOAD is never probed", {0, false, false, false, false, kStateLoad | kStateListen},
         {false, false, {"DISCARD ALL"}, kStateListen, 0, false}},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        const CleanupPlan got = plan_scrub(c.state);
        CHECK(got.copy_fail == c.want.copy_fail);
        CHECK(got.sync == c.want.sync);
        CHECK(got.queries == c.want.queries);
        CHECK(got.probe_kinds == c.want.probe_kinds);
        CHECK(got.extra_ready == c.want.extra_ready);
        CHECK(got.cancel == c.want.cancel);
    }
}

TEST_CASE("reset and sweep plans") {
    struct Case {
        const char* name;
        std::uint32_t tracked;
        std::vector<std::string> reset_queries;
        std::uint32_t reset_probe;
        std::uint32_t sweep_probe;
    };
    const Case cases[] = {
        {"everything tracked", kProbedKinds, {"DISCARD ALL", kUnlockAllQuery},
         kStateAdvisoryLock | kStateSettings, kProbedKinds & ~std::uint32_t{kStateSettings}},
        {"nothing tracked", 0, {"DISCARD ALL"}, 0, 0},
        {"settings only", kStateSettings, {"DISCARD ALL"}, kStateSettings, 0},
        {"locks only", kStateAdvisoryLock, {"DISCARD ALL", kUnlockAllQuery}, kStateAdvisoryLock,
         kStateAdvisoryLock},
        {"temp tables only", kStateTempTable, {"DISCARD ALL"}, 0, kStateTempTable},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        const CleanupPlan reset = plan_reset("DISCARD ALL", c.tracked);
        CHECK(reset.queries == c.reset_queries);
        CHECK(reset.probe_kinds == c.reset_probe);
        CHECK_FALSE(reset.copy_fail);
        CHECK_FALSE(reset.sync);
        CHECK(reset.extra_ready == 0);
        CHECK_FALSE(reset.cancel);
        const CleanupPlan sweep = plan_sweep(c.tracked);
        CHECK(sweep.queries.empty());
        CHECK(sweep.probe_kinds == c.sweep_probe);
    }
}

TEST_CASE("clean-up outcome: release, run the scrub again, scrub a leak, or close") {
    using Outcome = CleanupOutcome::Action;
    struct Case {
        const char* name;
        CleanupKind kind;
        CleanupAnswer answer;
        Outcome expected;
    };
    const std::uint32_t lock = kStateAdvisoryLock;
    const Case cases[] = {
        {"reset verified clean", CleanupKind::Reset, {true, 0, false, 0}, Outcome::Release},
        {"reset leaves a lock", CleanupKind::Reset, {true, lock, false, 0}, Outcome::Close},
        {"reset failed", CleanupKind::Reset, {false, 0, false, 0}, Outcome::Close},
        {"reset cancelled: not a scrub, no rerun", CleanupKind::Reset, {false, 0, true, 0},
         Outcome::Close},
        {"scrub verified clean", CleanupKind::Scrub, {true, 0, false, 0}, Outcome::Release},
        {"scrub leaves a temp table", CleanupKind::Scrub, {true, kStateTempTable, false, 0},
         Outcome::Close},
        {"scrub failed", CleanupKind::Scrub, {false, 0, false, 0}, Outcome::Close},
        {"scrub cancelled once", CleanupKind::Scrub, {false, 0, true, 0}, Outcome::Rerun},
        {"scrub cancelled, last rerun", CleanupKind::Scrub,
         {false, 0, true, kMaxScrubRepeats - 1}, Outcome::Rerun},
        {"scrub cancelled too often", CleanupKind::Scrub, {false, 0, true, kMaxScrubRepeats},
         Outcome::Close},
        {"sweep finds nothing", CleanupKind::Sweep, {true, 0, false, 0}, Outcome::Release},
        {"sweep finds a lock", CleanupKind::Sweep, {true, lock, false, 0}, Outcome::ScrubLeak},
        {"sweep failed", CleanupKind::Sweep, {false, 0, false, 0}, Outcome::Close},
        {"sweep cancelled: no rerun", CleanupKind::Sweep, {false, 0, true, 0}, Outcome::Close},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        CHECK(decide_cleanup_outcome(c.kind, c.answer).action == c.expected);
    }
}

TEST_CASE("release plan: close, wait for a cancel, reset first, or return") {
    using Plan = ReleasePlan::Action;
    using Why = ReleasePlan::Why;
    auto facts = [](auto change) {
        ReleaseFacts f;
        f.age_ms = 5000;
        change(f);
        return f;
    };
    struct Case {
        const char* name;
        ReleaseFacts facts;
        ReleasePlan expected;
    };
    const Case cases[] = {
        {"clean", facts([](ReleaseFacts&) {}), {Plan::Return, Why::None}},
        {"already closing", facts([](ReleaseFacts& f) { f.closing = f.retired = true; }),
         {Plan::Nothing, Why::None}},
        {"retired", facts([](ReleaseFacts& f) { f.retired = f.paused = true; }),
         {Plan::Close, Why::Retired}},
        {"lifetime over", facts([](ReleaseFacts& f) { f.lifetime_ms = 5000; }),
         {Plan::Close, Why::Lifetime}},
        {"lifetime not yet over", facts([](ReleaseFacts& f) { f.lifetime_ms = 5001; }),
         {Plan::Return, Why::None}},
        {"lifetime over, client still linked",
         facts([](ReleaseFacts& f) { f.lifetime_ms = 10; f.client_linked = true; }),
         {Plan::Return, Why::None}},
        {"lifetime of zero: closes at once", facts([](ReleaseFacts& f) { f.lifetime_ms = 0; }),
         {Plan::Close, Why::Lifetime}},
        {"lifetime of zero, just logged in: serves its first client",
         facts([](ReleaseFacts& f) { f.lifetime_ms = 0; f.reason = ReleaseReason::LoginDone; }),
         {Plan::Return, Why::None}},
        {"just logged in, but retired",
         facts([](ReleaseFacts& f) { f.reason = ReleaseReason::LoginDone; f.retired = true; }),
         {Plan::Close, Why::Retired}},
        {"role changed", facts([](ReleaseFacts& f) { f.role_fits = false; f.paused = true; }),
         {Plan::Close, Why::RoleChanged}},
        {"paused", facts([](ReleaseFacts& f) { f.paused = f.cancels_in_flight = true; }),
         {Plan::Close, Why::Paused}},
        {"cancel on its way", facts([](ReleaseFacts& f) { f.cancels_in_flight = f.reset_due = true; }),
         {Plan::WaitForCancels, Why::None}},
        {"reset due", facts([](ReleaseFacts& f) { f.reset_due = true; }), {Plan::Reset, Why::None}},
        {"reset done",
         facts([](ReleaseFacts& f) { f.reset_due = true; f.reason = ReleaseReason::ResetRan; }),
         {Plan::Return, Why::None}},
        {"just logged in, reset due: no client has used it yet",
         facts([](ReleaseFacts& f) { f.reset_due = true; f.reason = ReleaseReason::LoginDone; }),
         {Plan::Return, Why::None}},
        {"scrubbed, reset due: the reset still runs",
         facts([](ReleaseFacts& f) { f.reset_due = true; f.reason = ReleaseReason::Scrubbed; }),
         {Plan::Reset, Why::None}},
        {"cancels arrived, reset due: the reset runs now",
         facts([](ReleaseFacts& f) {
             f.reset_due = true;
             f.reason = ReleaseReason::CancelsArrived;
         }),
         {Plan::Reset, Why::None}},
        {"after a sweep or check that changed nothing: no reset, and not use",
         facts([](ReleaseFacts& f) { f.reset_due = true; f.reason = ReleaseReason::Unused; }),
         {Plan::Return, Why::None, false}},
        {"unused, but its lifetime is over", facts([](ReleaseFacts& f) {
             f.lifetime_ms = 10;
             f.reason = ReleaseReason::Unused;
         }),
         {Plan::Close, Why::Lifetime}},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.name));
        CHECK(plan_release(c.facts) == c.expected);
    }
}

TEST_CASE("server loss: what a client is told when its backend is lost") {
    struct Case {
        const char* name;
        ServerLoss loss;
        ServerLossAnswer want;
    };
    // Fields: client_waiting_for_server, server_saw_requests, tethered, fatal_forwarded.
    const Case cases[] = {
        {"failed before serving anything: another server", {true, false, false, false},
         ServerLossAnswer::Retry},
        {"mid-request, the backend's FATAL forwarded", {true, true, false, true},
         ServerLossAnswer::CloseAfterFatal},
        {"mid-request, no word from the backend", {true, true, false, false},
         ServerLossAnswer::FailConnectionLost},
        {"not waiting and nothing seen (idle link) is not retried", {false, false, false, false},
         ServerLossAnswer::FailConnectionLost},
        {"tethered, idle between statements", {false, true, true, false},
         ServerLossAnswer::FailSessionLost},
        {"tethered, mid-request", {true, true, true, false}, ServerLossAnswer::FailSessionLost},
        {"tethered, even before its request reached the backend", {true, false, true, false},
         ServerLossAnswer::FailSessionLost},
        {"tethered, the FATAL forwarded anyway", {true, true, true, true},
         ServerLossAnswer::FailSessionLost},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        CHECK(decide_server_loss(c.loss) == c.want);
    }
}

TEST_CASE("server loss: the session-lost error names the cause and what was held") {
    const auto error = session_lost_error("terminating connection due to administrator command",
                                          "advisory locks 42");
    CHECK(error.severity == "FATAL");
    CHECK(error.sqlstate == "08006");
    CHECK(error.message ==
          "server connection lost, and with it this session's state (advisory locks 42): "
          "terminating connection due to administrator command");
    CHECK(error.detail.find("no other connection has them") != std::string::npos);
    CHECK(!error.hint.empty());
    const auto bare = session_lost_error("", "");
    CHECK(bare.message == "server connection lost, and with it this session's state");
}
