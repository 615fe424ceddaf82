#include "protocol/frontend_messages.hpp"

namespace pgtether::protocol {

void append_query(std::string& out, std::string_view sql) {
    MessageWriter(out).begin(fe::kQuery).cstring(sql).end();
}

void append_terminate(std::string& out) { MessageWriter(out).begin(fe::kTerminate).end(); }

void append_sync(std::string& out) { MessageWriter(out).begin(fe::kSync).end(); }

void append_flush(std::string& out) { MessageWriter(out).begin(fe::kFlush).end(); }

void append_copy_fail(std::string& out, std::string_view reason) {
    MessageWriter(out).begin(fe::kCopyFail).cstring(reason).end();
}

void append_password_message(std::string& out, std::string_view password) {
    MessageWriter(out).begin(fe::kPassword).cstring(password).end();
}

void append_sasl_initial_response(std::string& out, std::string_view mechanism,
                                  std::string_view data) {
    MessageWriter(out)
        .begin(fe::kPassword)
        .cstring(mechanism)
        .i32(static_cast<std::int32_t>(data.size()))
        .bytes(data)
        .end();
}

void append_sasl_response(std::string& out, std::string_view data) {
    MessageWriter(out).begin(fe::kPassword).bytes(data).end();
}

void append_parse(std::string& out, std::string_view statement, std::string_view query) {
    MessageWriter(out).begin(fe::kParse).cstring(statement).cstring(query).i16(0).end();
}

void append_bind(std::string& out, std::string_view portal, std::string_view statement,
                 std::span<const std::optional<std::string_view>> text_parameters) {
    MessageWriter w(out);
    w.begin(fe::kBind).cstring(portal).cstring(statement);
    w.i16(0);  // no format codes: every parameter is text
    w.i16(static_cast<std::int16_t>(text_parameters.size()));
    for (const auto& value : text_parameters) {
        if (!value) {
            w.i32(-1);
        } else {
            w.i32(static_cast<std::int32_t>(value->size())).bytes(*value);
        }
    }
    w.i16(0);  // results in text
    w.end();
}

void append_execute(std::string& out, std::string_view portal, std::int32_t max_rows) {
    MessageWriter(out).begin(fe::kExecute).cstring(portal).i32(max_rows).end();
}

std::optional<std::string_view> parse_query(ByteSpan body) {
    ByteReader r(body);
    auto sql = r.cstring();
    if (!r.at_end()) return std::nullopt;
    return sql;
}

std::optional<ParseMessage> parse_parse(ByteSpan body) {
    ByteReader r(body);
    ParseMessage m;
    m.statement = r.cstring();
    m.query = r.cstring();
    m.parameter_types = r.rest();
    if (!r.ok()) return std::nullopt;
    ByteReader types(m.parameter_types);
    auto count = types.i16();
    if (!types.ok() || count < 0) return std::nullopt;
    types.bytes(static_cast<std::size_t>(count) * 4);
    if (!types.at_end()) return std::nullopt;
    return m;
}

std::optional<BindNames> parse_bind_names(ByteSpan body) {
    ByteReader r(body);
    BindNames b{r.cstring(), r.cstring()};
    if (!r.ok()) return std::nullopt;
    return b;
}

std::optional<BindParameters> parse_bind_parameters(ByteSpan body) {
    ByteReader r(body);
    r.cstring();  // portal
    r.cstring();  // statement
    BindParameters b;
    auto format_count = r.i16();
    if (!r.ok() || format_count < 0 || static_cast<std::size_t>(format_count) * 2 > r.remaining()) {
        return std::nullopt;
    }
    b.formats.reserve(static_cast<std::size_t>(format_count));
    for (int i = 0; i < format_count; ++i) b.formats.push_back(r.i16());
    auto value_count = r.i16();
    if (!r.ok() || value_count < 0 || static_cast<std::size_t>(value_count) * 4 > r.remaining()) {
        return std::nullopt;
    }
    if (b.formats.size() > 1 && b.formats.size() != static_cast<std::size_t>(value_count)) {
        return std::nullopt;
    }
    b.values.reserve(static_cast<std::size_t>(value_count));
    for (int i = 0; i < value_count; ++i) {
        auto len = r.i32();
        if (!r.ok() || len < -1) return std::nullopt;
        if (len == -1) {
            b.values.emplace_back(std::nullopt);
            continue;
        }
        auto bytes = r.bytes(static_cast<std::size_t>(len));
        if (!r.ok()) return std::nullopt;
        b.values.emplace_back(bytes);
    }
    // The result formats follow; they are not needed (the accounting reads both formats).
    if (!r.ok()) return std::nullopt;
    return b;
}

std::optional<TargetName> parse_describe_or_close(ByteSpan body) {
    ByteReader r(body);
    auto kind = static_cast<char>(r.u8());
    auto name = r.cstring();
    if (!r.at_end() || (kind != 'S' && kind != 'P')) return std::nullopt;
    return TargetName{kind, name};
}

std::optional<std::string_view> parse_password_message(ByteSpan body) {
    ByteReader r(body);
    auto pw = r.cstring();
    if (!r.at_end()) return std::nullopt;
    return pw;
}

std::optional<SaslInitialResponse> parse_sasl_initial_response(ByteSpan body) {
    ByteReader r(body);
    SaslInitialResponse m;
    m.mechanism = r.cstring();
    auto len = r.i32();
    if (!r.ok()) return std::nullopt;
    if (len == -1) {
        if (!r.at_end()) return std::nullopt;
        return m;
    }
    if (len < 0) return std::nullopt;
    m.data = as_chars(r.bytes(static_cast<std::size_t>(len)));
    if (!r.at_end()) return std::nullopt;
    return m;
}

}  // namespace pgtether::protocol
