// Exact lock accounting, the statement half (docs/advisory-locks.md, "Exact accounting").
//
// Some statements say everything about what they do to the session's advisory locks: a SELECT
// whose target list holds only calls of the session lock functions, with integer literals or bound
// parameters as keys, no FROM, no WHERE. Its result row then tells whether each try/unlock
// succeeded, so pgtether can keep the client's lock ledger without asking pg_locks. Everything
// else that may touch session locks is "uncertain" and falls back to the probe.
//
// The text is split into top-level statements (';' outside quotes, comments, dollar bodies and
// parentheses) with the lexical rules of PostgreSQL's scan.l (§4.1). Where our split could differ
// from the server's, the whole text is uncertain: a plain '...' literal holding a backslash (its
// meaning depends on standard_conforming_strings), anything unterminated, and BEGIN ATOMIC bodies
// (whose ';' do not end the statement).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/sql_scanner.hpp"

namespace pgtether::protocol {

// The session-level advisory lock functions (PostgreSQL docs §9.27.10), not the _xact_ ones.
enum class LockFunction : std::uint8_t {
    Lock,           // pg_advisory_lock: void, always succeeds once it returns
    LockShared,     // pg_advisory_lock_shared
    TryLock,        // pg_try_advisory_lock: bool
    TryLockShared,  // pg_try_advisory_lock_shared
    Unlock,         // pg_advisory_unlock: bool (false: the session did not hold it)
    UnlockShared,   // pg_advisory_unlock_shared
    UnlockAll,      // pg_advisory_unlock_all: void
};
[[nodiscard]] const char* lock_function_name(LockFunction function);
// Whether the function returns boolean (true) or void (false).
[[nodiscard]] bool lock_function_returns_bool(LockFunction function);

// A key argument: an integer literal, or a bound parameter $n.
struct LockArgument {
    std::int64_t literal = 0;
    std::uint16_t parameter = 0;  // 1-based $n; 0 when the argument is the literal
    // An explicit cast to an integer type (::smallint, ::integer, ::bigint, ...): its width in
    // bytes, 0 without a cast. A parameter's type is then the cast's unless Parse declared one.
    std::uint8_t cast_bytes = 0;
    bool operator==(const LockArgument&) const = default;
};

struct LockCall {
    LockFunction function = LockFunction::Lock;
    // 0 (unlock_all), 1 (one bigint key) or 2 (two int4 keys: the other key space).
    std::uint8_t argument_count = 0;
    std::array<LockArgument, 2> arguments{};
    bool operator==(const LockCall&) const = default;
};
// The calls of one exact statement, in target-list order (= result column order).
using LockCalls = std::vector<LockCall>;

// What a Query text does to session advisory locks, statement by statement.
struct QueryLockPlan {
    // Every statement either cannot touch session locks or is an exact lock SELECT, and the text
    // splits into statements the way the server splits it.
    bool exact = false;
    // The number of top-level statements: each produces one CommandComplete (or an error that
    // ends the Query).
    std::uint32_t statement_count = 0;
    // pgtether may send a query of its own right behind this text (a pipelined probe): no
    // statement controls transactions (BEGIN, START, COMMIT, END, ROLLBACK, ABORT, SAVEPOINT,
    // RELEASE, PREPARE: the text may leave a block open, or start one that must see no other
    // statement first) and none is a COPY (which may read from the client next).
    bool safe_to_follow = false;
    // The exact lock statements: (index among the statements, calls).
    std::vector<std::pair<std::uint32_t, LockCalls>> lock_statements;
};

// `scanner` decides whether a statement that is not an exact lock SELECT can touch session locks
// (a lock function name or a configured wrapper anywhere in it, or DISCARD).
[[nodiscard]] QueryLockPlan plan_query_locks(std::string_view sql, const SqlScanner& scanner);

// One statement (a Parse text): its calls when it is exactly a lock SELECT, nullopt otherwise
// (also when the text holds more than one statement).
[[nodiscard]] std::optional<LockCalls> parse_lock_select(std::string_view sql);

}  // namespace pgtether::protocol
