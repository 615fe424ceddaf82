// pgtether's command line, PgBouncer-compatible: pgtether [-d] [-v] [-q] [-u USER] [-V] [-h]
// CONFIG.ini. PgBouncer's -R (online restart) is refused with a message saying so. pgtether's
// own: --check CONFIG.ini [RUNNING.ini] checks a configuration and exits (like nginx -t).
#pragma once

#include <string>
#include <variant>
#include <vector>

namespace pgtether {

struct CommandLine {
    std::string config_file;
    bool daemonize = false;  // -d / --daemon
    int verbose = 0;         // each -v adds one
    bool quiet = false;      // -q / --quiet: no logging to stderr
    std::string user;        // -u / --user: the Unix user to switch to (overrides `user =`)
    bool show_version = false;
    bool show_help = false;
    bool check = false;        // --check: check config_file, print what is wrong, exit
    std::string running_file;  // --check's second file: what a RELOAD would change from it
};

struct CommandLineError {
    std::string message;
};

std::variant<CommandLine, CommandLineError> parse_command_line(const std::vector<std::string>& args);
std::string usage_text(const std::string& program);

}  // namespace pgtether
