// Running as root: PgBouncer's `user` setting and -u. Started as root, pgtether binds its sockets,
// then switches to that user for good; without one it refuses to run as root at all (as PgBouncer:
// "PgBouncer should not run as root"). Not root, a `user` naming someone else is an error, and
// naming ourselves is fine. The decision only; proxy/daemon/privileges.hpp carries it out.
#pragma once

#include <string>
#include <string_view>

namespace pgtether {

struct PrivilegePlan {
    enum class Action { Keep, Switch, Refuse };
    Action action = Action::Keep;
    std::string message;  // why, for Refuse
};

// What to do, from whether we run as root (`root`), the user asked for (-u, else `user =`; empty:
// none) and the name of the user we run as.
PrivilegePlan plan_privileges(bool root, std::string_view wanted_user,
                              std::string_view current_user);

}  // namespace pgtether
