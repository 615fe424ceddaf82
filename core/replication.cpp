#include "core/replication.hpp"

#include <algorithm>

#include "protocol/ascii.hpp"

namespace pgtether {

const char* replication_mode_name(ReplicationMode mode) {
    switch (mode) {
        case ReplicationMode::None: return "none";
        case ReplicationMode::Physical: return "physical";
        case ReplicationMode::Logical: return "logical";
    }
    return "none";
}

namespace {

// PostgreSQL's parse_bool_with_len (src/backend/utils/adt/bool.c): a case-insensitive prefix of
// true/false/yes/no, "on"/"off" (at least two letters: "o" is ambiguous), or exactly 1/0.
std::optional<bool> parse_postgres_bool(std::string_view value) {
    std::string lower(value);
    for (char& c : lower) c = protocol::ascii_lower(c);
    auto prefix_of = [&](std::string_view word) {
        return !lower.empty() && lower.size() <= word.size() && word.starts_with(lower);
    };
    if (prefix_of("true") || prefix_of("yes")) return true;
    if (prefix_of("false") || prefix_of("no")) return false;
    if (lower.size() >= 2 && std::string_view("off").starts_with(lower)) return false;
    if (lower == "on") return true;
    if (lower == "1") return true;
    if (lower == "0") return false;
    return std::nullopt;
}

}  // namespace

std::optional<ReplicationMode> parse_replication_mode(std::string_view value) {
    if (value == "database") return ReplicationMode::Logical;
    const auto flag = parse_postgres_bool(value);
    if (!flag) return std::nullopt;
    return *flag ? ReplicationMode::Physical : ReplicationMode::None;
}

std::string invalid_replication_value_message(std::string_view value) {
    return "invalid value for parameter \"replication\": \"" + std::string(value) + "\"";
}

std::vector<std::pair<std::string, std::string>> replication_startup_parameters(
    std::vector<std::pair<std::string, std::string>> entry, ReplicationMode mode,
    const std::vector<std::pair<std::string, std::string>>& client) {
    entry.emplace_back("replication", mode == ReplicationMode::Logical ? "database" : "true");
    const std::size_t entry_count = entry.size();
    for (const auto& parameter : client) {
        const auto begin = entry.begin();
        const auto end = begin + static_cast<std::ptrdiff_t>(entry_count);
        const auto same_name = [&](const auto& p) { return p.first == parameter.first; };
        if (std::find_if(begin, end, same_name) != end) continue;
        entry.push_back(parameter);
    }
    return entry;
}

}  // namespace pgtether
