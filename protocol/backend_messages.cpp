#include "protocol/backend_messages.hpp"

namespace pgtether::protocol {

namespace {

void append_fields(std::string& out, char type, const ErrorFields& f) {
    MessageWriter w(out);
    w.begin(type);
    w.u8('S').cstring(f.severity);
    w.u8('V').cstring(f.severity);  // non-localized severity (protocol 3.0, PostgreSQL 9.6+)
    w.u8('C').cstring(f.sqlstate);
    w.u8('M').cstring(f.message);
    if (!f.detail.empty()) w.u8('D').cstring(f.detail);
    if (!f.hint.empty()) w.u8('H').cstring(f.hint);
    w.u8(0).end();
}

}  // namespace

void append_error_response(std::string& out, const ErrorFields& fields) {
    append_fields(out, be::kErrorResponse, fields);
}

void append_notice_response(std::string& out, const ErrorFields& fields) {
    append_fields(out, be::kNoticeResponse, fields);
}

void append_authentication(std::string& out, AuthRequest code, std::string_view data) {
    MessageWriter w(out);
    w.begin(be::kAuthentication).i32(static_cast<std::int32_t>(code)).bytes(data).end();
}

void append_auth_md5(std::string& out, const std::array<std::uint8_t, 4>& salt) {
    append_authentication(out, AuthRequest::Md5Password,
                          std::string_view(reinterpret_cast<const char*>(salt.data()), salt.size()));
}

void append_auth_sasl(std::string& out, const std::vector<std::string>& mechanisms) {
    MessageWriter w(out);
    w.begin(be::kAuthentication).i32(static_cast<std::int32_t>(AuthRequest::Sasl));
    for (const auto& m : mechanisms) w.cstring(m);
    w.u8(0).end();
}

void append_parameter_status(std::string& out, std::string_view name, std::string_view value) {
    MessageWriter w(out);
    w.begin(be::kParameterStatus).cstring(name).cstring(value).end();
}

void append_backend_key_data(std::string& out, CancelKey key) {
    MessageWriter w(out);
    w.begin(be::kBackendKeyData).i32(key.pid).i32(key.secret).end();
}

void append_ready_for_query(std::string& out, char tx_status) {
    MessageWriter w(out);
    w.begin(be::kReadyForQuery).u8(static_cast<std::uint8_t>(tx_status)).end();
}

void append_row_description(std::string& out, const std::vector<ColumnDescription>& columns) {
    MessageWriter w(out);
    w.begin(be::kRowDescription).i16(static_cast<std::int16_t>(columns.size()));
    for (const auto& c : columns) {
        w.cstring(c.name)
            .i32(0)   // table OID
            .i16(0)   // column attribute number
            .i32(static_cast<std::int32_t>(c.type_oid))
            .i16(-1)  // type size: variable
            .i32(-1)  // type modifier
            .i16(0);  // text format
    }
    w.end();
}

void append_data_row(std::string& out, const std::vector<std::optional<std::string>>& values) {
    MessageWriter w(out);
    w.begin(be::kDataRow).i16(static_cast<std::int16_t>(values.size()));
    for (const auto& v : values) {
        if (!v) {
            w.i32(-1);
        } else {
            w.i32(static_cast<std::int32_t>(v->size())).bytes(*v);
        }
    }
    w.end();
}

void append_command_complete(std::string& out, std::string_view tag) {
    MessageWriter w(out);
    w.begin(be::kCommandComplete).cstring(tag).end();
}

std::optional<ErrorFields> parse_error_fields(ByteSpan body) {
    ByteReader r(body);
    ErrorFields f;
    std::string localized_severity;
    while (true) {
        std::uint8_t code = r.u8();
        if (!r.ok()) return std::nullopt;
        if (code == 0) break;
        std::string_view value = r.cstring();
        if (!r.ok()) return std::nullopt;
        switch (code) {
            case 'S': localized_severity = value; break;
            case 'V': f.severity = value; break;
            case 'C': f.sqlstate = value; break;
            case 'M': f.message = value; break;
            case 'D': f.detail = value; break;
            case 'H': f.hint = value; break;
            default: break;  // other fields (position, where, ...) are passed through, not needed
        }
    }
    if (f.severity.empty()) f.severity = localized_severity;
    return f;
}

namespace {

// PostgreSQL writes a position as a positive decimal.
std::optional<std::size_t> decimal(std::string_view text) {
    if (text.empty() || text.size() > 9) return std::nullopt;
    std::size_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + static_cast<std::size_t>(c - '0');
    }
    return value;
}

}  // namespace

std::optional<std::size_t> parse_error_position(ByteSpan body) {
    ByteReader r(body);
    while (true) {
        const std::uint8_t code = r.u8();
        if (!r.ok() || code == 0) return std::nullopt;
        const std::string_view value = r.cstring();
        if (!r.ok()) return std::nullopt;
        if (code == 'P') return decimal(value);
    }
}

std::optional<std::string> error_with_position(ByteSpan body, std::size_t position) {
    const std::string position_text = std::to_string(position);
    std::string out;
    MessageWriter w(out);
    w.begin(be::kErrorResponse);
    ByteReader r(body);
    while (true) {
        const std::uint8_t code = r.u8();
        if (!r.ok()) return std::nullopt;
        if (code == 0) break;
        const std::string_view value = r.cstring();
        if (!r.ok()) return std::nullopt;
        w.u8(code).cstring(code == 'P' ? std::string_view(position_text) : value);
    }
    w.u8(0).end();
    return out;
}

void append_v2_fatal_error(std::string& out, std::string_view message) {
    out.push_back(be::kErrorResponse);
    out.append("FATAL:  ").append(message).append("\n");
    out.push_back('\0');
}

bool is_fatal(const ErrorFields& error) {
    return error.severity == "FATAL" || error.severity == "PANIC";
}

std::optional<AuthenticationMessage> parse_authentication(ByteSpan body) {
    ByteReader r(body);
    auto code = r.i32();
    if (!r.ok()) return std::nullopt;
    AuthenticationMessage m{static_cast<AuthRequest>(code), r.rest()};
    if (m.code == AuthRequest::Md5Password && m.data.size() != 4) return std::nullopt;
    return m;
}

std::optional<std::vector<std::string_view>> parse_sasl_mechanisms(ByteSpan data) {
    ByteReader r(data);
    std::vector<std::string_view> names;
    while (true) {
        std::string_view name = r.cstring();
        if (!r.ok()) return std::nullopt;
        if (name.empty()) break;
        names.push_back(name);
    }
    return names;
}

std::optional<ParameterStatus> parse_parameter_status(ByteSpan body) {
    ByteReader r(body);
    ParameterStatus p{r.cstring(), r.cstring()};
    if (!r.at_end()) return std::nullopt;
    return p;
}

std::optional<CancelKey> parse_backend_key_data(ByteSpan body) {
    ByteReader r(body);
    CancelKey key{r.i32(), r.i32()};
    if (!r.at_end()) return std::nullopt;
    return key;
}

std::optional<char> parse_ready_for_query(ByteSpan body) {
    ByteReader r(body);
    auto status = static_cast<char>(r.u8());
    if (!r.at_end()) return std::nullopt;
    if (status != kTxIdle && status != kTxInBlock && status != kTxFailed) return std::nullopt;
    return status;
}

std::optional<std::string_view> parse_command_complete(ByteSpan body) {
    ByteReader r(body);
    auto tag = r.cstring();
    if (!r.at_end()) return std::nullopt;
    return tag;
}

std::optional<std::vector<std::uint32_t>> parse_row_description_types(ByteSpan body) {
    // Per field (§55.7): name, table OID (4), column number (2), type OID (4), type size (2),
    // type modifier (4), format code (2).
    ByteReader r(body);
    auto count = r.i16();
    if (!r.ok() || count < 0) return std::nullopt;
    std::vector<std::uint32_t> types;
    types.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        r.cstring();
        r.bytes(6);
        types.push_back(r.u32());
        r.bytes(8);
        if (!r.ok()) return std::nullopt;
    }
    if (!r.at_end()) return std::nullopt;
    return types;
}

std::optional<std::vector<std::optional<std::string_view>>> parse_data_row(ByteSpan body) {
    ByteReader r(body);
    auto count = r.i16();
    if (!r.ok() || count < 0) return std::nullopt;
    std::vector<std::optional<std::string_view>> values;
    values.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        auto len = r.i32();
        if (!r.ok()) return std::nullopt;
        if (len == -1) {
            values.emplace_back(std::nullopt);
            continue;
        }
        if (len < 0) return std::nullopt;
        auto bytes = r.bytes(static_cast<std::size_t>(len));
        if (!r.ok()) return std::nullopt;
        values.emplace_back(as_chars(bytes));
    }
    if (!r.at_end()) return std::nullopt;
    return values;
}

}  // namespace pgtether::protocol
