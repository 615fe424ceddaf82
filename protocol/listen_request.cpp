#include "protocol/listen_request.hpp"

#include <optional>

#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_reader.hpp"

namespace pgtether::protocol {

namespace {

using Kind = ListenRequest::Kind;

// The request's bytes so far end inside a message (or its header): the start of a request when
// the message may be part of one and the whole stays below the limit.
ListenRequest incomplete_or_other(const MessageReader::Next& next, std::size_t before,
                                  std::size_t wait_limit) {
    ListenRequest result;
    if (next.step == MessageReader::Step::NeedMore) {
        if (before + kTypedHeaderSize < wait_limit) result.kind = Kind::Incomplete;
        return result;
    }
    if (next.step != MessageReader::Step::Partial) return result;  // Invalid
    switch (next.type) {
        case fe::kQuery:
        case fe::kParse:
        case fe::kBind:
        case fe::kDescribe:
        case fe::kExecute:
        case fe::kSync:
            if (before + next.total < wait_limit) result.kind = Kind::Incomplete;
            break;
        default:
            break;
    }
    return result;
}

ListenRequest answer_query(ByteSpan body, std::size_t total, char tx_status) {
    ListenRequest result;
    auto sql = parse_query(body);
    if (!sql) return result;
    auto ops = parse_listen_only(*sql);
    if (!ops) return result;
    for (const auto& op : *ops)
        append_command_complete(result.reply, listen_command_tag(op));
    append_ready_for_query(result.reply, tx_status);
    result.kind = Kind::Answered;
    result.ops = std::move(*ops);
    result.consumed = total;
    return result;
}

}  // namespace

ListenRequest recognise_listen_request(ByteSpan data, std::uint32_t max_message,
                                       std::size_t wait_limit, char tx_status) {
    std::optional<ListenOp> op;
    std::string reply;
    std::size_t consumed = 0;
    int executed = 0;
    bool flushed = false;
    while (true) {
        const MessageReader::Next next =
            MessageReader::examine(data.subspan(consumed), max_message);
        if (next.step != MessageReader::Step::Message) {
            // A batch that flushed may be waiting for its replies before it goes on.
            if (flushed) return {};
            return incomplete_or_other(next, consumed, wait_limit);
        }
        const std::size_t start = consumed;
        consumed += next.total;
        ByteReader body(next.body());
        switch (next.type) {
            case fe::kQuery:
                if (start != 0) return {};
                return answer_query(next.body(), next.total, tx_status);
            case fe::kParse: {
                auto parse = parse_parse(next.body());
                if (!parse || !parse->statement.empty() || op) return {};
                auto ops = parse_listen_only(parse->query);
                // PostgreSQL refuses several commands in one prepared statement. Declared
                // parameter types would need as many parameters: the backend's case.
                const ByteSpan types = parse->parameter_types;
                const bool no_types = types.size() < 2 || (types[0] == 0 && types[1] == 0);
                if (!ops || ops->size() != 1 || !no_types) return {};
                op = ops->front();
                MessageWriter(reply).begin(be::kParseComplete).end();
                break;
            }
            case fe::kBind: {
                auto names = parse_bind_names(next.body());
                auto parameters = parse_bind_parameters(next.body());
                if (!op || !names || !names->portal.empty() || !names->statement.empty() ||
                    !parameters || !parameters->values.empty()) {
                    return {};
                }
                MessageWriter(reply).begin(be::kBindComplete).end();
                break;
            }
            case fe::kDescribe: {
                const std::uint8_t what = body.u8();
                const std::string_view name = body.cstring();
                if (!op || !body.ok() || !name.empty() || (what != 'S' && what != 'P')) return {};
                if (what == 'S') MessageWriter(reply).begin(be::kParameterDescription).i16(0).end();
                MessageWriter(reply).begin(be::kNoData).end();
                break;
            }
            case fe::kExecute: {
                const std::string_view portal = body.cstring();
                if (!op || !body.ok() || !portal.empty()) return {};
                append_command_complete(reply, listen_command_tag(*op));
                ++executed;
                break;
            }
            case fe::kFlush:
                if (!op) return {};
                flushed = true;
                break;
            case fe::kSync: {
                if (!op) return {};
                append_ready_for_query(reply, tx_status);
                ListenRequest result;
                result.kind = Kind::Answered;
                // Each Execute did the statement once; LISTEN and UNLISTEN do the same twice.
                if (executed > 0) result.ops.push_back(*op);
                result.reply = std::move(reply);
                result.consumed = consumed;
                return result;
            }
            default:
                return {};
        }
    }
}

}  // namespace pgtether::protocol
