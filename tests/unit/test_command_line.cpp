#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/command_line.hpp"

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

TEST_CASE("-u / --user and the refused -R") {
    for (auto args : std::vector<std::vector<std::string>>{{"-u", "pgb", "a.ini"},
                                                          {"-upgb", "a.ini"},
                                                          {"-du", "pgb", "a.ini"},
                                                          {"--user", "pgb", "a.ini"},
                                                          {"--user=pgb", "a.ini"}}) {
        CAPTURE(args.front());
        auto r = parse_command_line(args);
        auto* cl = std::get_if<CommandLine>(&r);
        REQUIRE(cl);
        CHECK(cl->user == "pgb");
        CHECK(cl->config_file == "a.ini");
    }
    CHECK(std::holds_alternative<CommandLineError>(parse_command_line({"a.ini", "-u"})));
    for (const char* reboot : {"-R", "-dR", "--reboot"}) {
        CAPTURE(reboot);
        auto r = parse_command_line({reboot, "a.ini"});
        auto* error = std::get_if<CommandLineError>(&r);
        REQUIRE(error);
        CHECK(error->message.find("online restart") != std::string::npos);
    }
    CHECK(usage_text("pgtether").find("-R") != std::string::npos);
}

TEST_CASE("--check FILE [RUNNING_FILE]") {
    auto r = parse_command_line({"--check", "new.ini"});
    auto* cl = std::get_if<CommandLine>(&r);
    REQUIRE(cl);
    CHECK(cl->check);
    CHECK(cl->config_file == "new.ini");
    CHECK(cl->running_file.empty());

    r = parse_command_line({"new.ini", "--check", "running.ini"});
    cl = std::get_if<CommandLine>(&r);
    REQUIRE(cl);
    CHECK(cl->check);
    CHECK(cl->config_file == "new.ini");
    CHECK(cl->running_file == "running.ini");

    CHECK(std::holds_alternative<CommandLineError>(parse_command_line({"--check"})));
    CHECK(std::holds_alternative<CommandLineError>(
        parse_command_line({"--check", "a.ini", "b.ini", "c.ini"})));
}
