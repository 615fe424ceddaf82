// What a RELOAD changes: the differences between the running configuration and a newly loaded
// one, setting by setting (pgtether --check FILE RUNNING_FILE prints them; a reload logs them).
// Pure: two loaded configurations in, a list of changes out.
#pragma once

#include <string>
#include <vector>

#include "core/config.hpp"

namespace pgtether {

struct ConfigChange {
    // "pool_mode" for a [pgbouncer] key; "[databases] app", "[users] bob", "[peers] 2" for an
    // entry (the fallback database is "[databases] *").
    std::string key;
    // The values as the ini file spells them; "" with `was_set`/`is_set` false when the key or
    // entry is absent on that side. A password in a connection string is shown as "***".
    std::string old_value;
    std::string new_value;
    bool was_set = true;
    bool is_set = true;
    // Settings a running pgtether cannot change (listen_port, pidfile, ...): a RELOAD keeps the
    // running value until a restart.
    bool needs_restart = false;

    // "pool_mode: session -> transaction", "[databases] app: added (host=...)", with
    // " (needs a restart)" for fixed settings.
    [[nodiscard]] std::string describe() const;
};

// In order: [pgbouncer] keys alphabetically, then [databases], [users], [peers] entries by name.
[[nodiscard]] std::vector<ConfigChange> diff_configs(const Config& running, const Config& next);

// A connection string with the value of every `password` key replaced by "***" (for logs and
// --check output); returned unchanged when it does not parse.
[[nodiscard]] std::string redact_connstring(const std::string& definition);

}  // namespace pgtether
