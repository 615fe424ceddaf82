// core/own_query_outcome.hpp: what follows each of pgtether's own queries, table by table.
#include <doctest/doctest.h>

#include <initializer_list>
#include <optional>
#include <string>

#include "core/own_query_outcome.hpp"

using namespace pgtether;

namespace {

const char* name(OwnQueryOutcome o) {
    switch (o) {
        case OwnQueryOutcome::FinishLogin: return "FinishLogin";
        case OwnQueryOutcome::FailLogin: return "FailLogin";
        case OwnQueryOutcome::ClientGoesOn: return "ClientGoesOn";
        case OwnQueryOutcome::FailClient: return "FailClient";
        case OwnQueryOutcome::GiveBack: return "GiveBack";
        case OwnQueryOutcome::Close: return "Close";
        case OwnQueryOutcome::NotDecidedHere: return "NotDecidedHere";
    }
    return "?";
}

struct Row {
    InternalPurpose purpose;
    bool clean;
    bool answer_usable;
    bool backend_idle;
    OwnQueryOutcome outcome;
};

void check_rows(std::initializer_list<Row> rows) {
    for (const auto& r : rows) {
        CAPTURE(static_cast<int>(r.purpose));
        CAPTURE(r.clean);
        CAPTURE(r.answer_usable);
        CAPTURE(r.backend_idle);
        const OwnQueryOutcome got =
            decide_own_query_outcome(r.purpose, {r.clean, r.answer_usable, r.backend_idle});
        CHECK(std::string(name(got)) == name(r.outcome));
    }
}

}  // namespace

TEST_CASE("at login: connect_query and the role check decide whether the login goes on") {
    using P = InternalPurpose;
    using O = OwnQueryOutcome;
    check_rows({
        {P::ConnectQuery, true, false, true, O::FinishLogin},
        {P::ConnectQuery, false, false, true, O::FailLogin},    // it failed
        {P::ConnectQuery, false, false, false, O::FailLogin},   // it left a transaction open
        {P::LoginRoleCheck, true, true, true, O::FinishLogin},
        {P::LoginRoleCheck, true, false, true, O::FailLogin},   // an answer that is no role
        {P::LoginRoleCheck, false, false, true, O::FailLogin},
    });
}

TEST_CASE("for the linked client: the check and the parameter sync let its request go on") {
    using P = InternalPurpose;
    using O = OwnQueryOutcome;
    check_rows({
        {P::Check, true, false, true, O::ClientGoesOn},
        {P::Check, false, false, true, O::Close},  // server_check_query failed: not reused
        {P::ParamSync, true, false, true, O::ClientGoesOn},
        {P::ParamSync, false, false, true, O::FailClient},  // its SET failed: the client is told
    });
}

TEST_CASE("on a lent idle backend: it goes back as it was, or is closed") {
    using P = InternalPurpose;
    using O = OwnQueryOutcome;
    check_rows({
        {P::RoleCheck, true, true, true, O::GiveBack},
        {P::RoleCheck, true, false, true, O::Close},    // no role in the answer
        {P::RoleCheck, false, false, true, O::Close},   // the SELECT failed
        {P::RoleCheck, false, false, false, O::Close},
        {P::CatalogCheck, true, false, true, O::GiveBack},
        {P::CatalogCheck, false, false, true, O::GiveBack},  // failed, but changed nothing
        {P::CatalogCheck, false, false, false, O::Close},    // left something in flight
    });
}

TEST_CASE("the probe and the cleanups are decided elsewhere") {
    for (const auto purpose : {InternalPurpose::Probe, InternalPurpose::DiscardedProbe,
                               InternalPurpose::Reset, InternalPurpose::Scrub,
                               InternalPurpose::LeakSweep}) {
        CAPTURE(static_cast<int>(purpose));
        CHECK(decide_own_query_outcome(purpose, {true, true, true}) ==
              OwnQueryOutcome::NotDecidedHere);
    }
}

TEST_CASE("each purpose: the state it runs in, its name, whom it runs for, the cleanup it is") {
    using P = InternalPurpose;
    using S = ServerState;
    struct TraitsRow {
        P purpose;
        S state;
        const char* name;
        bool for_client;
        bool probe;
        std::optional<CleanupKind> cleanup;
    };
    const TraitsRow rows[] = {
        {P::ConnectQuery, S::ConnectQuery, "connect_query", false, false, std::nullopt},
        {P::Check, S::Syncing, "server_check_query", true, false, std::nullopt},
        {P::ParamSync, S::Syncing, "parameter sync", true, false, std::nullopt},
        {P::Probe, S::Probing, "session state probe", true, true, std::nullopt},
        {P::DiscardedProbe, S::Probing, "session state probe (discarded)", true, true,
         std::nullopt},
        {P::Reset, S::Resetting, "server_reset_query", false, false, CleanupKind::Reset},
        {P::Scrub, S::Scrubbing, "scrub", false, false, CleanupKind::Scrub},
        {P::LeakSweep, S::Sweeping, "leak sweep", false, false, CleanupKind::Sweep},
        {P::CatalogCheck, S::Sweeping, "catalog check", false, false, std::nullopt},
        {P::LoginRoleCheck, S::ConnectQuery, "role check", false, false, std::nullopt},
        {P::RoleCheck, S::Sweeping, "role check", false, false, std::nullopt},
    };
    for (const auto& r : rows) {
        CAPTURE(r.name);
        const PurposeTraits& t = purpose_traits(r.purpose);
        CHECK(std::string(to_string(t.state)) == to_string(r.state));
        CHECK(std::string(t.name) == r.name);
        CHECK(t.for_client == r.for_client);
        CHECK(t.probe == r.probe);
        CHECK(t.cleanup == r.cleanup);
    }
}

TEST_CASE("the table and decide_own_query_outcome agree on who decides what follows") {
    // A purpose is decided here exactly when it is neither the probe nor a cleanup (those have
    // core/departure.hpp's decisions); a query run for the client runs while the server is
    // linked to it (Syncing, Probing), and the others while it is not.
    for (int i = 0; i <= static_cast<int>(InternalPurpose::RoleCheck); ++i) {
        const auto purpose = static_cast<InternalPurpose>(i);
        const PurposeTraits& t = purpose_traits(purpose);
        CAPTURE(t.name);
        const bool elsewhere = t.probe || t.cleanup.has_value();
        CHECK((decide_own_query_outcome(purpose, {true, true, true}) ==
               OwnQueryOutcome::NotDecidedHere) == elsewhere);
        CHECK(state_info(t.state).linked == t.for_client);
    }
}
