#include "core/command_line.hpp"

#include <optional>

namespace pgtether {

std::variant<CommandLine, CommandLineError> parse_command_line(const std::vector<std::string>& args) {
    CommandLine cl;
    bool options_done = false;
    const std::string no_reboot =
        "online restart (-R, --reboot) is not supported by pgtether: restart it instead "
        "(clients reconnect); see docs/migration.md";
    for (std::size_t index = 0; index < args.size(); ++index) {
        const std::string& arg = args[index];
        // -u NAME, -uNAME, --user NAME, --user=NAME
        auto take_user = [&](std::string value) -> std::optional<CommandLineError> {
            if (value.empty()) {
                if (index + 1 >= args.size()) return CommandLineError{"-u needs a user name"};
                value = args[++index];
            }
            cl.user = std::move(value);
            return std::nullopt;
        };
        if (!options_done && arg == "--") {
            options_done = true;
        } else if (!options_done && (arg == "--user" || arg.starts_with("--user="))) {
            if (auto error = take_user(arg == "--user" ? "" : arg.substr(7))) return *error;
        } else if (!options_done && arg == "--reboot") {
            return CommandLineError{no_reboot};
        } else if (!options_done && arg.size() > 2 && arg.starts_with("--")) {
            if (arg == "--daemon") cl.daemonize = true;
            else if (arg == "--verbose") ++cl.verbose;
            else if (arg == "--quiet") cl.quiet = true;
            else if (arg == "--version") cl.show_version = true;
            else if (arg == "--help") cl.show_help = true;
            else if (arg == "--check") cl.check = true;
            else return CommandLineError{"unknown option: " + arg};
        } else if (!options_done && arg.size() > 1 && arg[0] == '-') {
            // Short options may be combined, as in "-dv".
            for (std::size_t i = 1; i < arg.size(); ++i) {
                switch (arg[i]) {
                    case 'd': cl.daemonize = true; break;
                    case 'v': ++cl.verbose; break;
                    case 'q': cl.quiet = true; break;
                    case 'V': cl.show_version = true; break;
                    case 'h': cl.show_help = true; break;
                    case 'R': return CommandLineError{no_reboot};
                    case 'u':
                        // The rest of this word, or the next one, is the user.
                        if (auto error = take_user(arg.substr(i + 1))) return *error;
                        i = arg.size();
                        break;
                    default: return CommandLineError{std::string("unknown option: -") + arg[i]};
                }
            }
        } else if (cl.config_file.empty()) {
            cl.config_file = arg;
        } else if (cl.check && cl.running_file.empty()) {
            cl.running_file = arg;
        } else {
            return CommandLineError{"more than one config file given: " + arg};
        }
    }
    if (cl.config_file.empty() && !cl.show_version && !cl.show_help) {
        return CommandLineError{"no config file given"};
    }
    return cl;
}

std::string usage_text(const std::string& program) {
    return "pgtether is a PostgreSQL connection pooler that keeps session advisory locks correct.\n\n"
           "Usage:\n  " +
           program +
           " [OPTION]... CONFIG.ini\n\n"
           "Options:\n"
           "  -d, --daemon    run in the background (requires pidfile in the config)\n"
           "  -v, --verbose   more logging; repeat for even more\n"
           "  -q, --quiet     no logging to stderr\n"
           "  -u, --user=USER switch to this Unix user once the sockets are bound (started as\n"
           "                  root; overrides user = in the configuration)\n"
           "  -V, --version   print the version and exit\n"
           "  -h, --help      print this help and exit\n"
           "      --check CONFIG.ini [RUNNING.ini]\n"
           "                  check the configuration (and the files it names) and exit: 0 when\n"
           "                  valid, 1 with every problem as FILE:LINE: KEY: message; with\n"
           "                  RUNNING.ini, also list what a RELOAD from it would change\n"
           "\n"
           "PgBouncer's -R (online restart, taking over the running process's sockets) is not\n"
           "supported: restart pgtether instead; clients reconnect.\n";
}

}  // namespace pgtether
