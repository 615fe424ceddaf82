// Builders and readers for the client-to-server messages pgtether generates or must inspect
// (protocol §55.7). Readers take the message *body* and return nullopt when it is malformed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/message_types.hpp"

namespace pgtether::protocol {

// ---- builders ----
void append_query(std::string& out, std::string_view sql);
void append_terminate(std::string& out);
void append_sync(std::string& out);
void append_flush(std::string& out);
void append_copy_fail(std::string& out, std::string_view reason);
void append_password_message(std::string& out, std::string_view password);
void append_sasl_initial_response(std::string& out, std::string_view mechanism,
                                  std::string_view data);
void append_sasl_response(std::string& out, std::string_view data);
// Extended query protocol (§55.2.3), for pgtether's own parameterised queries: Parse without
// parameter types, Bind with text parameters (nullopt = NULL) and text results, Execute.
void append_parse(std::string& out, std::string_view statement, std::string_view query);
void append_bind(std::string& out, std::string_view portal, std::string_view statement,
                 std::span<const std::optional<std::string_view>> text_parameters);
void append_execute(std::string& out, std::string_view portal, std::int32_t max_rows);

// ---- readers ----
[[nodiscard]] std::optional<std::string_view> parse_query(ByteSpan body);

struct ParseMessage {
    std::string_view statement;  // "" = unnamed
    std::string_view query;
    ByteSpan parameter_types;    // Int16 count followed by that many Int32 OIDs, as on the wire
};
[[nodiscard]] std::optional<ParseMessage> parse_parse(ByteSpan body);

// Only the two names at the start of a Bind; the rest is forwarded untouched.
struct BindNames {
    std::string_view portal;
    std::string_view statement;
};
[[nodiscard]] std::optional<BindNames> parse_bind_names(ByteSpan body);

// The parameters of a Bind (protocol §55.7): read only for statements exact lock accounting
// looks at.
struct BindParameters {
    std::vector<std::int16_t> formats;  // none (all text), one (for all) or one per parameter
    std::vector<std::optional<ByteSpan>> values;  // nullopt for NULL
    // 0 text, 1 binary, for parameter `i` (0-based).
    [[nodiscard]] std::int16_t format_of(std::size_t i) const {
        if (formats.empty()) return 0;
        return formats.size() == 1 ? formats[0] : (i < formats.size() ? formats[i] : -1);
    }
};
[[nodiscard]] std::optional<BindParameters> parse_bind_parameters(ByteSpan body);

// Describe and Close share a layout: 'S' (statement) or 'P' (portal), then a name.
struct TargetName {
    char kind;  // 'S' or 'P'
    std::string_view name;
};
[[nodiscard]] std::optional<TargetName> parse_describe_or_close(ByteSpan body);

// PasswordMessage: a NUL-terminated password (cleartext or "md5...").
[[nodiscard]] std::optional<std::string_view> parse_password_message(ByteSpan body);

struct SaslInitialResponse {
    std::string_view mechanism;
    std::optional<std::string_view> data;  // nullopt when the length is -1
};
[[nodiscard]] std::optional<SaslInitialResponse> parse_sasl_initial_response(ByteSpan body);

}  // namespace pgtether::protocol
