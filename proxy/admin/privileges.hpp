// Running as root: PgBouncer's `user` setting and -u. Started as root, pgtether binds its sockets,
// then switches to that user for good; without one it refuses to run as root at all (as PgBouncer:
// "PgBouncer should not run as root"). Not root, a `user` naming someone else is an error, and
// naming ourselves is fine.
#pragma once

#include <sys/types.h>
#include <string>
#include <string_view>
#include <vector>

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

// Switches the process to `user` (its primary group and supplementary groups, then the uid) and
// checks that root cannot be regained. `hand_over` files (the Unix socket, the logfile, the
// pidfile) are given to the user first, so it can still remove or reopen them. Throws
// std::runtime_error naming what failed.
void switch_user(const std::string& user, const std::vector<std::string>& hand_over);

// The name of the user we run as ("uid N" when it has no name).
std::string current_user_name();

}  // namespace pgtether
