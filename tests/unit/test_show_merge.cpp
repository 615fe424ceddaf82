// SHOW tables of several workers merged into one (core/show_merge.hpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/show_merge.hpp"

using namespace pgtether;

namespace {

constexpr std::uint32_t kText = 25;
constexpr std::uint32_t kInt4 = 23;
constexpr std::uint32_t kInt8 = 20;

using Row = std::vector<std::optional<std::string>>;

ShowTable pools(std::vector<Row> rows) {
    ShowTable t;
    t.columns = {{"database", kText}, {"user", kText},   {"cl_active", kInt4},
                 {"maxwait", kInt4},   {"pool_mode", kText}, {"sv_idle", kInt8}};
    t.rows = std::move(rows);
    return t;
}

}  // namespace

TEST_CASE("merge rules per SHOW subject") {
    CHECK(show_merge_rule("clients").merge == ShowMerge::Concatenate);
    CHECK(show_merge_rule("servers").merge == ShowMerge::Concatenate);
    CHECK(show_merge_rule("pools").merge == ShowMerge::SumByKey);
    CHECK(show_merge_rule("pools").key_columns == 2);
    CHECK(show_merge_rule("peer_pools").merge == ShowMerge::SumByKey);
    CHECK(show_merge_rule("peer_pools").key_columns == 1);  // peer_id
    CHECK(show_merge_rule("stats").key_columns == 1);
    CHECK(show_merge_rule("config").merge == ShowMerge::First);
    CHECK(show_merge_rule("databases").merge == ShowMerge::First);
    CHECK(column_merge("pools", "cl_active", kInt4) == ColumnMerge::Sum);
    CHECK(column_merge("pools", "maxwait_us", kInt4) == ColumnMerge::Max);
    CHECK(column_merge("stats", "avg_xact_time", kInt8) == ColumnMerge::Max);
    CHECK(column_merge("stats", "avg_xact_count", kInt8) == ColumnMerge::Sum);
    CHECK(column_merge("pools", "pool_mode", kText) == ColumnMerge::First);
}

TEST_CASE("SHOW POOLS: one row per pool, counts added up, waits the longest") {
    std::vector<ShowTable> tables;
    tables.push_back(pools({{"db", "a", "2", "1", "transaction", "3"},
                            {"pgbouncer", "pgbouncer", "1", "0", "statement", "0"}}));
    tables.push_back(pools({{"db", "b", "1", "0", "transaction", "0"},
                            {"db", "a", "5", "4", "transaction", "1"},
                            {"pgbouncer", "pgbouncer", "0", "0", "statement", "0"}}));
    auto merged = merge_show_tables("pools", tables);
    REQUIRE(merged.rows.size() == 3);
    CHECK(merged.rows[0] == Row{"db", "a", "7", "4", "transaction", "4"});
    CHECK(merged.rows[1] == Row{"pgbouncer", "pgbouncer", "1", "0", "statement", "0"});
    CHECK(merged.rows[2] == Row{"db", "b", "1", "0", "transaction", "0"});
}

TEST_CASE("SHOW CLIENTS lists every worker's; SHOW CONFIG is the first worker's") {
    ShowTable a;
    a.columns = {{"id", kInt8}};
    a.rows = {{"1"}, {"3"}};
    ShowTable b = a;
    b.rows = {{"2"}};
    auto clients = merge_show_tables("clients", {a, b});
    CHECK(clients.rows == std::vector<Row>{{"1"}, {"3"}, {"2"}});
    auto config = merge_show_tables("config", {a, b});
    CHECK(config.rows == std::vector<Row>{{"1"}, {"3"}});
}

TEST_CASE("SHOW LISTS adds up connections and pools, not the configuration") {
    ShowTable a;
    a.columns = {{"list", kText}, {"items", kInt4}};
    a.rows = {{"databases", "2"}, {"pools", "1"}, {"used_clients", "3"}, {"free_servers", "0"}};
    ShowTable b = a;
    b.rows = {{"databases", "2"}, {"pools", "2"}, {"used_clients", "4"}, {"free_servers", "1"}};
    auto merged = merge_show_tables("lists", {a, b});
    CHECK(merged.rows == std::vector<Row>{{"databases", "2"},
                                          {"pools", "3"},
                                          {"used_clients", "7"},
                                          {"free_servers", "1"}});
}

TEST_CASE("SHOW MEM adds up each worker's objects and buffers, not the shared configuration") {
    ShowTable a;
    a.columns = {{"name", kText}, {"size", kInt4}, {"used", kInt4}, {"free", kInt4},
                 {"memtotal", kInt4}};
    a.rows = {{"user_cache", "64", "5", "0", "320"},
              {"db_cache", "400", "2", "0", "800"},
              {"client_cache", "1000", "3", "0", "3000"},
              {"connection_buffers", "2048", "2", "0", "3072"}};
    ShowTable b = a;
    b.rows = {{"user_cache", "64", "5", "0", "320"},
              {"db_cache", "400", "2", "0", "800"},
              {"client_cache", "1000", "1", "0", "1000"},
              {"connection_buffers", "4096", "1", "0", "4096"}};
    auto merged = merge_show_tables("mem", {a, b});
    CHECK(merged.rows == std::vector<Row>{{"user_cache", "64", "5", "0", "320"},
                                          {"db_cache", "400", "2", "0", "800"},
                                          {"client_cache", "1000", "4", "0", "4000"},
                                          {"connection_buffers", "4096", "3", "0", "7168"}});
}

TEST_CASE("a stopped worker's empty table is left out; NULLs and text stay as they are") {
    ShowTable stopped;
    auto merged =
        merge_show_tables("pools", {stopped, pools({{"db", "a", std::nullopt, "1", "x", "2"}})});
    CHECK(merged.columns.size() == 6);
    CHECK(merged.rows == std::vector<Row>{{"db", "a", std::nullopt, "1", "x", "2"}});
    CHECK(merge_show_tables("pools", {stopped}).columns.empty());
}

TEST_CASE("SHOW LOCK_FUNCTIONS: the union of the workers' names, `workers` counting who has each") {
    auto functions = [](std::vector<Row> rows) {
        ShowTable t;
        t.columns = {{"database", kText}, {"schema", kText},  {"name", kText},
                     {"kind", kText},     {"found", kText},   {"discovered_at", kText},
                     {"checked_at", kText}, {"workers", kInt4}};
        t.rows = std::move(rows);
        return t;
    };
    const Row builtin{"app", "pg_catalog", "pg_advisory_lock", "function", "builtin", "t1", "c1",
                      "1"};
    // The second worker has not taken the first one's discovery of later_lock yet.
    auto merged = merge_show_tables(
        "lock_functions",
        {functions({builtin,
                    {"app", "public", "later_lock", "function", "discovered", "t1", "c1", "1"}}),
         functions({builtin})});
    REQUIRE(merged.rows.size() == 2);
    CHECK(merged.rows[0] ==
          Row{"app", "pg_catalog", "pg_advisory_lock", "function", "builtin", "t1", "c1", "2"});
    CHECK(merged.rows[1] ==
          Row{"app", "public", "later_lock", "function", "discovered", "t1", "c1", "1"});
}
