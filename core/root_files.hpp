// Which files and directories pgtether may use while it still runs as root (before it switches
// to `user =`). Root opens the pidfile, the logfile and the Unix socket; a third user who can
// create or replace entries where root does that could point them at files root owns (planted
// symbolic or hard links) or keep the logfile open for reading. So, while root, a directory
// root creates files in, and a logfile or pidfile that already exists, must not be writable by
// anyone but root and the target user. A world-writable directory with the sticky bit (/tmp) is
// the exception for directories: others may add entries there but never remove or rename ours,
// and the files themselves are opened without following links (proxy/daemon/daemon.cpp).
// Pure: the facts come from stat(2), nothing here does I/O.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace pgtether {

// The user pgtether switches to, as root hands files over to it.
struct FileOwner {
    std::string name;
    uid_t uid = 0;
    gid_t gid = 0;
};

// What stat(2) says about a path.
struct PathFacts {
    uid_t uid = 0;
    gid_t gid = 0;
    mode_t mode = 0;  // st_mode: type and permission bits
    nlink_t links = 1;
};

// Why root must not use `path` (a directory or a file, see PathFacts::mode) while it hands files
// to `target`: nullopt when it may. `what` names the path in the message ("pidfile directory",
// "logfile", ...). An existing file must also be a regular file with one link (a hard link made
// by someone else could be the name of a file root owns).
[[nodiscard]] std::optional<std::string> root_path_hazard(std::string_view what,
                                                          std::string_view path,
                                                          const PathFacts& facts,
                                                          const FileOwner& target);

// The directory part of a file path ("." for a bare name, "/" for "/x").
[[nodiscard]] std::string parent_directory(std::string_view path);

}  // namespace pgtether
