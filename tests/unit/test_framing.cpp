// Framing of typed messages and start-up packets, including delivery one byte at a time.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/startup.hpp"

using namespace pgtether::protocol;

namespace {

// Feeds `stream` to the framer one byte at a time, the way a slow network could deliver it, and
// returns the type and total size of every message framed.
std::vector<std::pair<char, std::size_t>> frame_byte_by_byte(const std::string& stream) {
    std::vector<std::pair<char, std::size_t>> out;
    std::string buffer;
    for (char c : stream) {
        buffer.push_back(c);
        while (true) {
            Frame f = frame_message(as_bytes(buffer), 1 << 20);
            REQUIRE(f.status != FrameStatus::Invalid);
            if (f.status == FrameStatus::NeedMore) break;
            out.emplace_back(f.type, f.total);
            buffer.erase(0, f.total);
        }
    }
    CHECK(buffer.empty());
    return out;
}

}  // namespace

TEST_CASE("framing a typed message needs the five header bytes first") {
    std::string msg;
    append_query(msg, "SELECT 1");
    for (std::size_t n = 0; n < 5; ++n) {
        Frame f = frame_message(as_bytes(std::string_view(msg).substr(0, n)), 1000);
        CHECK(f.status == FrameStatus::NeedMore);
        CHECK_FALSE(f.has_header());
    }
    Frame partial = frame_message(as_bytes(std::string_view(msg).substr(0, 7)), 1000);
    CHECK(partial.status == FrameStatus::NeedMore);
    CHECK(partial.has_header());
    CHECK(partial.type == 'Q');
    CHECK(partial.total == msg.size());
    Frame whole = frame_message(as_bytes(msg), 1000);
    CHECK(whole.status == FrameStatus::Complete);
    CHECK(whole.length == msg.size() - 1);
}

TEST_CASE("every message type frames correctly when delivered one byte at a time") {
    std::string stream;
    append_query(stream, "SELECT 1; SELECT 2");
    append_sync(stream);
    append_flush(stream);
    append_terminate(stream);
    append_copy_fail(stream, "no");
    append_password_message(stream, "secret");
    append_sasl_initial_response(stream, "SCRAM-SHA-256", "n,,n=,r=abc");
    append_sasl_response(stream, "c=biws,r=abc,p=xyz");
    // A few backend messages written by hand: ReadyForQuery, CommandComplete, empty DataRow.
    stream += std::string("Z\0\0\0\5I", 6);
    stream += std::string("C\0\0\0\x0dSELECT 1\0", 14);
    stream += std::string("D\0\0\0\6\0\0", 7);
    auto frames = frame_byte_by_byte(stream);
    std::vector<char> types;
    for (auto& f : frames) types.push_back(f.first);
    CHECK(types == std::vector<char>{'Q', 'S', 'H', 'X', 'f', 'p', 'p', 'p', 'Z', 'C', 'D'});
    std::size_t total = 0;
    for (auto& f : frames) total += f.second;
    CHECK(total == stream.size());
}

TEST_CASE("invalid lengths are rejected as soon as the header is known") {
    // Length 3 is below the minimum (the length counts itself).
    CHECK(frame_message(as_bytes(std::string("Q\0\0\0\3", 5)), 1000).status ==
          FrameStatus::Invalid);
    CHECK(frame_message(as_bytes(std::string("Q\0\0\0\0", 5)), 1000).status ==
          FrameStatus::Invalid);
    // Above max_packet_size.
    CHECK(frame_message(as_bytes(std::string("Q\0\0\x10\0", 5)), 1000).status ==
          FrameStatus::Invalid);
    // A negative length read as unsigned is huge.
    CHECK(frame_message(as_bytes(std::string("Q\xff\xff\xff\xff", 5)), 0x7fffffff).status ==
          FrameStatus::Invalid);
    // Exactly at the limit is fine.
    CHECK(frame_message(as_bytes(std::string("Q\0\0\x03\xe8", 5)), 1000).status ==
          FrameStatus::NeedMore);
}

TEST_CASE("start-up packets") {
    std::string startup = build_startup_message({{"user", "alice"}, {"database", "app"}});
    for (std::size_t n = 0; n < startup.size(); ++n) {
        CHECK(frame_startup_packet(as_bytes(std::string_view(startup).substr(0, n))).status ==
              FrameStatus::NeedMore);
    }
    Frame f = frame_startup_packet(as_bytes(startup));
    REQUIRE(f.status == FrameStatus::Complete);
    auto parsed = parse_startup_packet(as_bytes(startup));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::Startup);
    CHECK(parsed.packet->code == kProtocolVersion3);
    REQUIRE(parsed.packet->find("user"));
    CHECK(*parsed.packet->find("user") == "alice");
    CHECK(*parsed.packet->find("database") == "app");
    CHECK(parsed.packet->find("options") == nullptr);

    // Too short, too long: PostgreSQL allows 10000 bytes after the length word.
    CHECK(frame_startup_packet(as_bytes(std::string("\0\0\0\7", 4))).status ==
          FrameStatus::Invalid);
    CHECK(frame_startup_packet(as_bytes(std::string("\0\1\0\0", 4))).status ==
          FrameStatus::Invalid);
    CHECK(frame_startup_packet(as_bytes(std::string("\0\0\x27\x14", 4))).status ==
          FrameStatus::NeedMore);  // 10004
    CHECK(frame_startup_packet(as_bytes(std::string("\0\0\x27\x15", 4))).status ==
          FrameStatus::Invalid);  // 10005
    // A Terminate where the start-up packet belongs: its type byte makes the length 1.4 GB.
    CHECK(frame_startup_packet(as_bytes(std::string("X\0\0\0\4", 5))).status ==
          FrameStatus::Invalid);
}

TEST_CASE("SSLRequest, GSSENCRequest and CancelRequest") {
    std::string ssl = build_ssl_request();
    CHECK(ssl == std::string("\0\0\0\x08\x04\xd2\x16\x2f", 8));
    auto parsed = parse_startup_packet(as_bytes(ssl));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::SslRequest);

    std::string gss("\0\0\0\x08\x04\xd2\x16\x30", 8);
    parsed = parse_startup_packet(as_bytes(gss));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::GssEncRequest);

    std::string cancel = build_cancel_request({1234, -5678});
    CHECK(cancel.size() == 16);
    parsed = parse_startup_packet(as_bytes(cancel));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::CancelRequest);
    CHECK(parsed.packet->cancel_key == CancelKey{1234, -5678});

    // PostgreSQL reads an SSLRequest's declared length and ignores the bytes beyond its code.
    std::string long_ssl("\0\0\0\x0c\x04\xd2\x16\x2f\0\0\0\0", 12);
    parsed = parse_startup_packet(as_bytes(long_ssl));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::SslRequest);

    // A CancelRequest of the wrong size is refused without a word to the client, as PostgreSQL
    // refuses it (a COMMERROR, logged only).
    for (std::string bad_cancel : {std::string("\0\0\0\x0c\x04\xd2\x16\x2e\0\0\0\1", 12),
                                   cancel + std::string(4, '\0')}) {
        bad_cancel[3] = static_cast<char>(bad_cancel.size());
        auto r = parse_startup_packet(as_bytes(bad_cancel));
        CHECK_FALSE(r.packet);
        CHECK(r.error == "invalid length of cancel request packet");
        CHECK_FALSE(r.tell_client);
    }
}

TEST_CASE("protocol 2.0 and malformed parameter lists") {
    std::string v2("\0\0\0\x08\0\x02\0\0", 8);
    auto parsed = parse_startup_packet(as_bytes(v2));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::UnsupportedVersion);

    // Missing the final terminator.
    std::string no_terminator("\0\0\0\x13\0\x03\0\0user\0alice\0", 19);
    CHECK_FALSE(parse_startup_packet(as_bytes(no_terminator)).packet);
    // Name without a value. PostgreSQL reports every layout error to the client, in one wording.
    std::string no_value("\0\0\0\x0e\0\x03\0\0user\0\0", 14);
    auto r = parse_startup_packet(as_bytes(no_value));
    CHECK_FALSE(r.packet);
    CHECK(r.error == "invalid startup packet layout: expected terminator as last byte");
    CHECK(r.tell_client);
    std::string value_unterminated("\0\0\0\x0e\0\x03\0\0user\0x", 14);
    r = parse_startup_packet(as_bytes(value_unterminated));
    CHECK_FALSE(r.packet);
    CHECK(r.error == "invalid startup packet layout: expected terminator as last byte");
    // PostgreSQL accepts one stray byte where the terminator belongs (ProcessStartupPacket stops
    // its scan there), and nothing more.
    std::string stray("\0\0\0\x14\0\x03\0\0user\0alice\0x", 20);
    parsed = parse_startup_packet(as_bytes(stray));
    REQUIRE(parsed.packet);
    CHECK(*parsed.packet->find("user") == "alice");
    std::string two_stray("\0\0\0\x15\0\x03\0\0user\0alice\0xy", 21);
    CHECK_FALSE(parse_startup_packet(as_bytes(two_stray)).packet);
    CHECK(unsupported_protocol_message((1234u << 16) | 5679) ==
          "unsupported frontend protocol 1234.5679: server supports 3.0 to 3.0");
    // Protocol 3.2 is still protocol 3.
    std::string v32("\0\0\0\x09\0\x03\0\x02\0", 9);
    parsed = parse_startup_packet(as_bytes(v32));
    REQUIRE(parsed.packet);
    CHECK(parsed.packet->kind == StartupKind::Startup);
}
