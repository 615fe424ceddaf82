#include "core/root_files.hpp"

#include <sys/stat.h>

namespace pgtether {

std::optional<std::string> root_path_hazard(std::string_view what, std::string_view path,
                                            const PathFacts& facts, const FileOwner& target) {
    const bool directory = S_ISDIR(facts.mode);
    const std::string subject = std::string(what) + " " + std::string(path);
    const std::string advice =
        "; make it owned by root or by \"" + target.name + "\" and not writable by others";
    if (!directory) {
        if (!S_ISREG(facts.mode)) return subject + " is not a regular file";
        if (facts.links > 1) {
            return subject + " has " + std::to_string(facts.links) +
                   " hard links (one may be the name of another file)";
        }
    }
    const auto trusted_uid = [&](uid_t uid) { return uid == 0 || uid == target.uid; };
    const auto trusted_gid = [&](gid_t gid) { return gid == 0 || gid == target.gid; };
    if ((facts.mode & S_IWUSR) && !trusted_uid(facts.uid)) {
        return subject + " is writable by uid " + std::to_string(facts.uid) +
               ", which is neither root nor \"" + target.name + "\"" + advice;
    }
    if ((facts.mode & S_IWGRP) && !trusted_gid(facts.gid)) {
        return subject + " is writable by group gid " + std::to_string(facts.gid) +
               ", which is neither root's nor \"" + target.name + "\"'s" + advice;
    }
    const bool sticky_directory = directory && (facts.mode & S_ISVTX);
    if ((facts.mode & S_IWOTH) && !sticky_directory) {
        return subject + " is writable by every user" + advice;
    }
    return std::nullopt;
}

std::string parent_directory(std::string_view path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string_view::npos) return ".";
    if (slash == 0) return "/";
    return std::string(path.substr(0, slash));
}

}  // namespace pgtether
