#include "core/listen_splice.hpp"

#include "protocol/message_types.hpp"

namespace pgtether {

namespace be = protocol::be;

SplicedReplies::Verdict SplicedReplies::on_backend_message(char type) {
    switch (type) {
        case be::kErrorResponse:
            // The backend skips the rest of the text: no later statement answers.
            failed_ = true;
            next_ = statements_.size();
            return Verdict::ErrorPosition;
        case be::kRowDescription:
        case be::kDataRow:
            return at_stand_in() ? Verdict::Swallow : Verdict::Forward;
        case be::kCommandComplete:
        case be::kEmptyQueryResponse: {
            const bool stand_in = at_stand_in();
            if (stand_in) completed_.push_back(*statements_[next_]);
            if (next_ < statements_.size()) ++next_;
            return stand_in ? Verdict::ListenComplete : Verdict::Forward;
        }
        default:
            return Verdict::Forward;  // notices, parameter changes, COPY of a statement's own
    }
}

std::string_view SplicedReplies::listen_tag() const {
    return completed_.empty() ? std::string_view{}
                              : protocol::listen_command_tag(completed_.back());
}

SplicedListenOutcome decide_spliced_listens(char status, bool failed) {
    // A failed text rolled its implicit transaction back, or failed the block it ran in (whose
    // end is a ROLLBACK): its LISTENs never take effect, as PostgreSQL's would not.
    if (failed) return {};
    switch (status) {
        case 'I':
            return {true, true};  // its own implicit transaction committed
        case 'T':
            return {true, false};  // inside the client's block: at its COMMIT
        default:
            return {};  // 'E' without an error seen: nothing ran to keep
    }
}

}  // namespace pgtether
