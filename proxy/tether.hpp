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
#include <vector>

#include "protocol/sql_scanner.hpp"
#include "proxy/config.hpp"
#include "proxy/session_settings.hpp"

namespace pgtether {

// Kinds of session state, as bit flags.
enum StateKind : std::uint32_t {
    kStateAdvisoryLock = 1u << 0,
    kStateTempTable = 1u << 1,   // relations in pg_my_temp_schema()
    kStateListen = 1u << 2,      // pg_listening_channels()
    kStateCursor = 1u << 3,      // WITH HOLD cursors (pg_cursors.is_holdable)
    kStatePrepare = 1u << 4,     // SQL-level PREPARE (pg_prepared_statements.from_sql)
    kStateLoad = 1u << 5,        // LOAD: cannot be undone, so never probed (see tether rules)
    kStateSettings = 1u << 6,    // SET / RESET / set_config: replayed, never a tether
    kStateUnknown = 1u << 7,     // a probe failed: tethered to be safe
};
// The kinds that tether (everything but settings).
inline constexpr std::uint32_t kTetherKinds = kStateAdvisoryLock | kStateTempTable |
                                               kStateListen | kStateCursor | kStatePrepare |
                                               kStateLoad | kStateUnknown;
// The kinds a probe can observe.
inline constexpr std::uint32_t kProbedKinds = kStateAdvisoryLock | kStateTempTable | kStateListen |
                                              kStateCursor | kStatePrepare | kStateSettings;

// "advisory locks", "temp tables", ... for logs.
const char* state_kind_name(std::uint32_t kind);
// "advisory_locks", "temp_tables", ... for metric labels.
const char* state_kind_label(std::uint32_t kind);

// Which kinds the configuration keeps correct (tether or replay); the others are ignored as
// PgBouncer does.
std::uint32_t tracked_kinds(const Config& config);
// Which kinds a transaction must be probed for, given the scanner's findings in its statements.
std::uint32_t kinds_to_probe(std::uint32_t scanner_effects, const Config& config);

// One advisory lock a backend holds. pg_locks (PostgreSQL docs §54.12) shows a bigint key as its
// high half in classid and low half in objid with objsubid 1, and a two-int4 key as classid,
// objid with objsubid 2; the two key spaces never overlap.
struct AdvisoryLockKey {
    std::uint32_t classid = 0;
    std::uint32_t objid = 0;
    bool is_bigint = true;
    bool exclusive = true;  // ExclusiveLock; false for ShareLock

    [[nodiscard]] std::int64_t bigint_key() const {
        return static_cast<std::int64_t>((std::uint64_t{classid} << 32) | objid);
    }
    // "42", or "1,2" for a two-key lock.
    [[nodiscard]] std::string key_text() const;
    // "42 exclusive", "1,2 shared"
    [[nodiscard]] std::string describe() const;
    bool operator==(const AdvisoryLockKey&) const = default;
};

using Row = std::vector<std::optional<std::string>>;

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
// with current_setting() (pg_settings does not list them).
std::string build_state_probe(std::uint32_t kinds, const std::vector<std::string>& custom_settings);
// Decodes the probe's rows; nullopt if a row is not what the probe returns.
std::optional<StateReport> decode_state_probe(const std::vector<Row>& rows);

// "advisory locks 42 exclusive, 1,2 shared; temp tables 2: t1, ..."
std::string describe_state(std::uint32_t kinds, const std::vector<AdvisoryLockKey>& locks,
                           const std::vector<std::pair<std::uint32_t, std::string>>& summaries);
std::string describe_locks(const std::vector<AdvisoryLockKey>& keys);

// Releases every session-level advisory lock of the backend (not transaction-level ones).
inline constexpr const char* kUnlockAll = "SELECT pg_catalog.pg_advisory_unlock_all()";

}  // namespace pgtether
