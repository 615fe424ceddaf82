#include "proxy/daemon/privileges.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace pgtether {

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

FileOwner lookup_user(const std::string& user) {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16 * 1024);
    if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
        throw std::runtime_error("user \"" + user + "\" does not exist");
    }
    return {found->pw_name, found->pw_uid, found->pw_gid};
}

gid_t lookup_group(const std::string& group) {
    ::group entry{};
    ::group* found = nullptr;
    std::vector<char> buffer(64 * 1024);
    if (getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) {
        throw std::runtime_error("unix_socket_group: group \"" + group + "\" does not exist");
    }
    return found->gr_gid;
}

void give_unix_socket(const std::string& path, uid_t uid, gid_t gid, const std::string& to_whom) {
    // O_PATH | O_NOFOLLOW: the name itself, never what a link put in its place points to;
    // fchownat(AT_EMPTY_PATH) then changes exactly the inode we checked.
    int fd = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return;
        fail("cannot give " + path + " to " + to_whom);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        ::close(fd);
        throw std::runtime_error("cannot give " + path + " to " + to_whom +
                                 ": it is no longer the socket pgtether bound");
    }
    int rc = ::fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
    int saved = errno;
    ::close(fd);
    errno = saved;
    if (rc != 0) fail("cannot give " + path + " to " + to_whom);
}

void switch_user(const FileOwner& owner) {
    if (initgroups(owner.name.c_str(), owner.gid) != 0) {
        fail("initgroups for \"" + owner.name + "\"");
    }
    if (setgid(owner.gid) != 0) fail("setgid to the group of \"" + owner.name + "\"");
    if (setuid(owner.uid) != 0) fail("setuid to \"" + owner.name + "\"");
    if (owner.uid != 0 && setuid(0) == 0) {
        throw std::runtime_error("switched to \"" + owner.name + "\" but could become root again");
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
