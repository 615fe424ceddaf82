// Fuzzes the readers of client messages (protocol/frontend_messages.hpp, protocol §55.7): every
// reader gets the whole input as a message body, and then the input is read as a client stream
// (framed with frame_message, each message given to the reader for its type, as the proxy does).
//
// Checked for every reader that accepts a body:
//  * every name, string or byte range it returns is a view into the body;
//  * where pgtether has a builder for the message, rebuilding it from what was read gives the
//    body back byte for byte (Query, PasswordMessage, SASLInitialResponse; Parse without
//    parameter types);
//  * Describe/Close name a statement or a portal; Parse's parameter types are a count and that
//    many OIDs; returned strings hold no NUL.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/bytes.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;
using pgtether::fuzz::within;

namespace {

bool no_nul(std::string_view s) { return s.find('\0') == std::string_view::npos; }

// The body of the one message `build` appended.
std::string body_of(const std::string& message) { return message.substr(kTypedHeaderSize); }

void check_string(std::string_view s, std::string_view body) {
    require(within(s, body), "a returned string is a view into the body");
    require(no_nul(s), "a returned string holds no NUL");
}

void read_query(std::string_view body) {
    if (auto sql = parse_query(as_bytes(body))) {
        check_string(*sql, body);
        std::string out;
        append_query(out, *sql);
        require(body_of(out) == body, "Query round-trips");
    }
}

void read_parse(std::string_view body) {
    if (auto m = parse_parse(as_bytes(body))) {
        check_string(m->statement, body);
        check_string(m->query, body);
        const std::string_view types = as_chars(m->parameter_types);
        require(within(types, body), "parameter types are in the body");
        require(types.size() >= 2, "parameter types start with a count");
        const std::size_t count = load_u16(m->parameter_types.data());
        require(count < 0x8000 && types.size() == 2 + 4 * count, "a count and that many OIDs");
        if (count == 0) {
            std::string out;
            append_parse(out, m->statement, m->query);
            require(body_of(out) == body, "Parse without parameter types round-trips");
        }
    }
}

void read_bind(std::string_view body) {
    if (auto b = parse_bind_names(as_bytes(body))) {
        check_string(b->portal, body);
        check_string(b->statement, body);
    }
}

void read_describe_or_close(std::string_view body) {
    if (auto t = parse_describe_or_close(as_bytes(body))) {
        require(t->kind == 'S' || t->kind == 'P', "a statement or a portal");
        check_string(t->name, body);
        require(body.size() == t->name.size() + 2, "kind, name and its NUL are the whole body");
    }
}

void read_password(std::string_view body) {
    if (auto pw = parse_password_message(as_bytes(body))) {
        check_string(*pw, body);
        std::string out;
        append_password_message(out, *pw);
        require(body_of(out) == body, "PasswordMessage round-trips");
    }
}

void read_sasl_initial(std::string_view body) {
    if (auto m = parse_sasl_initial_response(as_bytes(body))) {
        check_string(m->mechanism, body);
        if (m->data) {
            require(within(*m->data, body), "SASL data is in the body");
            std::string out;
            append_sasl_initial_response(out, m->mechanism, *m->data);
            require(body_of(out) == body, "SASLInitialResponse round-trips");
        } else {
            require(body.size() == m->mechanism.size() + 5, "no data: the length is -1");
        }
    }
}

// What the proxy reads from a message of this type (the password type covers every
// authentication response; which one it is depends on the state, so both readers run).
void read_message(char type, std::string_view body) {
    switch (type) {
        case fe::kQuery: read_query(body); break;
        case fe::kParse: read_parse(body); break;
        case fe::kBind: read_bind(body); break;
        case fe::kDescribe:
        case fe::kClose: read_describe_or_close(body); break;
        case fe::kPassword:
            read_password(body);
            read_sasl_initial(body);
            break;
        default: break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = as_text(data, size);
    for (char type : {fe::kQuery, fe::kParse, fe::kBind, fe::kDescribe, fe::kPassword})
        read_message(type, input);

    ByteSpan rest(data, size);
    while (!rest.empty()) {
        const Frame f = frame_message(rest, 1u << 20);
        if (f.status != FrameStatus::Complete) break;
        const std::string_view message = as_chars(rest.first(f.total));
        read_message(f.type, message.substr(kTypedHeaderSize));
        rest = rest.subspan(f.total);
    }
    return 0;
}
