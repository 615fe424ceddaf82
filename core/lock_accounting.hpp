// Exact lock accounting for one transaction on a linked backend (docs/advisory-locks.md, "Exact
// accounting"). Pure: the I/O layer feeds it what the client sent and what the backend answered,
// and at the transaction's end asks whether the ledger it computed can be trusted — if not, the
// probe decides, as before.
//
// Which result belongs to which statement: every Query, Sync and FunctionCall is answered by one
// ReadyForQuery, and within one such group every statement of a Query and every Execute ends with
// exactly one CommandComplete, EmptyQueryResponse or PortalSuspended (protocol §55.2.2, §55.2.3),
// unless an error ends the group early. An exact statement is therefore addressed as "the u-th
// result after r more ReadyForQuery". Its RowDescription (when sent) and its one DataRow are
// checked against the calls (column count, types, t/f or empty values): anything unexpected makes
// the transaction uncertain, never a guess.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/lock_ledger.hpp"
#include "protocol/bytes.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/lock_statement.hpp"

namespace pgtether {

// The calls with their keys: literals as written, parameters from the Bind (text or binary, typed
// by Parse's declared OIDs, an explicit cast, or as PostgreSQL infers them: bigint for one key,
// integer for two). nullopt when a key cannot be known for sure (a NULL, a value the server would
// reject or read differently, a parameter that is missing or of another type).
[[nodiscard]] std::optional<std::vector<ResolvedLockCall>> resolve_lock_calls(
    const protocol::LockCalls& calls, protocol::ByteSpan parameter_types,
    const protocol::BindParameters* bind);

class LockAccounting {
public:
    // The transaction touches session locks: start from the ledger the client had when it began.
    void arm(const LockLedger& start) {
        if (armed_) return;
        armed_ = true;
        ledger_ = start;
    }
    [[nodiscard]] bool armed() const { return armed_; }
    // Something lock-relevant that cannot be accounted for exactly: the probe must decide.
    void mark_uncertain() { uncertain_ = true; }

    // ---- what the client sent (the I/O layer calls these as it forwards) ----
    // The results of an exact statement: the `unit`-th result after `ready_ahead` more
    // ReadyForQuery messages. Expectations come in the order their results will.
    void expect(int ready_ahead, std::uint32_t unit, std::vector<ResolvedLockCall> calls);
    // Results the requests sent so far in the current group will produce before the next one:
    // each Execute adds one; a Sync, Query or FunctionCall ends the group (its ReadyForQuery).
    [[nodiscard]] std::uint32_t units_in_group() const { return sent_units_; }
    void note_execute() { ++sent_units_; }
    void note_group_end() { sent_units_ = 0; }
    // Extended protocol: a Bind of exact calls to `portal`, and their Execute.
    void bind_portal(std::string_view portal, std::vector<ResolvedLockCall> calls);
    void forget_portal(std::string_view portal);
    [[nodiscard]] bool has_portals() const { return !portals_.empty(); }
    // The calls bound to `portal`, or nullptr.
    [[nodiscard]] const std::vector<ResolvedLockCall>* portal_calls(std::string_view portal) const;

    // ---- what the backend answered (every message while armed) ----
    void on_backend_message(char type, protocol::ByteSpan body);

    // ---- at the transaction's end ----
    // Armed, nothing uncertain, and every expected result arrived and was applied.
    [[nodiscard]] bool exact() const { return armed_ && !uncertain_ && expected_.empty(); }
    [[nodiscard]] const LockLedger& ledger() const { return ledger_; }
    void reset() { *this = LockAccounting{}; }

private:
    struct Expectation {
        int ready_ahead = 0;
        std::uint32_t unit = 0;
        std::vector<ResolvedLockCall> calls;
        bool row_seen = false;
    };
    [[nodiscard]] Expectation* current();
    void check_row_description(const Expectation& e, protocol::ByteSpan body);
    void apply_row(Expectation& e, protocol::ByteSpan body);

    bool armed_ = false;
    bool uncertain_ = false;
    LockLedger ledger_;
    std::vector<Expectation> expected_;  // in result order
    std::uint32_t units_ = 0;            // results completed since the last ReadyForQuery
    std::uint32_t sent_units_ = 0;       // Executes sent in the current group
    std::vector<std::pair<std::string, std::vector<ResolvedLockCall>>> portals_;
};

}  // namespace pgtether
