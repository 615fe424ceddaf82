#include "core/config_diff.hpp"

#include <map>

#include "core/config_values.hpp"

namespace pgtether {

namespace {

std::string quoted_if_needed(const std::string& value) {
    if (!value.empty() && value.find_first_of(" \t'\\") == std::string::npos) return value;
    std::string out = "'";
    for (char c : value) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out + "'";
}

// Entries of one section as name -> definition.
template <typename Entries, typename NameOf>
void diff_entries(const std::string& section, const Entries& running, const Entries& next,
                  NameOf name_of, std::vector<ConfigChange>& out) {
    std::map<std::string, std::string> before;
    std::map<std::string, std::string> after;
    for (const auto& entry : running)
        before[name_of(entry)] = entry.definition;
    for (const auto& entry : next)
        after[name_of(entry)] = entry.definition;
    auto b = before.begin();
    auto a = after.begin();
    auto change = [&](const std::string& name, const std::string* was, const std::string* is) {
        ConfigChange c;
        c.key = section + " " + name;
        c.was_set = was != nullptr;
        c.is_set = is != nullptr;
        if (was) c.old_value = redact_connstring(*was);
        if (is) c.new_value = redact_connstring(*is);
        // Only a password differs: say so without showing either.
        if (was && is && c.old_value == c.new_value) {
            c.old_value += " (password)";
            c.new_value += " (password changed)";
        }
        out.push_back(std::move(c));
    };
    while (b != before.end() || a != after.end()) {
        if (a == after.end() || (b != before.end() && b->first < a->first)) {
            change(b->first, &b->second, nullptr);
            ++b;
        } else if (b == before.end() || a->first < b->first) {
            change(a->first, nullptr, &a->second);
            ++a;
        } else {
            if (b->second != a->second) change(b->first, &b->second, &a->second);
            ++a;
            ++b;
        }
    }
}

std::vector<DatabaseConfig> all_databases(const Config& config) {
    std::vector<DatabaseConfig> out = config.databases;
    if (config.fallback_database) out.push_back(*config.fallback_database);
    return out;
}

template <typename Map>
std::vector<typename Map::mapped_type> values_of(const Map& map) {
    std::vector<typename Map::mapped_type> out;
    for (const auto& [key, value] : map)
        out.push_back(value);
    return out;
}

}  // namespace

std::string ConfigChange::describe() const {
    std::string out = key + ": ";
    if (!was_set) {
        out += "added (" + new_value + ")";
    } else if (!is_set) {
        out += "removed (was " + old_value + ")";
    } else {
        out += (old_value.empty() ? "\"\"" : old_value) + " -> " +
               (new_value.empty() ? "\"\"" : new_value);
    }
    if (needs_restart) out += " (needs a restart: a RELOAD keeps the running value)";
    return out;
}

std::string redact_connstring(const std::string& definition) {
    auto pairs = parse_connstring(definition);
    if (!pairs) return definition;
    std::string out;
    for (const auto& [key, value] : *pairs.value) {
        if (!out.empty()) out += ' ';
        out += key + "=" + (key == "password" ? std::string("***") : quoted_if_needed(value));
    }
    return out;
}

std::vector<ConfigChange> diff_configs(const Config& running, const Config& next) {
    std::vector<ConfigChange> out;
    const auto before = describe_settings(running);
    const auto after = describe_settings(next);
    // Both lists hold every key of the same table in the same order.
    for (std::size_t i = 0; i < before.size() && i < after.size(); ++i) {
        if (before[i].value == after[i].value) continue;
        // Unless a file names one, conffile is the path each was loaded from: comparing two
        // files (--check NEW RUNNING) is not a change either of them makes.
        if (before[i].key == "conffile" && running.other_settings.count("conffile") == 0 &&
            next.other_settings.count("conffile") == 0) {
            continue;
        }
        ConfigChange c;
        c.key = before[i].key;
        c.old_value = before[i].value.value_or("(not set)");
        c.new_value = after[i].value.value_or("(not set)");
        c.needs_restart = !before[i].changeable;
        out.push_back(std::move(c));
    }
    diff_entries(
        "[databases]", all_databases(running), all_databases(next),
        [](const DatabaseConfig& d) { return d.name; }, out);
    diff_entries(
        "[users]", values_of(running.users), values_of(next.users),
        [](const UserConfig& u) { return u.name; }, out);
    diff_entries(
        "[peers]", values_of(running.peers), values_of(next.peers),
        [](const PeerConfig& p) { return std::to_string(p.id); }, out);
    return out;
}

}  // namespace pgtether
