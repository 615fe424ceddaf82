// Session settings (SET, RESET, set_config, start-up parameters) under transaction pooling
// (docs/session-state.md).
//
// A setting is not a reason to tether a client: pgtether records the client's settings and
// replays the difference on whichever backend serves it next. The record comes from two places:
//   - the start-up packet (any parameter, and `-c name=value` inside `options`), and
//   - the backend itself: after a transaction that may have changed settings, pg_settings rows
//     with source 'session' (plus current_setting() for custom "app.x" names, which pg_settings
//     does not list) are the client's settings — a SET the transaction rolled back is gone.
// The six parameters PostgreSQL reports with ParameterStatus are handled by session_params.hpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pgtether {

// Lower-cased setting name → value, sorted by name.
class SettingsMap {
public:
    using Entry = std::pair<std::string, std::string>;

    [[nodiscard]] const std::string* find(std::string_view name) const;
    void set(std::string_view name, std::string_view value);
    bool erase(std::string_view name);
    void clear() { entries_.clear(); }
    [[nodiscard]] bool empty() const { return entries_.empty(); }
    [[nodiscard]] std::size_t size() const { return entries_.size(); }
    [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }
    // `base` with `overlay`'s entries replacing or adding.
    static SettingsMap merged(const SettingsMap& base, const SettingsMap& overlay);
    bool operator==(const SettingsMap&) const = default;

private:
    std::vector<Entry> entries_;
};

// The `options` start-up parameter: `-c name=value` and `--name=value` entries separated by white
// space, backslash escaping a character (PostgreSQL's pg_split_opts). Returns the settings, or
// an error message for anything else.
std::variant<std::vector<SettingsMap::Entry>, std::string> parse_startup_options(
    std::string_view options);

// What becomes of one `-c name=value` inside the `options` start-up parameter. PgBouncer 1.24
// (client.c, set_startup_options) reads options whatever ignore_startup_parameters says: a
// parameter it tracks is applied even when "options" is listed, a listed name is ignored, and
// "options" listed ignores every other name; anything else is refused. session_settings = replay
// applies what PgBouncer would refuse: pgtether replays it on every backend.
enum class StartupOptionUse { Apply, Ignore, Refuse };
struct StartupOptionRules {
    bool tracked = false;         // one of the six ParameterStatus parameters (session_params.hpp)
    bool listed = false;          // its name is in ignore_startup_parameters
    bool options_listed = false;  // "options" is in ignore_startup_parameters
    bool replay = false;          // session_settings = replay
};
[[nodiscard]] StartupOptionUse startup_option_use(const StartupOptionRules& rules);

// SQL that moves a backend whose session settings are `applied` to `wanted`: set_config() for
// what differs (it parses values as the configuration file does, so list values such as
// search_path keep their elements) and RESET for what the backend has and the client does not.
// Empty when nothing differs.
std::string build_settings_sync(const SettingsMap& wanted, const SettingsMap& applied);

// Whether the search_path in force (`session`'s, else `startup`'s) names the temporary schema
// (pg_temp, in any case or position): an unqualified CREATE may then make a temporary object
// without the word TEMP. Over-inclusive on purpose: the cost is a probe after each CREATE.
bool search_path_names_temp_schema(const SettingsMap& startup, const SettingsMap& session);

// Names with a dot ("myapp.tenant") that `sql` SETs, RESETs or passes to set_config() as a
// literal: custom settings pg_settings does not list, so the probe asks for them by name. Added
// to `names` (no duplicates, at most `limit` in all).
void collect_custom_setting_names(std::string_view sql, std::vector<std::string>& names,
                                  std::size_t limit);

}  // namespace pgtether
