#include "proxy/admin/privileges.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

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

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

void switch_user(const std::string& user, const std::vector<std::string>& hand_over) {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16 * 1024);
    if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
        throw std::runtime_error("user \"" + user + "\" does not exist");
    }
    for (const auto& path : hand_over) {
        if (!path.empty() && ::chown(path.c_str(), found->pw_uid, found->pw_gid) != 0 &&
            errno != ENOENT) {
            fail("cannot give " + path + " to user \"" + user + "\"");
        }
    }
    if (initgroups(found->pw_name, found->pw_gid) != 0) fail("initgroups for \"" + user + "\"");
    if (setgid(found->pw_gid) != 0) fail("setgid to the group of \"" + user + "\"");
    if (setuid(found->pw_uid) != 0) fail("setuid to \"" + user + "\"");
    if (found->pw_uid != 0 && setuid(0) == 0) {
        throw std::runtime_error("switched to \"" + user + "\" but could become root again");
    }
}

std::string current_user_name() {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16 * 1024);
    if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
        return found->pw_name;
    }
    return "uid " + std::to_string(getuid());
}

}  // namespace pgtether
