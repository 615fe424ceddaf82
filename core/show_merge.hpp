// Merging the admin console's SHOW tables of several workers into one (`workers = N`): each
// worker collects the rows of its own clients, servers and pools on its own thread, and the
// console shows one table, as one process would (docs/admin.md, "Several workers").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/backend_messages.hpp"

namespace pgtether {

struct ShowTable {
    std::vector<protocol::ColumnDescription> columns;
    std::vector<std::vector<std::optional<std::string>>> rows;
};

// How a SHOW subject's tables combine.
enum class ShowMerge {
    Concatenate,  // one row per object (CLIENTS, SERVERS, SOCKETS, LOCKS, FDS): every worker's
    SumByKey,     // one row per key (POOLS, PEER_POOLS, STATS, TOTALS, LISTS, MEM,
                  // LOCK_FUNCTIONS): numbers added up, text taken from the first row of the key
    First,        // the same on every worker (CONFIG, DATABASES, USERS, VERSION, STATE, ...)
};

struct ShowMergeRule {
    ShowMerge merge = ShowMerge::First;
    std::size_t key_columns = 0;  // SumByKey: the leading columns that name a row
};

[[nodiscard]] ShowMergeRule show_merge_rule(std::string_view what);

// How one numeric column of a SumByKey table combines: added up, or the largest (waits, mean
// times, sizes: adding two workers' mean query times would say nothing).
enum class ColumnMerge { Sum, Max, First };
[[nodiscard]] ColumnMerge column_merge(std::string_view what, std::string_view column,
                                       std::uint32_t type_oid);

// The tables of every worker (the console's own first) as one. Tables without columns (a worker
// that had stopped) are left out. Rows keep the order in which their key first appears.
[[nodiscard]] ShowTable merge_show_tables(std::string_view what, std::vector<ShowTable> tables);

// RowDescription and DataRows of `table`.
void append_show_table(const ShowTable& table, std::string& out);

}  // namespace pgtether
