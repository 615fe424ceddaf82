#include "core/own_query_outcome.hpp"

#include <cstddef>
#include <iterator>

namespace pgtether {

namespace {

using S = ServerState;
using C = CleanupKind;

// In InternalPurpose's order (checked below).
constexpr PurposeTraits kTraits[] = {
    // state, name, for_client, probe, cleanup
    {S::ConnectQuery, "connect_query", false, false, std::nullopt},
    {S::Syncing, "server_check_query", true, false, std::nullopt},
    {S::Syncing, "parameter sync", true, false, std::nullopt},
    {S::Probing, "session state probe", true, true, std::nullopt},
    {S::Probing, "session state probe (discarded)", true, true, std::nullopt},
    {S::Resetting, "server_reset_query", false, false, C::Reset},
    {S::Scrubbing, "scrub", false, false, C::Scrub},
    {S::Sweeping, "leak sweep", false, false, C::Sweep},
    {S::Sweeping, "catalog check", false, false, std::nullopt},
    {S::ConnectQuery, "role check", false, false, std::nullopt},
    {S::Sweeping, "role check", false, false, std::nullopt},
};
static_assert(std::size(kTraits) == static_cast<std::size_t>(InternalPurpose::RoleCheck) + 1,
              "one row per InternalPurpose");

}  // namespace

const PurposeTraits& purpose_traits(InternalPurpose purpose) {
    return kTraits[static_cast<std::size_t>(purpose)];
}

OwnQueryOutcome decide_own_query_outcome(InternalPurpose purpose, const OwnQueryEnd& end) {
    using O = OwnQueryOutcome;
    switch (purpose) {
        case InternalPurpose::ConnectQuery: return end.clean ? O::FinishLogin : O::FailLogin;
        case InternalPurpose::LoginRoleCheck:
            // A server whose role cannot be learnt cannot be judged against
            // target_session_attrs: a failed login, and the next host is tried.
            return end.clean && end.answer_usable ? O::FinishLogin : O::FailLogin;
        case InternalPurpose::Check: return end.clean ? O::ClientGoesOn : O::Close;
        case InternalPurpose::ParamSync: return end.clean ? O::ClientGoesOn : O::FailClient;
        case InternalPurpose::RoleCheck:
            return end.clean && end.answer_usable && end.backend_idle ? O::GiveBack : O::Close;
        case InternalPurpose::CatalogCheck:
            // A failed SELECT leaves the backend as it was (idle, outside a transaction): it goes
            // back all the same, and the watch tries again later.
            return end.backend_idle ? O::GiveBack : O::Close;
        case InternalPurpose::Probe:
        case InternalPurpose::DiscardedProbe:
        case InternalPurpose::Reset:
        case InternalPurpose::Scrub:
        case InternalPurpose::LeakSweep: return O::NotDecidedHere;
    }
    return O::Close;
}

}  // namespace pgtether
