#include "core/metrics_merge.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

namespace pgtether {

namespace {

// A value in millionths: "12" or "0.000866" (what MetricsWriter writes).
struct Micros {
    std::int64_t value = 0;
    bool decimal = false;
};

std::optional<Micros> parse_value(std::string_view text) {
    Micros out;
    std::int64_t whole = 0;
    std::size_t i = 0;
    if (text.empty()) return std::nullopt;
    for (; i < text.size() && text[i] != '.'; ++i) {
        if (text[i] < '0' || text[i] > '9') return std::nullopt;
        whole = whole * 10 + (text[i] - '0');
    }
    std::int64_t fraction = 0;
    int digits = 0;
    if (i < text.size()) {
        out.decimal = true;
        for (++i; i < text.size(); ++i) {
            if (text[i] < '0' || text[i] > '9') return std::nullopt;
            if (digits < 6) {
                fraction = fraction * 10 + (text[i] - '0');
                ++digits;
            }
        }
    }
    for (; digits < 6; ++digits) fraction *= 10;
    out.value = whole * 1'000'000 + fraction;
    return out;
}

std::string format_value(const Micros& m) {
    if (!m.decimal) return std::to_string(m.value / 1'000'000);
    std::string fraction = std::to_string(m.value % 1'000'000);
    fraction.insert(0, 6 - fraction.size(), '0');
    return std::to_string(m.value / 1'000'000) + "." + fraction;
}

struct Family {
    std::vector<std::string> meta;  // # HELP / # TYPE lines
    std::vector<std::pair<std::string, std::string>> samples;  // name{labels}, value
    std::map<std::string, std::size_t> index;
    bool takes_max = false;
};

void combine(std::string& mine, const std::string& theirs, bool takes_max) {
    auto a = parse_value(mine);
    auto b = parse_value(theirs);
    if (!a || !b) return;  // not a number we write: keep the first
    Micros merged;
    merged.decimal = a->decimal || b->decimal;
    merged.value = takes_max ? std::max(a->value, b->value) : a->value + b->value;
    mine = format_value(merged);
}

}  // namespace

bool metrics_family_takes_max(std::string_view name) {
    // Configured limits and process-wide figures: every worker reports the same value.
    return name == "pgtether_info" || name == "pgtether_paused" || name == "pgtether_pool_paused" ||
           name == "pgtether_pool_max_wait_seconds" || name == "pgtether_lock_functions" ||
           name == "pgtether_lock_functions_unknown" || name == "pgtether_max_client_conn" ||
           name == "pgtether_pool_size" || name == "pgtether_pool_reserve_size" ||
           name == "pgtether_pool_tether_reserve_size" || name == "pgtether_process_open_fds" ||
           name == "pgtether_process_max_fds" || name == "pgtether_host_up" ||
           name == "pgtether_host_role" || name == "pgtether_host_backoff_seconds" ||
           name == "pgtether_host_failures";
}

std::string merge_metrics_texts(const std::vector<std::string>& texts) {
    std::vector<std::string> order;
    std::map<std::string, Family> families;
    bool eof = false;
    for (const std::string& text : texts) {
        Family* current = nullptr;
        std::size_t pos = 0;
        while (pos < text.size()) {
            std::size_t end = text.find('\n', pos);
            if (end == std::string::npos) end = text.size();
            std::string line = text.substr(pos, end - pos);
            pos = end + 1;
            if (line.empty()) continue;
            if (line == "# EOF") {
                eof = true;
                continue;
            }
            if (line.rfind("# ", 0) == 0) {
                // "# HELP name ..." / "# TYPE name ...": the family's name is the third word.
                std::size_t start = line.find(' ', 2);
                if (start == std::string::npos) continue;
                std::size_t stop = line.find(' ', start + 1);
                std::string name = line.substr(start + 1, stop == std::string::npos
                                                              ? std::string::npos
                                                              : stop - start - 1);
                auto [it, created] = families.try_emplace(name);
                if (created) {
                    order.push_back(name);
                    it->second.takes_max = metrics_family_takes_max(name);
                }
                // Each worker writes the same two lines: keep one copy.
                if (std::find(it->second.meta.begin(), it->second.meta.end(), line) ==
                    it->second.meta.end()) {
                    it->second.meta.push_back(line);
                }
                current = &it->second;
                continue;
            }
            if (!current) continue;
            std::size_t space = line.rfind(' ');
            if (space == std::string::npos) continue;
            std::string key = line.substr(0, space);
            std::string value = line.substr(space + 1);
            auto found = current->index.find(key);
            if (found == current->index.end()) {
                current->index.emplace(key, current->samples.size());
                current->samples.emplace_back(std::move(key), std::move(value));
            } else {
                combine(current->samples[found->second].second, value, current->takes_max);
            }
        }
    }
    std::string out;
    for (const std::string& name : order) {
        const Family& family = families.at(name);
        for (const auto& line : family.meta) out += line + "\n";
        for (const auto& [key, value] : family.samples) out += key + " " + value + "\n";
    }
    if (eof) out += "# EOF\n";
    return out;
}

}  // namespace pgtether
