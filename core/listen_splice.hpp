// LISTEN multiplexed, the replies to a Query that mixes LISTEN/UNLISTEN with other statements
// (protocol::splice_listen_statements; docs/session-state.md, "LISTEN and NOTIFY"). The backend
// runs the text with each LISTEN/UNLISTEN replaced by a stand-in; this decides, message by
// message, what of its answer the client gets, and at the Query's ReadyForQuery what becomes of
// the LISTENs whose statements ran. Pure: message types in, verdicts out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/listen_statement.hpp"

namespace pgtether {

class SplicedReplies {
  public:
    // `statements`: ListenSplice::statements, the client's statements in order.
    explicit SplicedReplies(std::vector<std::optional<protocol::ListenOp>> statements)
        : statements_(std::move(statements)) {}

    enum class Verdict : std::uint8_t {
        Forward,         // the client gets it as it is
        Swallow,         // a stand-in's result: the client never sent that statement
        ListenComplete,  // a stand-in's CommandComplete: the client gets its LISTEN's instead
                         // (listen_tag())
        ErrorPosition,   // an ErrorResponse: the client gets it with its position in the
                         // client's text (ListenSplice::client_position)
    };
    // Each backend message of the Query's answer, up to its ReadyForQuery (not included).
    [[nodiscard]] Verdict on_backend_message(char type);
    // The tag of the last ListenComplete: "LISTEN" or "UNLISTEN".
    [[nodiscard]] std::string_view listen_tag() const;

    // The LISTEN/UNLISTEN whose stand-ins completed, in order.
    [[nodiscard]] const std::vector<protocol::ListenOp>& completed() const { return completed_; }
    // An ErrorResponse came: the statements after it did not run, and the transaction failed.
    [[nodiscard]] bool failed() const { return failed_; }

  private:
    [[nodiscard]] bool at_stand_in() const {
        return next_ < statements_.size() && statements_[next_].has_value();
    }
    std::vector<std::optional<protocol::ListenOp>> statements_;
    std::size_t next_ = 0;  // the statement whose answer comes next
    std::vector<protocol::ListenOp> completed_;
    bool failed_ = false;
};

// At the spliced Query's ReadyForQuery, what becomes of its completed LISTEN/UNLISTEN.
struct SplicedListenOutcome {
    bool take = false;    // they join the client's LISTENs pending in its transaction ...
    bool commit = false;  // ... and that transaction committed: all of them take effect now
    bool operator==(const SplicedListenOutcome&) const = default;
};
// `status`: the ReadyForQuery's; `failed`: SplicedReplies::failed().
[[nodiscard]] SplicedListenOutcome decide_spliced_listens(char status, bool failed);

}  // namespace pgtether
