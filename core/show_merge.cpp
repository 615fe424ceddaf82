#include "core/show_merge.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace pgtether {

namespace {

constexpr std::uint32_t kInt4 = 23;
constexpr std::uint32_t kInt8 = 20;
constexpr std::uint32_t kNumeric = 1700;

bool numeric(std::uint32_t oid) { return oid == kInt4 || oid == kInt8 || oid == kNumeric; }

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<std::int64_t> as_number(const std::optional<std::string>& value) {
    if (!value) return std::nullopt;
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
    if (ec != std::errc() || end != value->data() + value->size()) return std::nullopt;
    return n;
}

}  // namespace

ShowMergeRule show_merge_rule(std::string_view what) {
    if (what == "clients" || what == "servers" || what == "sockets" ||
        what == "active_sockets" || what == "locks" || what == "fds" ||
        what == "listens" || what == "hosts") {
        return {ShowMerge::Concatenate, 0};
    }
    if (what == "pools") return {ShowMerge::SumByKey, 2};  // database, user
    if (what == "peer_pools") return {ShowMerge::SumByKey, 1};  // peer_id
    // Each worker discovers the lock functions of the databases its own pools use: the union.
    if (what == "lock_functions") return {ShowMerge::SumByKey, 4};  // database, schema, name, kind
    if (what == "stats" || what == "stats_totals" || what == "stats_averages" ||
        what == "totals" || what == "lists" || what == "mem") {
        return {ShowMerge::SumByKey, 1};  // database, or the name of the figure
    }
    return {ShowMerge::First, 0};
}

ColumnMerge column_merge(std::string_view what, std::string_view column, std::uint32_t type_oid) {
    if (!numeric(type_oid)) return ColumnMerge::First;
    // Waits and mean durations: the worst worker's. Sizes of an object: the same everywhere.
    if (starts_with(column, "maxwait") || (starts_with(column, "avg_") && ends_with(column, "_time")) ||
        (what == "mem" && column == "size")) {
        return ColumnMerge::Max;
    }
    return ColumnMerge::Sum;
}

ShowTable merge_show_tables(std::string_view what, std::vector<ShowTable> tables) {
    ShowTable out;
    std::vector<ShowTable*> present;
    for (auto& table : tables) {
        if (!table.columns.empty()) present.push_back(&table);
    }
    if (present.empty()) return out;
    out.columns = present.front()->columns;
    const ShowMergeRule rule = show_merge_rule(what);
    if (rule.merge == ShowMerge::First || present.size() == 1) {
        out.rows = std::move(present.front()->rows);
        return out;
    }
    if (rule.merge == ShowMerge::Concatenate) {
        for (ShowTable* table : present) {
            for (auto& row : table->rows) out.rows.push_back(std::move(row));
        }
        return out;
    }
    // SHOW LISTS: "databases", "users", "peers" and the like name configuration, the same on
    // every worker; only the counts of connections and pools add up.
    auto lists_row_adds_up = [&](const std::string& name) {
        return ends_with(name, "_clients") || ends_with(name, "_servers") || name == "pools";
    };
    // SHOW MEM: user_cache and db_cache count the auth_file's users and the configured
    // databases, which every worker shares; the other rows are each worker's own.
    auto mem_row_adds_up = [&](const std::string& name) {
        return name != "user_cache" && name != "db_cache";
    };
    std::vector<ColumnMerge> merges;
    for (const auto& column : out.columns) {
        merges.push_back(column_merge(what, column.name, column.type_oid));
    }
    for (ShowTable* table : present) {
        for (auto& row : table->rows) {
            auto same_key = [&](const std::vector<std::optional<std::string>>& other) {
                for (std::size_t i = 0; i < rule.key_columns && i < row.size(); ++i) {
                    if (other.at(i) != row[i]) return false;
                }
                return true;
            };
            auto it = std::find_if(out.rows.begin(), out.rows.end(), same_key);
            if (it == out.rows.end()) {
                out.rows.push_back(std::move(row));
                continue;
            }
            if (what == "lists" && !(row.at(0) && lists_row_adds_up(*row.at(0)))) continue;
            if (what == "mem" && !(row.at(0) && mem_row_adds_up(*row.at(0)))) continue;
            for (std::size_t i = rule.key_columns; i < row.size() && i < merges.size(); ++i) {
                if (merges[i] == ColumnMerge::First) {
                    // The first worker's value, unless it has none and another has.
                    if (!(*it)[i] && row[i]) (*it)[i] = std::move(row[i]);
                    continue;
                }
                auto mine = as_number((*it)[i]);
                auto theirs = as_number(row[i]);
                if (!mine || !theirs || merges[i] == ColumnMerge::First) continue;
                std::int64_t merged =
                    merges[i] == ColumnMerge::Sum ? *mine + *theirs : std::max(*mine, *theirs);
                (*it)[i] = std::to_string(merged);
            }
        }
    }
    return out;
}

void append_show_table(const ShowTable& table, std::string& out) {
    protocol::append_row_description(out, table.columns);
    for (const auto& row : table.rows) protocol::append_data_row(out, row);
}

}  // namespace pgtether
