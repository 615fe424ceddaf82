// Finds the statements in SQL text that can change session state the pooler must know about.
//
// This is the cheap, over-inclusive *trigger* half of the tether (docs/advisory-locks.md): it never
// decides that a client holds a lock — the backend's pg_locks does — it only decides whether a
// transaction is worth asking about. A miss is dangerous, a false hit costs one probe, so when in
// doubt it reports a hit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pgtether::protocol {

// Bit flags, combined with |.
enum SessionEffect : std::uint32_t {
    kEffectNone = 0,
    // A call to a session-level advisory lock or unlock function (pg_advisory_lock[_shared],
    // pg_try_advisory_lock[_shared], pg_advisory_unlock[_shared], pg_advisory_unlock_all), or to one
    // of the configured extra function names. The _xact_ variants alone do not set it.
    kEffectAdvisoryLock = 1u << 0,
    // DISCARD ALL / DISCARD ... (releases session state, including advisory locks).
    kEffectDiscard = 1u << 1,
};

class SqlScanner {
public:
    // `extra_lock_functions`: lower-case names (unqualified) that also count as kEffectAdvisoryLock.
    explicit SqlScanner(std::vector<std::string> extra_lock_functions = {});

    // Scans one statement text (a Query string, possibly with many statements, or a Parse query).
    [[nodiscard]] std::uint32_t scan(std::string_view sql) const;

private:
    std::vector<std::string> extra_lock_functions_;
};

}  // namespace pgtether::protocol
