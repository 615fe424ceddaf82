#include "core/session_settings.hpp"

#include <algorithm>
#include <cctype>

#include "core/session_params.hpp"

namespace pgtether {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool is_ident_char(char c) {
    auto b = static_cast<unsigned char>(c);
    return std::isalnum(b) || c == '_' || c == '$' || c == '.' || b >= 0x80;
}

}  // namespace

const std::string* SettingsMap::find(std::string_view name) const {
    std::string key = lower(name);
    auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                               [](const Entry& e, const std::string& k) { return e.first < k; });
    return it != entries_.end() && it->first == key ? &it->second : nullptr;
}

void SettingsMap::set(std::string_view name, std::string_view value) {
    std::string key = lower(name);
    auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                               [](const Entry& e, const std::string& k) { return e.first < k; });
    if (it != entries_.end() && it->first == key) {
        it->second = std::string(value);
    } else {
        entries_.insert(it, {std::move(key), std::string(value)});
    }
}

bool SettingsMap::erase(std::string_view name) {
    std::string key = lower(name);
    auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                               [](const Entry& e, const std::string& k) { return e.first < k; });
    if (it == entries_.end() || it->first != key) return false;
    entries_.erase(it);
    return true;
}

SettingsMap SettingsMap::merged(const SettingsMap& base, const SettingsMap& overlay) {
    if (overlay.empty()) return base;
    SettingsMap out = base;
    for (const auto& [name, value] : overlay.entries_) out.set(name, value);
    return out;
}

std::variant<std::vector<SettingsMap::Entry>, std::string> parse_startup_options(
    std::string_view options) {
    // Split on unescaped white space; a backslash takes the next character literally.
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (std::size_t i = 0; i < options.size(); ++i) {
        char c = options[i];
        if (c == '\\' && i + 1 < options.size()) {
            word.push_back(options[++i]);
            in_word = true;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (in_word) words.push_back(std::move(word));
            word.clear();
            in_word = false;
        } else {
            word.push_back(c);
            in_word = true;
        }
    }
    if (in_word) words.push_back(std::move(word));

    std::vector<SettingsMap::Entry> settings;
    auto add = [&](std::string_view assignment) -> bool {
        auto eq = assignment.find('=');
        if (eq == std::string_view::npos || eq == 0) return false;
        std::string name(assignment.substr(0, eq));
        // PostgreSQL accepts '-' for '_' in option names (ParseLongOption).
        std::replace(name.begin(), name.end(), '-', '_');
        settings.emplace_back(std::move(name), std::string(assignment.substr(eq + 1)));
        return true;
    };
    // PgBouncer's words (client.c, set_startup_options), which its clients and test suite match,
    // followed by the word that broke the rule.
    auto refused = [](const std::string& offending) {
        return "unsupported options startup parameter: only '-c config=val' and '--config=val' "
               "are allowed, not \"" + offending + "\"";
    };
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w == "-c" && i + 1 < words.size()) {
            if (!add(words[++i])) return refused("-c " + words[i]);
        } else if (w.size() > 2 && (w.starts_with("-c") || w.starts_with("--"))) {
            if (!add(std::string_view(w).substr(2))) return refused(w);
        } else {
            return refused(w);
        }
    }
    return settings;
}

StartupOptionUse startup_option_use(const StartupOptionRules& rules) {
    if (rules.tracked) return StartupOptionUse::Apply;
    if (rules.listed || rules.options_listed) return StartupOptionUse::Ignore;
    return rules.replay ? StartupOptionUse::Apply : StartupOptionUse::Refuse;
}

namespace {

// Who the session acts as. Neither is listed in pg_settings, so the probe reads them by name
// (core/state_probe.cpp). They are taken away before anything else is synced, so the rest runs
// as the login user (a setting only a superuser may change would be refused under a lesser
// role), and given last, session_authorization before role: SET SESSION AUTHORIZATION resets
// the role.
constexpr std::string_view kIdentitySettings[] = {"session_authorization", "role"};

bool is_identity_setting(std::string_view name) {
    return std::find(std::begin(kIdentitySettings), std::end(kIdentitySettings), name) !=
           std::end(kIdentitySettings);
}

std::string quote_ident(std::string_view name) {
    std::string ident = "\"";
    for (char c : name) {
        if (c == '"') ident.push_back('"');
        ident.push_back(c);
    }
    ident.push_back('"');
    return ident;
}

void append_set_config(std::string& calls, std::string_view name, std::string_view value) {
    calls += calls.empty() ? "SELECT " : ", ";
    calls +=
        "pg_catalog.set_config(" + quote_literal(name) + ", " + quote_literal(value) + ", false)";
}

}  // namespace

std::string build_settings_sync(const SettingsMap& wanted, const SettingsMap& applied) {
    std::string calls;
    for (const auto& [name, value] : wanted.entries()) {
        if (is_identity_setting(name)) continue;
        const std::string* current = applied.find(name);
        if (current && *current == value) continue;
        append_set_config(calls, name, value);
    }
    std::string rest;
    if (!calls.empty()) rest = calls + ";";
    for (const auto& [name, value] : applied.entries()) {
        // The name comes from the backend itself (pg_settings) or was accepted by it; quoting it
        // as an identifier keeps odd spellings harmless.
        if (!is_identity_setting(name) && !wanted.find(name)) {
            rest += "RESET " + quote_ident(name) + ";";
        }
    }
    // The identity is taken away and given back when it differs, and also around any other
    // change on a backend that acts as someone else than the login user.
    bool cycle_identity = false;
    for (std::string_view name : kIdentitySettings) {
        const std::string* want = wanted.find(name);
        const std::string* have = applied.find(name);
        if ((want == nullptr) != (have == nullptr) || (want && *want != *have) ||
            (have && !rest.empty())) {
            cycle_identity = true;
        }
    }
    if (!cycle_identity) return rest;
    std::string sql;
    for (std::string_view name : kIdentitySettings) {
        if (applied.find(name)) sql += "RESET " + quote_ident(name) + ";";
    }
    sql += rest;
    std::string identity;
    for (std::string_view name : kIdentitySettings) {
        if (const std::string* value = wanted.find(name)) append_set_config(identity, name, *value);
    }
    if (!identity.empty()) sql += identity + ";";
    return sql;
}

bool search_path_names_temp_schema(const SettingsMap& startup, const SettingsMap& session) {
    const std::string* path = session.find("search_path");
    if (!path) path = startup.find("search_path");
    return path && lower(*path).find("pg_temp") != std::string::npos;
}

void collect_custom_setting_names(std::string_view sql, std::vector<std::string>& names,
                                  std::size_t limit) {
    auto add = [&](std::string name) {
        if (name.find('.') == std::string::npos || name.front() == '.' || name.back() == '.') {
            return;
        }
        if (names.size() >= limit) return;
        if (std::find(names.begin(), names.end(), name) == names.end()) {
            names.push_back(std::move(name));
        }
    };
    // A light lexer: words outside comments and literals; the literal right after
    // "set_config(" is taken as a name. Over-inclusive on purpose: probing a name that is not
    // set costs nothing (current_setting(name, true) is NULL).
    std::string word;
    bool expect_name = false;    // the last word was SET or RESET (or SESSION after SET)
    bool after_set_config = false;
    std::size_t i = 0;
    auto finish_word = [&]() {
        if (word.empty()) return;
        std::string lowered = lower(word);
        if (expect_name && lowered != "session" && lowered != "local") {
            add(lowered);
            expect_name = false;
        } else if (lowered == "set" || lowered == "reset") {
            expect_name = true;
        } else if (lowered != "session") {
            expect_name = false;
        }
        after_set_config = lowered == "set_config";
        word.clear();
    };
    while (i < sql.size()) {
        char c = sql[i];
        if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
            finish_word();
            while (i < sql.size() && sql[i] != '\n') ++i;
        } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
            finish_word();
            i += 2;
            while (i + 1 < sql.size() && !(sql[i] == '*' && sql[i + 1] == '/')) ++i;
            i += 2;
        } else if (c == '\'') {
            finish_word();
            std::string literal;
            ++i;
            while (i < sql.size()) {
                if (sql[i] == '\'' && i + 1 < sql.size() && sql[i + 1] == '\'') {
                    literal.push_back('\'');
                    i += 2;
                } else if (sql[i] == '\'') {
                    ++i;
                    break;
                } else {
                    literal.push_back(sql[i++]);
                }
            }
            if (after_set_config) add(lower(literal));
            after_set_config = false;
            expect_name = false;
        } else if (c == '"') {
            finish_word();
            std::string ident;
            ++i;
            while (i < sql.size() && sql[i] != '"') ident.push_back(sql[i++]);
            ++i;
            if (expect_name) add(ident);
            expect_name = false;
        } else if (is_ident_char(c)) {
            word.push_back(c);
            ++i;
        } else {
            finish_word();
            // "set_config (" keeps waiting for its literal; anything else ends the wait.
            if (c != '(' && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                after_set_config = false;
            }
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') expect_name = false;
            ++i;
        }
    }
    finish_word();
}

}  // namespace pgtether
