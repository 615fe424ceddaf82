// LISTEN multiplexed: which requests at the start of a client's input pgtether answers itself,
// which it waits for the rest of, and the replies (protocol/listen_request.hpp), table by table.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/listen_request.hpp"

using namespace pgtether;
using protocol::ListenOp;
using protocol::ListenRequest;

namespace {

// Frontend messages written out here, not with protocol/'s writers (protocol §55.7).
std::string be32(std::uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
}
std::string message(char type, const std::string& body) {
    return std::string(1, type) + be32(static_cast<std::uint32_t>(body.size() + 4)) + body;
}
std::string cstr(std::string_view s) { return std::string(s) + '\0'; }
std::string query(std::string_view sql) { return message('Q', cstr(sql)); }
std::string parse(std::string_view sql, std::string_view name = "") {
    return message('P', cstr(name) + cstr(sql) + std::string(2, '\0'));
}
std::string bind(std::string_view statement = "") {
    // portal, statement, no format codes, no parameters, no result format codes
    return message('B', cstr("") + cstr(statement) + std::string(6, '\0'));
}
std::string describe(char what) { return message('D', std::string(1, what) + cstr("")); }
std::string execute() { return message('E', cstr("") + be32(0)); }
std::string flush() { return message('H', ""); }
std::string sync() { return message('S', ""); }

// The type bytes of the messages of a reply: "12nCZ".
std::string types_of(const std::string& reply) {
    std::string types;
    std::size_t at = 0;
    while (at + 5 <= reply.size()) {
        types += reply[at];
        const auto* p = reinterpret_cast<const unsigned char*>(reply.data() + at + 1);
        const std::uint32_t length = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                                     (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
        at += 1 + length;
    }
    return types;
}

ListenRequest recognise(const std::string& data, std::size_t wait_limit = 4096,
                        char tx_status = 'I') {
    return protocol::recognise_listen_request(
        {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}, 16 * 1024, wait_limit,
        tx_status);
}

const char* kind_name(ListenRequest::Kind kind) {
    switch (kind) {
        case ListenRequest::Kind::Other: return "other";
        case ListenRequest::Kind::Incomplete: return "incomplete";
        case ListenRequest::Kind::Answered: return "answered";
    }
    return "?";
}

}  // namespace

TEST_CASE("listen requests: what is answered, and with what") {
    struct Row {
        const char* what;
        std::string data;
        const char* kind;
        std::string reply_types;  // when answered
        std::size_t ops;
    };
    const std::string batch = parse("LISTEN jobs") + bind() + describe('P') + execute() + sync();
    const Row rows[] = {
        {"a lone LISTEN", query("LISTEN jobs"), "answered", "CZ", 1},
        {"two statements", query("LISTEN a; UNLISTEN b"), "answered", "CCZ", 2},
        {"anything else", query("SELECT 1"), "other", "", 0},
        {"LISTEN among others", query("LISTEN a; SELECT 1"), "other", "", 0},
        {"a batch", batch, "answered", "12nCZ", 1},
        {"Describe of the statement",
         parse("UNLISTEN *") + bind() + describe('S') + execute() + sync(), "answered",
         "12tnCZ", 1},
        {"executed twice", parse("LISTEN a") + bind() + execute() + execute() + sync(),
         "answered", "12CCZ", 1},
        {"never executed", parse("LISTEN a") + bind() + sync(), "answered", "12Z", 0},
        {"a Flush before the Sync, all here",
         parse("LISTEN a") + bind() + execute() + flush() + sync(), "answered", "12CZ", 1},
        {"a Flush, the Sync not yet here", parse("LISTEN a") + bind() + execute() + flush(),
         "other", "", 0},
        {"a named statement", parse("LISTEN a", "s1") + bind("s1") + execute() + sync(),
         "other", "", 0},
        {"a named statement's Bind", parse("LISTEN a") + bind("s1") + execute() + sync(),
         "other", "", 0},
        {"two statements in one Parse", parse("LISTEN a; LISTEN b") + bind() + sync(), "other",
         "", 0},
        {"a Query after the Parse", parse("LISTEN a") + query("LISTEN b"), "other", "", 0},
        {"a batch of something else", parse("SELECT 1") + bind() + execute() + sync(), "other",
         "", 0},
        {"a Terminate", message('X', ""), "other", "", 0},
    };
    for (const auto& row : rows) {
        CAPTURE(row.what);
        const ListenRequest request = recognise(row.data);
        CHECK(std::string(kind_name(request.kind)) == row.kind);
        if (request.kind != ListenRequest::Kind::Answered) continue;
        CHECK(types_of(request.reply) == row.reply_types);
        CHECK(request.ops.size() == row.ops);
        CHECK(request.consumed == row.data.size());
    }
    // What follows a request is left for the next one.
    const std::string two = query("LISTEN a") + query("SELECT 1");
    CHECK(recognise(two).consumed == query("LISTEN a").size());
    CHECK(recognise(batch + query("SELECT 1")).consumed == batch.size());
    CHECK(recognise(batch).ops == std::vector<ListenOp>{{ListenOp::Kind::Listen, "jobs"}});
}

TEST_CASE("listen requests in pieces: waited for while they may still be one, within the limit") {
    const std::string batch = parse("LISTEN jobs") + bind() + describe('P') + execute() + sync();
    const std::string lone = query("LISTEN jobs");
    for (const std::string* request : {&batch, &lone}) {
        for (std::size_t cut = 1; cut < request->size(); ++cut) {
            CAPTURE(cut);
            const std::string piece = request->substr(0, cut);
            CHECK(recognise(piece).kind == ListenRequest::Kind::Incomplete);
            // Beyond what the caller can hold it is not waited for: it goes to a backend.
            CHECK(recognise(piece, request->size() + 1).kind == ListenRequest::Kind::Incomplete);
            CHECK(recognise(piece, cut > 5 ? cut - 5 : 1).kind == ListenRequest::Kind::Other);
        }
        CHECK(recognise(*request).kind == ListenRequest::Kind::Answered);
    }
    // The start of something else is not waited for once it shows what it is.
    const std::string select = query("SELECT 1");
    CHECK(recognise(select.substr(0, 7)).kind == ListenRequest::Kind::Incomplete);
    CHECK(recognise(parse("SELECT 1") + bind().substr(0, 3)).kind == ListenRequest::Kind::Other);
    const std::string copy = message('d', std::string(100, 'x'));
    CHECK(recognise(copy.substr(0, 20)).kind == ListenRequest::Kind::Other);
}

TEST_CASE("listen requests inside a transaction end with its status") {
    const std::string batch = parse("LISTEN jobs") + bind() + execute() + sync();
    for (const std::string& request : {query("LISTEN jobs"), batch}) {
        for (const char status : {'I', 'T'}) {
            const ListenRequest answered = recognise(request, 4096, status);
            REQUIRE(answered.kind == ListenRequest::Kind::Answered);
            CHECK(answered.reply.back() == status);  // ReadyForQuery's one byte
        }
    }
}
