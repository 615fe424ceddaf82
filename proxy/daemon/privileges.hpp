// Running as root, carried out: the users and groups looked up, the Unix socket handed over, the
// switch itself. What to do is core/privilege_plan.hpp's decision.
#pragma once

#include <sys/types.h>
#include <string>

#include "core/privilege_plan.hpp"
#include "core/root_files.hpp"

namespace pgtether {

// The user `user` names (uid, primary group); throws std::runtime_error when there is none.
FileOwner lookup_user(const std::string& user);

// The group `group` names (unix_socket_group); throws std::runtime_error naming the key when
// there is none.
gid_t lookup_group(const std::string& group);

// Gives the Unix socket at `path` to `uid` and `gid` (-1: unchanged), as `to_whom` says in an
// error: root hands the socket it bound to `user =` so that it can remove it at exit (in a sticky
// directory such as /tmp only the owner may), and to unix_socket_group. Never follows a link and
// changes nothing but a socket. Missing: nothing to do. Throws std::runtime_error.
void give_unix_socket(const std::string& path, uid_t uid, gid_t gid, const std::string& to_whom);

// Switches the process to `owner` (its primary group and supplementary groups, then the uid) and
// checks that root cannot be regained. The pidfile and the logfile were handed over when root
// created them (on their descriptors, see write_pidfile and setup_logging). Throws
// std::runtime_error naming what failed.
void switch_user(const FileOwner& owner);

// The name of the user we run as ("uid N" when it has no name).
std::string current_user_name();

}  // namespace pgtether
