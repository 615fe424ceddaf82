#include "core/lock_ledger.hpp"

#include <algorithm>
#include <tuple>

namespace pgtether {

using protocol::LockFunction;

std::string AdvisoryLockKey::key_text() const {
    if (is_bigint) return std::to_string(bigint_key());
    return std::to_string(static_cast<std::int32_t>(classid)) + "," +
           std::to_string(static_cast<std::int32_t>(objid));
}

std::string AdvisoryLockKey::describe() const {
    return key_text() + (exclusive ? " exclusive" : " shared");
}

bool lock_key_less(const AdvisoryLockKey& a, const AdvisoryLockKey& b) {
    auto order = [](const AdvisoryLockKey& k) {
        if (k.is_bigint) return std::tuple(0, k.bigint_key(), std::int64_t{0}, !k.exclusive);
        return std::tuple(1, std::int64_t{static_cast<std::int32_t>(k.classid)},
                          std::int64_t{static_cast<std::int32_t>(k.objid)}, !k.exclusive);
    };
    return order(a) < order(b);
}

void sort_lock_keys(std::vector<AdvisoryLockKey>& keys) {
    std::sort(keys.begin(), keys.end(), lock_key_less);
}

std::string describe_locks(const std::vector<AdvisoryLockKey>& keys) {
    std::string out;
    for (const auto& key : keys) {
        if (!out.empty()) out += ", ";
        out += key.describe();
    }
    return out;
}

void LockLedger::reset_from_probe(const std::vector<AdvisoryLockKey>& keys) {
    entries_.clear();
    complete_ = true;
    for (const auto& key : keys) insert({key, Count::AtLeastOne, 0});
}

void LockLedger::mark_unknown() {
    for (auto& e : entries_) e.count = Count::Maybe;
    complete_ = false;
}

LockLedger::Entry* LockLedger::find(const AdvisoryLockKey& key) {
    for (auto& e : entries_) {
        if (e.key == key) return &e;
    }
    return nullptr;
}

void LockLedger::erase(const AdvisoryLockKey& key) {
    std::erase_if(entries_, [&](const Entry& e) { return e.key == key; });
}

void LockLedger::insert(Entry entry) {
    auto at = std::lower_bound(entries_.begin(), entries_.end(), entry.key,
                               [](const Entry& e, const AdvisoryLockKey& k) {
                                   return lock_key_less(e.key, k);
                               });
    entries_.insert(at, entry);
}

bool LockLedger::apply(const ResolvedLockCall& call, bool succeeded) {
    switch (call.function) {
        case LockFunction::UnlockAll:
            clear();
            return true;
        case LockFunction::Lock:
        case LockFunction::LockShared:
        case LockFunction::TryLock:
        case LockFunction::TryLockShared: {
            if (!succeeded) return true;  // a failed try takes nothing
            Entry* e = find(call.key);
            if (!e) {
                insert({call.key, Count::Exact, 1});
            } else if (e->count == Count::Exact) {
                ++e->times;
            } else {
                // Held now for sure, how often still unknown.
                e->count = Count::AtLeastOne;
            }
            return true;
        }
        case LockFunction::Unlock:
        case LockFunction::UnlockShared: {
            Entry* e = find(call.key);
            if (succeeded) {
                // The session held it: a complete ledger without it was wrong; an incomplete one
                // just learnt of it (and that it may still be held, if it was stacked).
                if (!e) return !complete_;
                if (e->count == Count::Exact) {
                    if (--e->times == 0) erase(call.key);
                } else {
                    e->count = Count::Maybe;
                }
                return true;
            }
            // Not held: right only if the ledger did not count it as held.
            if (!e) return true;
            if (e->count == Count::Maybe) {
                erase(call.key);  // now we know
                return true;
            }
            return false;
        }
    }
    return false;
}

bool LockLedger::has_maybe() const {
    return std::any_of(entries_.begin(), entries_.end(),
                       [](const Entry& e) { return e.count == Count::Maybe; });
}

std::vector<AdvisoryLockKey> LockLedger::keys() const {
    std::vector<AdvisoryLockKey> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.key);
    return out;
}

std::string LockLedger::describe() const {
    std::string out;
    for (const auto& e : entries_) {
        if (!out.empty()) out += ", ";
        out += e.key.describe();
        if (e.count == Count::Exact && e.times > 1) out += " x" + std::to_string(e.times);
        if (e.count == Count::Maybe) out += " (maybe released)";
    }
    if (!complete_) out += out.empty() ? "others unknown" : ", others unknown";
    return out;
}

}  // namespace pgtether
