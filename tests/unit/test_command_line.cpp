#include <doctest/doctest.h>

#include "proxy/command_line.hpp"

using namespace pgtether;

TEST_CASE("PgBouncer-style command line") {
    auto r = parse_command_line({"-d", "-vv", "-q", "conf.ini"});
    auto* cl = std::get_if<CommandLine>(&r);
    REQUIRE(cl);
    CHECK(cl->daemonize);
    CHECK(cl->verbose == 2);
    CHECK(cl->quiet);
    CHECK(cl->config_file == "conf.ini");

    r = parse_command_line({"--version"});
    REQUIRE(std::get_if<CommandLine>(&r));
    CHECK(std::get<CommandLine>(r).show_version);

    CHECK(std::holds_alternative<CommandLineError>(parse_command_line({})));
    CHECK(std::holds_alternative<CommandLineError>(parse_command_line({"-x", "a.ini"})));
    CHECK(std::holds_alternative<CommandLineError>(parse_command_line({"a.ini", "b.ini"})));
    CHECK(std::holds_alternative<CommandLineError>(parse_command_line({"--bogus", "a.ini"})));
}
