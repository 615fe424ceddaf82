// core/root_files: which directories and files root may use before it switches to `user =`.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include "core/root_files.hpp"

using namespace pgtether;

TEST_CASE("root_path_hazard: only root and the target user may write where root creates files") {
    const FileOwner target{"postgres", 114, 120};
    struct Case {
        const char* name;
        PathFacts facts;
        const char* hazard_part;  // nullptr: allowed
    };
    const Case cases[] = {
        {"root's 0755 directory", {0, 0, S_IFDIR | 0755, 2}, nullptr},
        {"the user's 0700 directory", {114, 120, S_IFDIR | 0700, 2}, nullptr},
        {"group-writable, the user's group", {0, 120, S_IFDIR | 0775, 2}, nullptr},
        {"/tmp: world-writable with the sticky bit", {0, 0, S_IFDIR | 01777, 9}, nullptr},
        {"another user's directory", {1001, 1001, S_IFDIR | 0755, 2}, "writable by uid 1001"},
        {"another user's read-only directory", {1001, 1001, S_IFDIR | 0555, 2}, nullptr},
        {"group-writable, a foreign group", {0, 50, S_IFDIR | 0775, 2}, "group gid 50"},
        {"world-writable, no sticky bit", {0, 0, S_IFDIR | 0777, 2}, "writable by every user"},
        {"root's 0640 logfile", {0, 0, S_IFREG | 0640, 1}, nullptr},
        {"the user's 0644 logfile", {114, 120, S_IFREG | 0644, 1}, nullptr},
        {"another user's logfile", {1001, 1001, S_IFREG | 0600, 1}, "writable by uid 1001"},
        {"a world-writable logfile", {0, 0, S_IFREG | 0666, 1}, "writable by every user"},
        {"a sticky bit does not excuse a file", {0, 0, S_IFREG | 01666, 1}, "every user"},
        {"a logfile with two links", {114, 120, S_IFREG | 0640, 2}, "2 hard links"},
        {"a FIFO as logfile", {114, 120, S_IFIFO | 0640, 1}, "not a regular file"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        auto hazard = root_path_hazard("logfile", "/x/y", c.facts, target);
        if (c.hazard_part == nullptr) {
            CHECK_FALSE(hazard.has_value());
        } else {
            REQUIRE(hazard.has_value());
            CHECK(hazard->find(c.hazard_part) != std::string::npos);
            CHECK(hazard->rfind("logfile /x/y ", 0) == 0);
        }
    }
}

TEST_CASE("parent_directory") {
    CHECK(parent_directory("/var/run/pgtether.pid") == "/var/run");
    CHECK(parent_directory("/pgtether.pid") == "/");
    CHECK(parent_directory("pgtether.pid") == ".");
    CHECK(parent_directory("run/pgtether.pid") == "run");
}
