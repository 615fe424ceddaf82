// core/own_query_outcome.hpp: what follows each of pgtether's own queries, table by table.
#include <doctest/doctest.h>

#include <initializer_list>
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
