// pgtether: entry point. Parses the command line; the daemon itself lives in the rest of proxy/.
#include <cstdio>
#include <string>
#include <vector>

#include "proxy/command_line.hpp"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    auto parsed = pgtether::parse_command_line(args);
    if (auto* error = std::get_if<pgtether::CommandLineError>(&parsed)) {
        std::fprintf(stderr, "pgtether: %s\n%s", error->message.c_str(),
                     pgtether::usage_text(argv[0]).c_str());
        return 1;
    }
    const auto& cl = std::get<pgtether::CommandLine>(parsed);
    if (cl.show_help) {
        std::fputs(pgtether::usage_text(argv[0]).c_str(), stdout);
        return 0;
    }
    if (cl.show_version) {
        std::printf("pgtether %s\n", PGTETHER_VERSION);
        return 0;
    }
    std::fprintf(stderr, "pgtether: the daemon is not built yet\n");
    return 1;
}
