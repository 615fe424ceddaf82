// Fuzzes the readers of server messages (protocol/backend_messages.hpp, protocol §55.7): pgtether
// reads what a server sends during its own login and internal queries, and what it forwards to
// clients where it must know the type (ErrorResponse, ParameterStatus, ReadyForQuery,
// CommandComplete, DataRow). Every reader gets the whole input as a body; then the input is read
// as a server stream, each framed message given to the reader for its type.
//
// Checked for every reader that accepts a body:
//  * returned strings and byte ranges are views into the body;
//  * rebuilding the message with pgtether's builder gives the body back byte for byte
//    (Authentication, ParameterStatus, BackendKeyData, ReadyForQuery, CommandComplete, DataRow);
//  * ErrorResponse fields survive a rebuild: reading the built message gives the same fields,
//    and so do they when its position is set anew (the new position reading back);
//  * an AuthenticationSASL mechanism list rebuilt reads back the same.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/framing.hpp"
#include "protocol/message_types.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;
using pgtether::fuzz::within;

namespace {

std::string body_of(const std::string& message) { return message.substr(kTypedHeaderSize); }

bool same_fields(const ErrorFields& a, const ErrorFields& b) {
    return a.severity == b.severity && a.sqlstate == b.sqlstate && a.message == b.message &&
           a.detail == b.detail && a.hint == b.hint;
}

void read_error(std::string_view body) {
    auto fields = parse_error_fields(as_bytes(body));
    if (!fields) return;
    for (const std::string* s : {&fields->severity, &fields->sqlstate, &fields->message,
                                 &fields->detail, &fields->hint}) {
        require(s->find('\0') == std::string::npos, "an error field holds no NUL");
    }
    std::string out;
    append_error_response(out, *fields);
    const std::string built_body = body_of(out);
    auto again = parse_error_fields(as_bytes(built_body));
    require(again && same_fields(*again, *fields), "ErrorResponse fields survive a rebuild");

    // A new position (a spliced LISTEN's Query, core/listen_splice.hpp): only it changes.
    if (const auto position = parse_error_position(as_bytes(body))) {
        const std::size_t moved = *position / 2 + 1;
        auto with = error_with_position(as_bytes(body), moved);
        require(with.has_value(), "an error with a position takes another");
        const std::string with_body = body_of(*with);
        require(parse_error_position(as_bytes(with_body)) == moved, "the new position reads back");
        auto kept = parse_error_fields(as_bytes(with_body));
        require(kept && same_fields(*kept, *fields), "the other fields stay");
    }
}

void read_authentication(std::string_view body) {
    auto m = parse_authentication(as_bytes(body));
    if (!m) return;
    const std::string_view payload = as_chars(m->data);
    require(within(payload, body) && payload.size() + 4 == body.size(), "the payload follows");
    std::string out;
    append_authentication(out, m->code, payload);
    require(body_of(out) == body, "Authentication round-trips");
    if (m->code == AuthRequest::Md5Password) require(payload.size() == 4, "an md5 salt");
    if (auto names = parse_sasl_mechanisms(m->data)) {
        std::vector<std::string> copies;
        for (std::string_view name : *names) {
            require(within(name, payload) && !name.empty(), "a mechanism is a view, not empty");
            copies.emplace_back(name);
        }
        std::string built;
        append_auth_sasl(built, copies);
        const std::string built_body = body_of(built);
        auto reread = parse_authentication(as_bytes(built_body));
        require(reread.has_value(), "a built AuthenticationSASL reads");
        auto names_again = parse_sasl_mechanisms(reread->data);
        require(names_again && *names_again == *names, "the mechanism list survives a rebuild");
    }
}

void read_parameter_status(std::string_view body) {
    auto p = parse_parameter_status(as_bytes(body));
    if (!p) return;
    require(within(p->name, body) && within(p->value, body), "views into the body");
    std::string out;
    append_parameter_status(out, p->name, p->value);
    require(body_of(out) == body, "ParameterStatus round-trips");
}

void read_backend_key_data(std::string_view body) {
    auto key = parse_backend_key_data(as_bytes(body));
    if (!key) return;
    std::string out;
    append_backend_key_data(out, *key);
    require(body_of(out) == body, "BackendKeyData round-trips");
}

void read_ready_for_query(std::string_view body) {
    auto status = parse_ready_for_query(as_bytes(body));
    if (!status) return;
    require(*status == kTxIdle || *status == kTxInBlock || *status == kTxFailed, "a tx status");
    std::string out;
    append_ready_for_query(out, *status);
    require(body_of(out) == body, "ReadyForQuery round-trips");
}

void read_command_complete(std::string_view body) {
    auto tag = parse_command_complete(as_bytes(body));
    if (!tag) return;
    require(within(*tag, body), "the tag is a view into the body");
    std::string out;
    append_command_complete(out, *tag);
    require(body_of(out) == body, "CommandComplete round-trips");
}

void read_data_row(std::string_view body) {
    auto values = parse_data_row(as_bytes(body));
    if (!values) return;
    std::vector<std::optional<std::string>> copies;
    for (const auto& v : *values) {
        if (v) require(within(*v, body), "a value is a view into the body");
        copies.push_back(v ? std::optional<std::string>(*v) : std::nullopt);
    }
    std::string out;
    append_data_row(out, copies);
    require(body_of(out) == body, "DataRow round-trips");
}

void read_message(char type, std::string_view body) {
    switch (type) {
        case be::kErrorResponse:
        case be::kNoticeResponse: read_error(body); break;
        case be::kAuthentication: read_authentication(body); break;
        case be::kParameterStatus: read_parameter_status(body); break;
        case be::kBackendKeyData: read_backend_key_data(body); break;
        case be::kReadyForQuery: read_ready_for_query(body); break;
        case be::kCommandComplete: read_command_complete(body); break;
        case be::kDataRow: read_data_row(body); break;
        default: break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = as_text(data, size);
    for (char type : {be::kErrorResponse, be::kAuthentication, be::kParameterStatus,
                      be::kBackendKeyData, be::kReadyForQuery, be::kCommandComplete, be::kDataRow})
        read_message(type, input);

    ByteSpan rest(data, size);
    while (!rest.empty()) {
        const Frame f = frame_message(rest, 1u << 20);
        if (f.status != FrameStatus::Complete) break;
        read_message(f.type, as_chars(rest.first(f.total)).substr(kTypedHeaderSize));
        rest = rest.subspan(f.total);
    }
    return 0;
}
