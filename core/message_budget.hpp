// What pgtether does with a client message larger than `client_buffer_limit`: the per-client
// budget for input held in memory (issue 15, docs/configuration.md).
//
// A message within the budget is assembled whole in the client's receive buffer and handled as
// always. A larger one is never held whole: it is streamed to the server as it arrives (like
// PgBouncer, which forwards packets larger than pkt_buf piece by piece), with the decisions that
// need its text taken conservatively, or refused when pgtether cannot do its job without holding
// it. Decision only, as a value; proxy/client/client_requests.cpp carries it out.
#pragma once

#include <cstdint>

namespace pgtether {

enum class OversizedAction {
    // Forward as it arrives. A Query or Parse whose text is not held is not scanned by the
    // tether's trigger: every effect the probe can check is assumed (unscanned_effects()). A
    // Bind of a statement pgtether translates gets its head rewritten (the statement's backend
    // name) and its parameters streamed behind it, unread.
    Stream,
    // The names at the start of the body (Parse, Bind) have not all arrived: keep reading.
    WaitForHead,
    // pgtether is discarding the client's messages up to Sync after an error it answered itself.
    Discard,
    // A named Parse that pgtether must keep to prepare it on other backends: ERROR 54000, then
    // the rest of the batch is discarded up to Sync (the connection stays usable).
    RefuseStatement,
    // A message PostgreSQL itself limits to 10,000 bytes (Describe, Close, Execute, Sync, Flush,
    // CopyDone, Terminate: PQ_SMALL_MESSAGE_LIMIT in postgres.c), or a Parse/Bind whose names
    // alone exceed the budget: FATAL 08P01 "invalid message length", as from PostgreSQL.
    RefuseConnection,
};

struct OversizedMessage {
    char type = 0;
    // pgtether answered an earlier message of this batch with an error (skip until Sync).
    bool skipping_to_sync = false;
    // Parse: its statement name has arrived; Bind: its portal and statement names have.
    bool head_complete = false;
    // The bytes of it already held have reached the budget (only matters while waiting for the
    // head).
    bool budget_reached = false;
    // Parse: it names a statement (not the unnamed one).
    bool names_statement = false;
    // Named statements are translated (max_prepared_statements > 0).
    bool translates_statements = false;
};

[[nodiscard]] OversizedAction decide_oversized_message(const OversizedMessage& message);

// The trigger effects assumed for statement text that is streamed unscanned: everything the
// transaction-end probe checks (advisory locks, temporary objects, LISTEN, cursors, SQL
// PREPARE, settings) plus a catalog change (discovery runs again) and a SAVEPOINT (a later
// LISTEN in the transaction goes to the backend). Not LOAD: a LOAD would tether
// the client for good, and only a LOAD at the start of the text (which is scanned) is seen.
[[nodiscard]] std::uint32_t unscanned_effects();

}  // namespace pgtether
