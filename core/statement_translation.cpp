#include "core/statement_translation.hpp"

namespace pgtether {

bool is_reserved_statement_name(std::string_view name) {
    return name.starts_with(kReservedStatementPrefix);
}

std::string backend_statement_name(std::string_view token, std::uint64_t id) {
    std::string name(kReservedStatementPrefix);
    name.append(token);
    name.push_back('_');
    name.append(std::to_string(id));
    return name;
}

ParseAction decide_parse(const ParseFacts& facts) {
    if (!facts.translates) {
        if (facts.count_full && !facts.name_known) return ParseAction::ForwardUntracked;
        return facts.count_full || facts.bytes_full || facts.process_full
                   ? ParseAction::ForwardRememberEffects
                   : ParseAction::ForwardRemember;
    }
    if (facts.reserved_name) return ParseAction::RefuseReservedName;
    if (facts.name_known) return ParseAction::RefuseDuplicate;
    if (facts.count_full) return ParseAction::RefuseTooMany;
    if (facts.bytes_full) return ParseAction::RefuseTooLarge;
    if (facts.process_full) return ParseAction::RefuseProcessFull;
    return ParseAction::Translate;
}

UseAction decide_use(const UseFacts& facts) {
    if (facts.translates && facts.reserved_name) return UseAction::RefuseReservedName;
    if (!facts.translates || !facts.name_known || facts.text_withheld) {
        return UseAction::ForwardAsSent;
    }
    return facts.on_backend ? UseAction::Rewrite : UseAction::PrepareAndRewrite;
}

CloseAction decide_close(bool translates, bool reserved_name) {
    if (!translates) return CloseAction::ForwardForget;
    return reserved_name ? CloseAction::RefuseReservedName : CloseAction::AnswerCloseComplete;
}

std::string reserved_name_refusal_query() {
    const Refusal refusal = reserved_name_refusal({});
    // The message has no backslash: doubling the quotes is right whatever
    // standard_conforming_strings says.
    std::string message;
    for (char c : refusal.message) {
        message.push_back(c);
        if (c == '\'') message.push_back('\'');
    }
    return std::string("DO $pgtether$BEGIN RAISE EXCEPTION USING ERRCODE = '") + refusal.sqlstate +
           "', MESSAGE = '" + message + "'; END$pgtether$";
}

Refusal parse_refusal(ParseAction action, std::string_view name, std::size_t byte_limit) {
    switch (action) {
        case ParseAction::RefuseDuplicate:
            return {"42P05", "prepared statement \"" + std::string(name) + "\" already exists"};
        case ParseAction::RefuseTooMany:
            return {"53400", "too many prepared statements (pgtether allows " +
                                 std::to_string(kMaxClientStatements) + " per connection)"};
        case ParseAction::RefuseReservedName:
            return reserved_name_refusal(name);
        case ParseAction::RefuseProcessFull:
            return {"54000", "prepared statements too large (pgtether keeps at most " +
                                 std::to_string(byte_limit) +
                                 " bytes of statement text for all connections together, "
                                 "max_prepared_statement_bytes_total)"};
        case ParseAction::RefuseTooLarge:
        default:
            return {"53400", "prepared statements too large (pgtether keeps at most " +
                                 std::to_string(byte_limit) +
                                 " bytes of statement text per connection, "
                                 "max_prepared_statement_bytes)"};
    }
}

Refusal reserved_name_refusal(std::string_view name) {
    std::string message = "prepared statement names beginning with \"" +
                          std::string(kReservedStatementPrefix) +
                          "\" are reserved for pgtether's own statements";
    if (!name.empty()) message += " (\"" + std::string(name) + "\")";
    return {"42939", std::move(message)};
}

CaptureStep capture_step(char type, std::size_t captured, std::size_t message_size) {
    if (captured + message_size > kMaxLostStatementBatch) return CaptureStep::GiveUp;
    switch (type) {
        case 'B':
            // The Bind that opened the batch. Another one could bind a statement with effects,
            // counted twice if routed twice.
            return captured == 0 ? CaptureStep::Keep : CaptureStep::GiveUp;
        case 'D':  // Describe
        case 'E':  // Execute
        case 'H':  // Flush
            return CaptureStep::Keep;
        case 'S':  // Sync
            return CaptureStep::Complete;
        default:
            // A Parse, Close, Query, function call or COPY data: routing it twice could differ
            // (names remembered, effects noted, the unnamed statement), so no retry.
            return CaptureStep::GiveUp;
    }
}

}  // namespace pgtether
