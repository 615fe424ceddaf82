// Builders and readers for the server-to-client messages pgtether generates or must inspect
// (protocol §55.7). Readers take the message *body* (what follows the 5-byte type+length header)
// and return nullopt when it is malformed; they never read past the body.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/message_types.hpp"
#include "protocol/startup.hpp"

namespace pgtether::protocol {

// The fields of an ErrorResponse/NoticeResponse (protocol §55.8 "Error and Notice Message Fields").
struct ErrorFields {
    std::string severity;  // "ERROR", "FATAL", "WARNING", ... (the non-localized 'V' field when present)
    std::string sqlstate;  // 'C'
    std::string message;   // 'M'
    std::string detail;    // 'D'
    std::string hint;      // 'H'
};

// A FATAL error of pgtether's own: severity FATAL, no detail or hint.
[[nodiscard]] inline ErrorFields fatal_error(const char* sqlstate, std::string message) {
    return {"FATAL", sqlstate, std::move(message), {}, {}};
}

// ---- builders (append one complete message to `out`) ----
void append_error_response(std::string& out, const ErrorFields& fields);
// A FATAL error as protocol 2.0 sent it ('E' and one string, no length word): PostgreSQL's answer
// to a StartupMessage for protocol 2.0 or older, which it still speaks that far.
void append_v2_fatal_error(std::string& out, std::string_view message);
void append_notice_response(std::string& out, const ErrorFields& fields);
void append_authentication(std::string& out, AuthRequest code, std::string_view data = {});
void append_auth_md5(std::string& out, const std::array<std::uint8_t, 4>& salt);
void append_auth_sasl(std::string& out, const std::vector<std::string>& mechanisms);
void append_parameter_status(std::string& out, std::string_view name, std::string_view value);
void append_backend_key_data(std::string& out, CancelKey key);
void append_ready_for_query(std::string& out, char tx_status);
// Column name and type OID; format is always text.
struct ColumnDescription {
    std::string name;
    std::uint32_t type_oid = 25;  // text
};
void append_row_description(std::string& out, const std::vector<ColumnDescription>& columns);
void append_data_row(std::string& out, const std::vector<std::optional<std::string>>& values);
void append_command_complete(std::string& out, std::string_view tag);

// ---- readers ----
[[nodiscard]] std::optional<ErrorFields> parse_error_fields(ByteSpan body);
// An ErrorResponse's position field ('P': 1-based, in characters of the Query text); nullopt
// when it has none (or not as PostgreSQL writes it) or is malformed.
[[nodiscard]] std::optional<std::size_t> parse_error_position(ByteSpan body);
// The ErrorResponse of `body` as a complete message with its position field set to `position`,
// every other field as the backend sent it; nullopt when it is malformed.
[[nodiscard]] std::optional<std::string> error_with_position(ByteSpan body, std::size_t position);
// Whether an error is FATAL or PANIC: the backend closes the connection after it.
[[nodiscard]] bool is_fatal(const ErrorFields& error);

struct AuthenticationMessage {
    AuthRequest code;
    ByteSpan data;  // md5: 4-byte salt; SASL: mechanism list; SASLContinue/Final: payload
};
[[nodiscard]] std::optional<AuthenticationMessage> parse_authentication(ByteSpan body);
// The mechanism names of an AuthenticationSASL message's data.
[[nodiscard]] std::optional<std::vector<std::string_view>> parse_sasl_mechanisms(ByteSpan data);

struct ParameterStatus {
    std::string_view name;
    std::string_view value;
};
[[nodiscard]] std::optional<ParameterStatus> parse_parameter_status(ByteSpan body);
[[nodiscard]] std::optional<CancelKey> parse_backend_key_data(ByteSpan body);
[[nodiscard]] std::optional<char> parse_ready_for_query(ByteSpan body);
[[nodiscard]] std::optional<std::string_view> parse_command_complete(ByteSpan body);
// Column values of a DataRow; a NULL is nullopt. Text format is assumed by callers.
// The type OIDs of a RowDescription's fields, in order.
[[nodiscard]] std::optional<std::vector<std::uint32_t>> parse_row_description_types(ByteSpan body);
[[nodiscard]] std::optional<std::vector<std::optional<std::string_view>>> parse_data_row(
    ByteSpan body);

}  // namespace pgtether::protocol
