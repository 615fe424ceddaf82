#include <doctest/doctest.h>

#include "core/replication.hpp"

using namespace pgtether;

TEST_CASE("replication start-up parameter: PostgreSQL's values") {
    struct Row {
        const char* value;
        std::optional<ReplicationMode> mode;
    };
    const Row rows[] = {
        {"database", ReplicationMode::Logical},
        {"true", ReplicationMode::Physical},  {"TRUE", ReplicationMode::Physical},
        {"t", ReplicationMode::Physical},     {"yes", ReplicationMode::Physical},
        {"y", ReplicationMode::Physical},     {"on", ReplicationMode::Physical},
        {"1", ReplicationMode::Physical},     {"false", ReplicationMode::None},
        {"f", ReplicationMode::None},         {"no", ReplicationMode::None},
        {"n", ReplicationMode::None},         {"off", ReplicationMode::None},
        {"of", ReplicationMode::None},        {"0", ReplicationMode::None},
        {"o", std::nullopt},                  {"", std::nullopt},
        {"Database", std::nullopt},           {"truex", std::nullopt},
        {"2", std::nullopt},                  {"onn", std::nullopt},
    };
    for (const auto& row : rows) {
        CAPTURE(row.value);
        CHECK(parse_replication_mode(row.value) == row.mode);
    }
    CHECK(invalid_replication_value_message("x") ==
          "invalid value for parameter \"replication\": \"x\"");
    CHECK(std::string(replication_mode_name(ReplicationMode::Logical)) == "logical");
    CHECK(std::string(replication_mode_name(ReplicationMode::Physical)) == "physical");
    CHECK(std::string(replication_mode_name(ReplicationMode::None)) == "none");
}

TEST_CASE("replication start-up parameters: the entry's, the mode, then the client's") {
    using Params = std::vector<std::pair<std::string, std::string>>;
    const Params entry = {{"user", "repl"}, {"database", "app"}, {"application_name", "forced"}};
    const Params client = {{"application_name", "abc"},
                           {"options", "-c enable_seqscan=off"},
                           {"user", "someone_else"},
                           {"extra_float_digits", "3"}};
    const Params logical = replication_startup_parameters(entry, ReplicationMode::Logical, client);
    CHECK(logical == Params{{"user", "repl"},
                            {"database", "app"},
                            {"application_name", "forced"},
                            {"replication", "database"},
                            {"options", "-c enable_seqscan=off"},
                            {"extra_float_digits", "3"}});
    const Params physical =
        replication_startup_parameters({{"user", "u"}, {"database", "d"}},
                                       ReplicationMode::Physical, {{"application_name", "abc"}});
    CHECK(physical == Params{{"user", "u"},
                             {"database", "d"},
                             {"replication", "true"},
                             {"application_name", "abc"}});
}
