#include "core/own_query_outcome.hpp"

namespace pgtether {

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
