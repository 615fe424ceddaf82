#include "core/statement_translation.hpp"

namespace pgtether {

ParseAction decide_parse(const ParseFacts& facts) {
    if (!facts.translates) {
        if (facts.count_full && !facts.name_known) return ParseAction::ForwardUntracked;
        return facts.count_full || facts.bytes_full ? ParseAction::ForwardRememberEffects
                                                    : ParseAction::ForwardRemember;
    }
    if (facts.name_known) return ParseAction::RefuseDuplicate;
    if (facts.count_full) return ParseAction::RefuseTooMany;
    if (facts.bytes_full) return ParseAction::RefuseTooLarge;
    return ParseAction::Translate;
}

UseAction decide_use(const UseFacts& facts) {
    if (!facts.translates || !facts.name_known || facts.text_withheld) {
        return UseAction::ForwardAsSent;
    }
    return facts.on_backend ? UseAction::Rewrite : UseAction::PrepareAndRewrite;
}

CloseAction decide_close(bool translates) {
    return translates ? CloseAction::AnswerCloseComplete : CloseAction::ForwardForget;
}

Refusal parse_refusal(ParseAction action, std::string_view name, std::size_t byte_limit) {
    switch (action) {
        case ParseAction::RefuseDuplicate:
            return {"42P05", "prepared statement \"" + std::string(name) + "\" already exists"};
        case ParseAction::RefuseTooMany:
            return {"53400", "too many prepared statements (pgtether allows " +
                                 std::to_string(kMaxClientStatements) + " per connection)"};
        case ParseAction::RefuseTooLarge:
        default:
            return {"53400", "prepared statements too large (pgtether keeps at most " +
                                 std::to_string(byte_limit) +
                                 " bytes of statement text per connection, "
                                 "max_prepared_statement_bytes)"};
    }
}

}  // namespace pgtether
