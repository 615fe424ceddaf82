// Process-level duties: pidfile, daemonizing (-d), and turning signals into worker actions.
#pragma once

#include <string>

namespace pgtether {

// Writes our pid to `path`, refusing when the file names a process that is still alive.
// Throws std::runtime_error.
void write_pidfile(const std::string& path);
void remove_pidfile(const std::string& path);

// Forks into the background, detaches from the terminal and points stdio at /dev/null.
// Throws std::runtime_error when fork fails. Returns only in the child.
void daemonize();

}  // namespace pgtether
