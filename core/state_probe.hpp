// The tether's exact half: asking a backend which session state it holds, and deciding what a
// transaction must be probed for (docs/advisory-locks.md, docs/session-state.md).
//
// At an idle point (ReadyForQuery 'I', nothing outstanding) a backend runs no transaction, so
// every advisory lock pg_locks shows for it is a session-level lock, every relation in its
// temporary schema outlives transactions, and so on: one query answers for every kind at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"
#include "core/departure.hpp"
#include "core/lock_ledger.hpp"
#include "core/query_result.hpp"  // Row
#include "core/session_settings.hpp"
#include "core/tether_policy.hpp"
#include "protocol/sql_scanner.hpp"

namespace pgtether {

// "advisory locks", "temp tables", ... for logs.
const char* state_kind_name(std::uint32_t kind);
// "advisory_locks", "temp_tables", ... for metric labels.
const char* state_kind_label(std::uint32_t kind);

// Which kinds the configuration keeps correct (tether or replay); the others are ignored as
// PgBouncer does.
std::uint32_t tracked_kinds(const Config& config);
// Which kinds a transaction must be probed for, given the scanner's findings in its statements.
std::uint32_t kinds_to_probe(std::uint32_t scanner_effects, const Config& config);

// What a probe found.
struct StateReport {
    std::uint32_t present = 0;  // kinds found (settings excluded)
    std::vector<AdvisoryLockKey> locks;
    // One line per other kind found: (kind, "3: first_name, ...").
    std::vector<std::pair<std::uint32_t, std::string>> summaries;
    SettingsMap settings;  // session-level settings (when kStateSettings was probed)
};

// The probe for `kinds` (a mask of kProbedKinds): one query, one row per advisory lock and per
// setting, one summary row per other kind present. `custom_settings` are dotted names to read
// with current_setting() (pg_settings does not list them). `login_user` is the user the backend
// logged in as: a session_authorization other than it is the client's setting.
std::string build_state_probe(std::uint32_t kinds, const std::vector<std::string>& custom_settings,
                              std::string_view login_user);
// Decodes the probe's rows; nullopt if a row is not what the probe returns.
std::optional<StateReport> decode_state_probe(const std::vector<Row>& rows);

// "advisory locks 42 exclusive, 1,2 shared; temp tables 2: t1, ..." (`locks`: the rendered keys,
// describe_locks or LockLedger::describe)
std::string describe_state(std::uint32_t kinds, const std::string& locks,
                           const std::vector<std::pair<std::uint32_t, std::string>>& summaries);

// Releases every session-level advisory lock of the backend (not transaction-level ones).
inline constexpr const char* kUnlockAll = kUnlockAllQuery;  // core/departure.hpp

}  // namespace pgtether
