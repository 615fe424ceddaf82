// Differential testing: run the same client session on two connections (directly against
// PostgreSQL and through a pooler) and compare everything the client can observe: result status,
// column names and types, rows, command tags, errors (severity, SQLSTATE, message, detail, hint),
// notices, and the transaction status after each step. A mismatch is reported as a readable
// per-step diff, so these tests need no hand-written expected output.
//
// The two sessions run one after the other against the same database, so steps must not collide
// across sessions: use TEMP tables, roll back, and release session locks before the end.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/integration/support/pq.hpp"

namespace pgtether::itest {

struct Step {
    enum class Kind {
        Simple,        // simple query protocol; every result of a multi-statement string
        Extended,      // extended protocol, unnamed statement, text parameters
        Prepare,       // Parse of a named statement
        ExecPrepared,  // Bind/Execute of a named statement
        Describe,      // Describe of a named statement (parameter and column metadata)
        Pipeline       // sub-steps sent in one libpq pipeline, then a single Sync
    };
    Kind kind = Kind::Simple;
    std::string sql;
    std::string name;  // statement name for Prepare / ExecPrepared / Describe
    Params params;
    std::vector<Step> steps;  // Pipeline only; Simple sub-steps go out as Extended with no params

    [[nodiscard]] std::string label() const;  // "simple: SELECT 1" for diffs
};

namespace steps {
Step simple(std::string sql);
Step params(std::string sql, Params params);
Step prepare(std::string name, std::string sql);
Step exec_prepared(std::string name, Params params);
Step describe(std::string name);
Step pipeline(std::vector<Step> sub_steps);
}  // namespace steps

// What one step produced on one connection.
struct StepOutcome {
    std::vector<Result> results;
    std::vector<Notice> notices;
    PGTransactionStatusType transaction_status = PQTRANS_UNKNOWN;
    bool connection_ok = false;
};
using Transcript = std::vector<StepOutcome>;

// Runs every step on `conn` (continuing after errors, as a client would).
Transcript run_steps(Conn& conn, const std::vector<Step>& steps);

// The canonical text of one outcome, one fact per line; two outcomes are equal iff these are.
std::vector<std::string> render(const StepOutcome& outcome);

// "" when the transcripts match; otherwise, per differing step, its label and a line diff
// ("-" only in `name_a`, "+" only in `name_b`).
std::string diff_transcripts(const std::vector<Step>& steps, const Transcript& a,
                             const Transcript& b, std::string_view name_a = "direct",
                             std::string_view name_b = "pooled");

// Runs `steps` on `a`, then on `b`, and diffs the transcripts.
std::string run_differential(Conn& a, Conn& b, const std::vector<Step>& steps,
                             std::string_view name_a = "direct",
                             std::string_view name_b = "pooled");

}  // namespace pgtether::itest

// doctest: both connections give the same replies to `steps`; prints the diff otherwise.
#define PGT_CHECK_SAME_REPLIES(conn_a, conn_b, steps_expr)                 \
    do {                                                                   \
        const std::string pgt_diff_ = ::pgtether::itest::run_differential( \
            (conn_a), (conn_b), (steps_expr), #conn_a, #conn_b);           \
        CHECK_MESSAGE(pgt_diff_.empty(), pgt_diff_);                       \
    } while (false)
