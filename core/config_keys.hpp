// The settings load_config() recognises, straight from its tables: for listings such as an admin
// console's SHOW CONFIG, and for tests that keep conf/pgtether.ini and docs/configuration.md
// complete.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace pgtether {

struct ConfigKeyInfo {
    std::string_view section;  // "pgbouncer" (also [pgtether]), "databases", "users" or "peers"
    std::string_view name;
    bool supported;  // pgtether acts on it
    // The value that changes nothing: the default of a supported key; for an unsupported key the
    // value that is not reported. nullopt: none (every use of the key is reported).
    std::optional<std::string_view> neutral_value;
    bool changeable;  // a running pgtether takes a new value (RELOAD, SET)
};

std::vector<ConfigKeyInfo> recognised_config_keys();

}  // namespace pgtether
