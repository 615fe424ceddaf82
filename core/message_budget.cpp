#include "core/message_budget.hpp"

#include "protocol/message_types.hpp"
#include "protocol/sql_scanner.hpp"

namespace pgtether {

namespace fe = protocol::fe;

OversizedAction decide_oversized_message(const OversizedMessage& message) {
    if (message.skipping_to_sync && message.type != fe::kSync) return OversizedAction::Discard;
    switch (message.type) {
        case fe::kQuery:
        case fe::kFunctionCall:
        case fe::kCopyData:
        case fe::kCopyFail:
            return OversizedAction::Stream;
        case fe::kParse:
        case fe::kBind:
            if (!message.head_complete) {
                return message.budget_reached ? OversizedAction::RefuseConnection
                                              : OversizedAction::WaitForHead;
            }
            // A named Parse is kept to prepare it on whichever backend serves the client later.
            if (message.type == fe::kParse && message.names_statement &&
                message.translates_statements) {
                return OversizedAction::RefuseStatement;
            }
            return OversizedAction::Stream;
        default:
            return OversizedAction::RefuseConnection;
    }
}

std::uint32_t unscanned_effects() {
    return protocol::kEffectAdvisoryLock | protocol::kEffectDiscard | protocol::kEffectTempObject |
           protocol::kEffectListen | protocol::kEffectCursor | protocol::kEffectSqlPrepare |
           protocol::kEffectSet | protocol::kEffectCatalogChange | protocol::kEffectOpaque |
           protocol::kEffectSavepoint;
}

}  // namespace pgtether
