// A client's session advisory locks as pgtether knows them (docs/advisory-locks.md, "Exact
// accounting"). Pure: no I/O.
//
// PostgreSQL stacks session locks: a session that takes the same (key, mode) twice must release
// it twice (§9.27.10). pg_locks shows one row per (key, mode) however often it was taken, so what
// a probe reports has no count; what statements report has one. Each entry says which it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/lock_statement.hpp"

namespace pgtether {

// One advisory lock a backend holds. pg_locks (PostgreSQL docs §54.12) shows a bigint key as its
// high half in classid and low half in objid with objsubid 1, and a two-int4 key as classid,
// objid with objsubid 2; the two key spaces never overlap.
struct AdvisoryLockKey {
    std::uint32_t classid = 0;
    std::uint32_t objid = 0;
    bool is_bigint = true;
    bool exclusive = true;  // ExclusiveLock; false for ShareLock

    [[nodiscard]] static AdvisoryLockKey bigint(std::int64_t key, bool exclusive) {
        const auto bits = static_cast<std::uint64_t>(key);
        return {static_cast<std::uint32_t>(bits >> 32), static_cast<std::uint32_t>(bits), true,
                exclusive};
    }
    [[nodiscard]] static AdvisoryLockKey int4_pair(std::int32_t key1, std::int32_t key2,
                                                   bool exclusive) {
        return {static_cast<std::uint32_t>(key1), static_cast<std::uint32_t>(key2), false,
                exclusive};
    }
    [[nodiscard]] std::int64_t bigint_key() const {
        return static_cast<std::int64_t>((std::uint64_t{classid} << 32) | objid);
    }
    // "42", or "1,2" for a two-key lock.
    [[nodiscard]] std::string key_text() const;
    // "42 exclusive", "1,2 shared"
    [[nodiscard]] std::string describe() const;
    bool operator==(const AdvisoryLockKey&) const = default;
};

// The display and ledger order: bigint keys first, each key space in numeric order, exclusive
// before shared.
[[nodiscard]] bool lock_key_less(const AdvisoryLockKey& a, const AdvisoryLockKey& b);
void sort_lock_keys(std::vector<AdvisoryLockKey>& keys);
// "42 exclusive, 1,2 shared"
[[nodiscard]] std::string describe_locks(const std::vector<AdvisoryLockKey>& keys);

// A lock call with its key known: what one column of an exact statement's result row is about.
struct ResolvedLockCall {
    protocol::LockFunction function = protocol::LockFunction::Lock;
    AdvisoryLockKey key;  // unused for UnlockAll; `exclusive` follows the function
    bool operator==(const ResolvedLockCall&) const = default;
};

class LockLedger {
public:
    enum class Count : std::uint8_t {
        Exact,       // `times` is how often the session took it
        AtLeastOne,  // held, how often unknown (a probe saw it)
        Maybe,       // an unlock of an AtLeastOne lock succeeded: it may or may not be held now
    };
    struct Entry {
        AdvisoryLockKey key;
        Count count = Count::Exact;
        std::uint32_t times = 1;  // for Count::Exact
        bool operator==(const Entry&) const = default;
    };

    // What a probe saw replaces everything (counts unknown).
    void reset_from_probe(const std::vector<AdvisoryLockKey>& keys);
    void clear() {
        entries_.clear();
        complete_ = true;
    }
    // A transaction did something to the session's locks that pgtether could not count: nothing
    // listed is sure any more (every entry becomes Maybe) and others may be held. Only a probe
    // (or pg_advisory_unlock_all()) makes the ledger complete again.
    void mark_unknown();
    // One call's outcome (`succeeded`: the DataRow's t/f; void functions always succeed). Returns
    // false when the outcome contradicts the ledger: the ledger was wrong and a probe must
    // re-synchronise it. Never guesses: an outcome it cannot count leaves a Maybe entry.
    [[nodiscard]] bool apply(const ResolvedLockCall& call, bool succeeded);

    [[nodiscard]] bool empty() const { return entries_.empty(); }
    // Some entry may already be released: the tether holds until a probe says.
    [[nodiscard]] bool has_maybe() const;
    // Every lock the session holds is listed (false after mark_unknown()).
    [[nodiscard]] bool complete() const { return complete_; }
    // Only a probe can settle what the ledger says: it is incomplete or has Maybe entries.
    [[nodiscard]] bool needs_probe() const { return !complete_ || has_maybe(); }
    // Nothing is held for sure, and nothing else may be: the tether can end.
    [[nodiscard]] bool holds_nothing() const { return complete_ && entries_.empty(); }
    [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }
    [[nodiscard]] std::vector<AdvisoryLockKey> keys() const;
    // "42 exclusive x2, 7 shared, 9 exclusive (maybe released)"
    [[nodiscard]] std::string describe() const;
    bool operator==(const LockLedger&) const = default;

private:
    Entry* find(const AdvisoryLockKey& key);
    void erase(const AdvisoryLockKey& key);
    void insert(Entry entry);

    std::vector<Entry> entries_;  // sorted by lock_key_less; few entries, so a vector
    bool complete_ = true;
};

}  // namespace pgtether
