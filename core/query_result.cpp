#include "core/query_result.hpp"

#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"

namespace pgtether {

namespace be = protocol::be;

std::string QueryResult::error_text() const {
    if (!error_parsed) return "invalid error message";
    return error.sqlstate + ": " + error.message;
}

Collected collect_result(QueryResult& result, char type, protocol::ByteSpan body,
                         const ResultLimits& limits) {
    switch (type) {
        case be::kRowDescription:
        case be::kBindComplete:
            result.rows.clear();
            result.row_count = 0;
            result.row_bytes = 0;
            result.completed = false;
            return Collected::Ok;
        case be::kCommandComplete:
            result.completed = true;
            return Collected::Ok;
        case be::kDataRow: {
            if (++result.row_count > limits.max_rows) return Collected::Ok;
            auto values = protocol::parse_data_row(body);
            if (!values) return Collected::InvalidRow;
            Row row;
            row.reserve(values->size());
            for (const auto& value : *values) {
                if (value) result.row_bytes += value->size();
                row.push_back(value ? std::optional<std::string>(*value) : std::nullopt);
            }
            if (result.row_bytes > limits.max_row_bytes) return Collected::TooLarge;
            result.rows.push_back(std::move(row));
            return Collected::Ok;
        }
        case be::kErrorResponse:
            if (!result.failed) {
                result.failed = true;
                if (auto error = protocol::parse_error_fields(body)) {
                    result.error = std::move(*error);
                    result.error_parsed = true;
                }
            }
            return Collected::Ok;
        default:
            return Collected::Ok;
    }
}

std::string build_extended_query(std::string_view query,
                                 const std::vector<std::optional<std::string>>& params) {
    std::vector<std::optional<std::string_view>> views;
    views.reserve(params.size());
    for (const auto& param : params) {
        views.push_back(param ? std::optional<std::string_view>(*param) : std::nullopt);
    }
    std::string out;
    protocol::append_parse(out, "", query);
    protocol::append_bind(out, "", "", views);
    protocol::append_execute(out, "", 0);
    protocol::append_sync(out);
    return out;
}

}  // namespace pgtether
