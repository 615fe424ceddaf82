// Prepared-statement translation's decisions, as values (docs/prepared-statements.md): given a
// client's Parse, Bind, Describe or Close of a named statement and what the two statement maps
// say about it (the client's names, the backend's prepared set), what goes to the backend and
// what pgtether answers itself. proxy/server/statement_translator.hpp carries the decisions out: it
// writes the messages, queues the requests (core/request_queue.hpp) and updates both maps.
//
// Only named statements are translated: the unnamed statement is the backend's own, and a Parse
// or Bind of it always goes as sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgtether {

// A client may hold this many named statements; more is refused (53400) so that one client
// cannot grow pgtether's memory without bound.
inline constexpr std::size_t kMaxClientStatements = 10000;

// Backend statement names are pgtether's: `pgtether_<random token>_<n>`, the token drawn per
// worker at start-up, so that no client can guess one (docs/prepared-statements.md). Client names
// with this prefix are refused with 42939 (reserved_name) under translation -- in Parse, Bind,
// Describe and Close, and in SQL PREPARE, EXECUTE and DEALLOCATE -- so a client can neither run,
// describe nor drop another client's statement by its backend name, nor take a name pgtether
// will use.
inline constexpr std::string_view kReservedStatementPrefix = "pgtether_";
[[nodiscard]] bool is_reserved_statement_name(std::string_view name);
// The backend name of the statement numbered `id` by a registry whose token is `token`.
[[nodiscard]] std::string backend_statement_name(std::string_view token, std::uint64_t id);

// What the maps say about a named Parse.
struct ParseFacts {
    bool translates = false;  // max_prepared_statements > 0 (else names go to the backend as sent)
    bool name_known = false;  // the client has a statement of this name already
    bool count_full = false;  // the client has kMaxClientStatements names
    bool bytes_full = false;  // its kept text plus this one exceed max_prepared_statement_bytes
    bool reserved_name = false;  // the name begins with kReservedStatementPrefix
    // The text pgtether keeps for the whole process plus this one would exceed
    // max_prepared_statement_bytes_total.
    bool process_full = false;
};

enum class ParseAction {
    // Without translation: the Parse goes as sent; the name is remembered with its text so that
    // a later Bind of it fires the tether's trigger again.
    ForwardRemember,
    // Without translation, beyond the client's bound: the Parse goes as sent; the name is
    // remembered with its effects only (every effect the probe checks added).
    ForwardRememberEffects,
    // Without translation, beyond the count and a new name: the Parse goes as sent and the name
    // is not remembered at all (a later Bind of an unknown name then assumes every effect).
    ForwardUntracked,
    // With translation: ERROR 42P05 "prepared statement ... already exists", then the batch is
    // discarded up to Sync, as PostgreSQL does.
    RefuseDuplicate,
    // With translation, beyond the client's count or bytes: ERROR 53400, then discard to Sync.
    RefuseTooMany,
    RefuseTooLarge,
    // With translation, a name with the reserved prefix: ERROR 42939, then discard to Sync.
    RefuseReservedName,
    // With translation, beyond max_prepared_statement_bytes_total: ERROR 54000, then discard to
    // Sync.
    RefuseProcessFull,
    // With translation: the name is the client's; the statement is prepared afresh on the
    // backend under its backend name (an existing copy there is closed first: it was planned in
    // another client's session).
    Translate,
};

[[nodiscard]] ParseAction decide_parse(const ParseFacts& facts);

// What the maps say about a Bind or Describe of a named statement.
struct UseFacts {
    bool translates = false;
    bool name_known = false;     // the client prepared the name (and has not closed it)
    bool text_withheld = false;  // pgtether did not keep its text (streamed over the budget)
    bool on_backend = false;     // the linked backend has the statement prepared (not stale)
    bool reserved_name = false;  // the name begins with kReservedStatementPrefix
};

enum class UseAction {
    // Goes as sent: no translation, an unknown name (the backend reports it with the client's
    // name, 26000), or a statement whose text pgtether could not keep.
    ForwardAsSent,
    // Rewritten to the backend name; the backend has the statement (it becomes the most recently
    // used there).
    Rewrite,
    // Rewritten to the backend name behind an injected Parse of it (and the Closes that make
    // room: least recently used first, never a statement a queued message still needs).
    PrepareAndRewrite,
    // With translation, a name with the reserved prefix: ERROR 42939 in the backend's place,
    // then discard to Sync.
    RefuseReservedName,
};

[[nodiscard]] UseAction decide_use(const UseFacts& facts);

enum class CloseAction {
    // Without translation: forwarded; the name is forgotten (the trigger's memory of it).
    ForwardForget,
    // With translation: the client's name goes, the backend keeps the statement for others (or
    // until evicted); pgtether answers CloseComplete in the backend's place. PostgreSQL answers
    // CloseComplete for a name that does not exist too.
    AnswerCloseComplete,
    // With translation, a name with the reserved prefix: ERROR 42939, then discard to Sync.
    RefuseReservedName,
};

// A Close of a named statement, with or without translation.
[[nodiscard]] CloseAction decide_close(bool translates, bool reserved_name);

// ---- a statement the backend lost (docs/prepared-statements.md, "Lost statements") ----
// Dynamic SQL on a shared backend (a DO block that DEALLOCATEs) can drop a statement pgtether
// prepared there; the next Bind of it fails with 26000 where a direct connection would have kept
// it. When that Bind opened a batch with nothing else in flight, outside a transaction block, the
// failed batch changed nothing, so pgtether holds the error back and sends the batch once more
// (the client's own bytes, routed again: a fresh Parse goes first). The client never sees the
// error. Anything else gets the 26000, and the statement is prepared again at its next use.

// When a client's Bind may open such a batch (the capture of its bytes starts).
struct LostStatementArming {
    bool rewrite = false;         // UseAction::Rewrite: pgtether believes the backend has it
    bool no_effects = false;      // the statement's text showed no session effect (the tether's
                                  // accounting of a failed and repeated statement stays exact)
    bool backend_idle = false;    // nothing sent to the backend is unanswered
    bool outside_block = false;   // transaction status 'I'
    bool whole_message = false;   // the Bind is all here (not streamed)
};
[[nodiscard]] constexpr bool may_retry_lost_statement(const LostStatementArming& facts) {
    return facts.rewrite && facts.no_effects && facts.backend_idle && facts.outside_block &&
           facts.whole_message;
}

// What a message of the client's batch does to the capture: kept (more to come), the batch is
// complete (its Sync), or the retry is given up (a message whose repetition could differ, or the
// capture would pass kMaxLostStatementBatch bytes).
enum class CaptureStep { Keep, Complete, GiveUp };
inline constexpr std::size_t kMaxLostStatementBatch = 64 * 1024;
[[nodiscard]] CaptureStep capture_step(char type, std::size_t captured, std::size_t message_size);

// At the ReadyForQuery after the held 26000: send the batch again, or pass the error on.
struct LostStatementFacts {
    bool complete = false;      // the batch's Sync was captured
    bool backend_idle = false;  // this ReadyForQuery answered everything sent
    char status = 0;            // its transaction status
    // The client's stream can take the batch back now (it is not inside its own read, where
    // the bytes it is taking apart would be moved under it).
    bool client_can_take_back = false;
};
[[nodiscard]] constexpr bool retry_lost_statement(const LostStatementFacts& facts) {
    return facts.complete && facts.backend_idle && facts.status == 'I' &&
           facts.client_can_take_back;
}

// The Query pgtether sends in place of a client's SQL that PREPAREs, EXECUTEs or DEALLOCATEs a
// reserved name (protocol/deallocate_statement.hpp): a DO block that raises
// reserved_name_refusal's error, so that the backend itself fails the statement -- the
// transaction block aborted, ReadyForQuery's status and the reply order exactly as for any other
// failing statement.
[[nodiscard]] std::string reserved_name_refusal_query();

// The error text of a refused Parse (the Refuse* actions) and its SQLSTATE. `byte_limit`:
// max_prepared_statement_bytes for RefuseTooLarge, max_prepared_statement_bytes_total for
// RefuseProcessFull.
struct Refusal {
    const char* sqlstate;
    std::string message;
};
[[nodiscard]] Refusal parse_refusal(ParseAction action, std::string_view name,
                                    std::size_t byte_limit);
// The error for a Bind, Describe or Close, or an SQL PREPARE / EXECUTE / DEALLOCATE, of a name
// with the reserved prefix (empty `name`: the SQL text is not quoted back).
[[nodiscard]] Refusal reserved_name_refusal(std::string_view name);

}  // namespace pgtether
