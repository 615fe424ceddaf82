// Process-level duties: pidfile, daemonizing (-d), and turning signals into worker actions.
#pragma once

#include <optional>
#include <string>

#include "core/root_files.hpp"

namespace pgtether {

struct Config;

// Writes our pid to `path`, refusing when the file names a process that is still alive. The pid
// goes to a fresh `<path>.tmp` (O_EXCL | O_NOFOLLOW: never through a planted link), given to
// `owner` on its descriptor when root hands it over, then renamed. Throws std::runtime_error.
void write_pidfile(const std::string& path, const std::optional<FileOwner>& owner);

// Started as root, to switch to `owner`: throws std::runtime_error when the pidfile's or the
// logfile's directory, an existing logfile, or unix_socket_dir is writable by a user other than
// root and `owner` (core/root_files.hpp says why).
void check_root_paths(const Config& config, const FileOwner& owner);
// Raises the soft RLIMIT_NOFILE to the hard limit, logs the budget (PgBouncer's "kernel file
// descriptor limit: ... max expected fd use: N") and warns when it does not fit
// (core/fd_budget.hpp).
void raise_fd_limit(const Config& config, std::size_t auth_file_users);

void remove_pidfile(const std::string& path);

// Forks into the background, detaches from the terminal and points stdio at /dev/null.
// Throws std::runtime_error when fork fails. Returns only in the child.
void daemonize();

}  // namespace pgtether
