#include "core/privilege_plan.hpp"

namespace pgtether {

PrivilegePlan plan_privileges(bool root, std::string_view wanted_user,
                              std::string_view current_user) {
    using Action = PrivilegePlan::Action;
    if (root) {
        if (wanted_user.empty() || wanted_user == "root") {
            return {Action::Refuse,
                    "pgtether should not run as root: set user = NAME in the configuration or "
                    "start it with -u NAME (it switches to that user once its sockets are "
                    "bound)"};
        }
        return {Action::Switch, {}};
    }
    if (!wanted_user.empty() && wanted_user != current_user) {
        return {Action::Refuse, "cannot switch to user \"" + std::string(wanted_user) +
                                    "\": pgtether runs as \"" + std::string(current_user) +
                                    "\", not as root"};
    }
    return {Action::Keep, {}};
}

}  // namespace pgtether
