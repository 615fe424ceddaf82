// The tether's exact half: asking a backend which session-level advisory locks it holds, and
// making a backend clean again (docs/advisory-locks.md).
//
// At an idle point (ReadyForQuery 'I', nothing outstanding) a backend runs no transaction, so
// every advisory row pg_locks shows for it is a session-level lock: transaction-level ones were
// released at commit or rollback.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/sql_scanner.hpp"
#include "proxy/config.hpp"

namespace pgtether {

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

// The probe: one row per lock held (stacked acquisitions of one key show as one row).
inline constexpr const char* kAdvisoryLockProbe =
    "SELECT classid, objid, objsubid, mode FROM pg_catalog.pg_locks "
    "WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()";
// Releases every session-level advisory lock of the backend (not transaction-level ones).
inline constexpr const char* kUnlockAll = "SELECT pg_catalog.pg_advisory_unlock_all()";

// Decodes the probe's rows; nullopt if a row is not what the probe returns.
std::optional<std::vector<AdvisoryLockKey>> decode_advisory_locks(const std::vector<Row>& rows);

// "42 exclusive, 1,2 shared"
std::string describe_locks(const std::vector<AdvisoryLockKey>& keys);

// The scanner effects that make a transaction lock-relevant (worth a probe at its end).
inline constexpr std::uint32_t kLockTrigger =
    protocol::kEffectAdvisoryLock | protocol::kEffectDiscard;

// Whether a transaction that just ended needs the probe.
[[nodiscard]] inline bool should_probe(LockTracking tracking, bool lock_relevant) {
    switch (tracking) {
        case LockTracking::Off: return false;
        case LockTracking::EveryTransaction: return true;
        case LockTracking::On: return lock_relevant;
    }
    return false;
}

}  // namespace pgtether
