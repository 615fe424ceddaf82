// One client's pairing with a backend: the state that exists because this client uses this server
// now, and means nothing to the next client (docs/architecture.md, "The link").
//
// A Server owns one Link and begins it afresh each time the pool pairs it with a client
// (Server::link_client). What the link holds stays valid after the client departs, through the
// clean-up of what it left running (scrub), until the server is released; the next pairing forgets
// all of it. What belongs to the backend whoever uses it (its statements, its settings, its
// unnamed statement, its role) stays on Server.
//
// Client reaches the pairing's state here, not through Server's members: the pipeline it sent,
// the lock accounting of its transaction, the session effects its statements showed, the
// statement requests queued for translation, the names it parsed on this backend, and the timing
// of its queries. The input of the decision at a transaction's end (core/tether_policy.hpp) is
// assembled in one place, at_boundary().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "core/listen_splice.hpp"
#include "core/lock_accounting.hpp"
#include "core/request_queue.hpp"
#include "core/stats.hpp"
#include "core/tether_policy.hpp"
#include "protocol/listen_statement.hpp"
#include "protocol/message_types.hpp"
#include "protocol/pipeline_tracker.hpp"

namespace pgtether {

struct Config;
class LockLedger;

class Link {
public:
    // A new pairing: everything of the last one is forgotten. `translate_statements`:
    // max_prepared_statements > 0 when the pairing began (a reload does not change it midway).
    void begin(bool translate_statements);

    // What the client sent this backend and what is still owed to it (protocol §55.2.3).
    [[nodiscard]] protocol::PipelineTracker& tracker() { return tracker_; }
    [[nodiscard]] const protocol::PipelineTracker& tracker() const { return tracker_; }
    // Exact lock accounting for the current transaction (docs/advisory-locks.md): the client arms
    // it and adds what its statements will report; the backend's answers complete it.
    [[nodiscard]] LockAccounting& lock_accounting() { return locks_; }

    // ---- prepared-statement translation (docs/prepared-statements.md) ----
    [[nodiscard]] bool translates_statements() const { return translate_statements_; }
    [[nodiscard]] RequestQueue& requests() { return requests_; }
    // Without statement translation a name goes to the backend as the client sent it, so a Bind
    // runs whatever this backend holds under the name -- perhaps another client's statement of
    // the same name (pgjdbc's S_1, ...). Only a name the client parsed here during this pairing
    // is known to be its own text. At most kMaxParsedNames are kept; beyond, a name counts as not
    // parsed here (its Bind is probed: over-inclusive, never wrong).
    void note_parsed_name(std::string_view name);
    [[nodiscard]] bool parsed_here(std::string_view name) const;
    static constexpr std::size_t kMaxParsedNames = 1024;

    // ---- the tether ----
    // What the tether's trigger found in the current transaction's statements
    // (protocol::SessionEffect flags); at its end they decide what to probe for.
    void mark_effects(std::uint32_t effects) { effects_ |= effects; }
    [[nodiscard]] std::uint32_t effects() const { return effects_; }
    void clear_effects() { effects_ = 0; }
    // The decision at the end of a transaction (or, before it, whether a probe must follow the
    // client's statement): this transaction's effects and accounting against the client's tether
    // and ledger when it began.
    [[nodiscard]] TransactionEndDecision at_boundary(const Config& config,
                                                     std::uint32_t tether_kinds,
                                                     const LockLedger& client_ledger) const;
    // The kinds of a probe sent right behind the client's statement; its answer is due before
    // anything else the client sends.
    [[nodiscard]] std::uint32_t pipelined_probe_kinds() const { return pipelined_probe_kinds_; }
    void set_pipelined_probe_kinds(std::uint32_t kinds) { pipelined_probe_kinds_ = kinds; }
    [[nodiscard]] std::uint32_t take_pipelined_probe_kinds() {
        return std::exchange(pipelined_probe_kinds_, 0);
    }

    // ---- timing, for SHOW STATS ----
    // The client sent a request while the backend was quiet (nothing owed): the start of a query,
    // and of a transaction unless one is open.
    void note_request_start(std::uint64_t now_us);
    // The backend answered everything it had been sent: one query (or pipeline) for SHOW STATS'
    // query_time; back at 'I' (`tx_status`), one transaction.
    void note_quiet(char tx_status, std::uint64_t now_us, PoolStats& stats);

    // ---- LISTENs pgtether answered inside the client's block (core/listen_channels.hpp) ----
    // The tag of a CommandComplete forwarded while the client has such LISTENs pending.
    void note_pending_listen_tag(std::string_view tag) {
        if (tag == "COMMIT") commit_seen_ = true;
    }
    // At a ReadyForQuery: whether a COMMIT came since the previous one (and a new count begins),
    // the input of decide_pending_listens.
    [[nodiscard]] bool take_commit_seen() { return std::exchange(commit_seen_, false); }

    // ---- a Query mixing LISTEN/UNLISTEN with other statements (core/listen_splice.hpp) ----
    // The client sent `splice.sql` in its text's place; its answer comes next.
    void begin_listen_splice(protocol::ListenSplice splice) {
        SplicedReplies replies(std::move(splice.statements));  // moved, not copied
        splice_.emplace(ActiveSplice{std::move(splice), std::move(replies)});
    }
    [[nodiscard]] bool splicing() const { return splice_.has_value(); }
    [[nodiscard]] SplicedReplies& spliced_replies() { return splice_->replies; }
    [[nodiscard]] const protocol::ListenSplice& listen_splice() const { return splice_->text; }
    // At the Query's ReadyForQuery, once its answer was read (spliced_replies()).
    void end_listen_splice() { splice_.reset(); }

    // ---- a statement the backend lost (core/statement_translation.hpp) ----
    // The client's Bind may open a batch that is sent again if it meets 26000: capture its bytes
    // (capture(), from the Bind) until its Sync.
    void arm_lost_statement_retry() {
        retry_stage_ = RetryStage::Capturing;
        retry_batch_.clear();
        retry_held_error_.clear();
    }
    [[nodiscard]] bool capturing_batch() const { return retry_stage_ == RetryStage::Capturing; }
    // One client message of the batch, as the client sent it.
    void capture(char type, protocol::ByteSpan message);
    void give_up_capture() { retry_stage_ = RetryStage::GivenUp; }
    // The backend's answer so far: whether an ErrorResponse with `sqlstate` is the batch's
    // Bind meeting a lost statement (then it is held back, `error`: its bytes); a BindComplete
    // or any other error ends the retry.
    [[nodiscard]] bool hold_lost_statement_error(std::string_view sqlstate,
                                                 protocol::ByteSpan error);
    void note_bind_complete() { retry_stage_ = RetryStage::Off; }
    [[nodiscard]] bool lost_statement_error_held() const { return !retry_held_error_.empty(); }
    // At the batch's ReadyForQuery (the retry ends either way): the batch to send again, or
    // nullopt; the held error, if not, goes to the client (take_held_lost_statement_error).
    [[nodiscard]] std::optional<std::string> take_lost_statement_batch(
        bool backend_idle, char status, bool client_can_take_back);
    [[nodiscard]] std::string take_held_lost_statement_error() {
        return std::exchange(retry_held_error_, {});
    }
    void end_lost_statement_retry() {
        retry_stage_ = RetryStage::Off;
        retry_held_error_.clear();
    }
    [[nodiscard]] bool lost_statement_retry_on() const { return retry_stage_ != RetryStage::Off; }

    // ---- what the client was told, for the words it gets if the backend is lost ----
    void note_client_forwarded() { client_forwarded_ = true; }
    [[nodiscard]] bool client_forwarded() const { return client_forwarded_; }
    void note_fatal_forwarded() { fatal_forwarded_ = true; }
    [[nodiscard]] bool fatal_forwarded() const { return fatal_forwarded_; }
    // The backend's FATAL message, held back from a tethered client (Server::handle_linked_data).
    void hold_fatal_message(std::string message) { held_fatal_message_ = std::move(message); }
    [[nodiscard]] const std::string& held_fatal_message() const { return held_fatal_message_; }
    // The SQLSTATE of the last ErrorResponse forwarded to the client (Server::settle_requests).
    void note_failed_sqlstate(std::string sqlstate) { failed_sqlstate_ = std::move(sqlstate); }
    [[nodiscard]] const std::string& failed_sqlstate() const { return failed_sqlstate_; }

private:
    protocol::PipelineTracker tracker_;
    LockAccounting locks_;
    RequestQueue requests_;
    bool translate_statements_ = false;
    // See note_parsed_name(); allocated on first use (most pairings parse nothing by name).
    std::unique_ptr<std::unordered_set<std::string>> parsed_names_;
    std::uint32_t effects_ = 0;
    std::uint32_t pipelined_probe_kinds_ = 0;
    std::uint64_t request_started_us_ = 0;  // 0: no query running
    std::uint64_t xact_started_us_ = 0;     // 0: no transaction open
    bool commit_seen_ = false;       // see take_commit_seen()
    struct ActiveSplice {
        protocol::ListenSplice text;  // its replacements (client_position); statements: replies'
        SplicedReplies replies;
    };
    std::optional<ActiveSplice> splice_;  // see begin_listen_splice()
    bool client_forwarded_ = false;  // the client has sent this backend anything
    bool fatal_forwarded_ = false;   // the client got the backend's FATAL ErrorResponse
    std::string held_fatal_message_;
    std::string failed_sqlstate_;
    // A batch that may be sent again (arm_lost_statement_retry): capturing it, complete (its
    // Sync is in), given up (a message not to be routed twice; the held error still goes out).
    enum class RetryStage : std::uint8_t { Off, Capturing, Complete, GivenUp };
    RetryStage retry_stage_ = RetryStage::Off;
    // The client's bytes from the Bind (capacity kept between batches; moved out on a retry).
    std::string retry_batch_;
    std::string retry_held_error_;  // the 26000 ErrorResponse held back
};

// Defined here: they run on every transaction, and inline they cost what the same lines cost
// inside Server before the link had a class of its own (tests/bench/profile.sh).
inline void Link::begin(bool translate_statements) {
    tracker_.reset();
    locks_.reset();
    requests_.clear();
    translate_statements_ = translate_statements;
    if (parsed_names_) parsed_names_->clear();
    effects_ = 0;
    pipelined_probe_kinds_ = 0;
    commit_seen_ = false;
    splice_.reset();
    request_started_us_ = xact_started_us_ = 0;
    client_forwarded_ = false;
    fatal_forwarded_ = false;
    held_fatal_message_.clear();
    failed_sqlstate_.clear();
    end_lost_statement_retry();
}

inline void Link::note_request_start(std::uint64_t now_us) {
    request_started_us_ = now_us;
    if (xact_started_us_ == 0) xact_started_us_ = now_us;
}

inline void Link::note_quiet(char tx_status, std::uint64_t now_us, PoolStats& stats) {
    if (request_started_us_ != 0) {
        stats.record_query_time(now_us - request_started_us_);
        request_started_us_ = 0;
    }
    if (tx_status == protocol::kTxIdle && xact_started_us_ != 0) {
        stats.xact_count++;
        stats.record_xact_time(now_us - xact_started_us_);
        xact_started_us_ = 0;
    }
}

}  // namespace pgtether
