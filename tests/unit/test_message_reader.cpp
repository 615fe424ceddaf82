// The message reader's framing decisions (protocol/message_reader.hpp): what each step is, how a
// streamed or skipped remainder is counted off, and that a stream delivered in pieces of any size
// comes out byte for byte the same.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_reader.hpp"

using namespace pgtether::protocol;
using Step = MessageReader::Step;

namespace {

std::string message(char type, const std::string& body) {
    std::string out(1, type);
    const auto length = static_cast<std::uint32_t>(body.size() + 4);
    out.push_back(static_cast<char>(length >> 24));
    out.push_back(static_cast<char>(length >> 16));
    out.push_back(static_cast<char>(length >> 8));
    out.push_back(static_cast<char>(length));
    return out + body;
}

// What a connection does with each step, the way Server and Client use the reader: messages of
// `streamed` type are forwarded as they arrive (or skipped with `skip`), others are fetched
// whole. `chunk` bytes arrive at a time; what a call leaves unconsumed is offered again with the
// next bytes, as Stream does.
struct Outcome {
    std::string forwarded;           // bytes passed on, in order
    std::vector<std::string> whole;  // type + body of every fetched message
    bool invalid = false;
};

Outcome run(const std::string& stream, std::size_t chunk, char streamed, bool skip,
            std::uint32_t max_length = 1 << 20) {
    Outcome out;
    MessageReader reader;
    std::string pending;
    for (std::size_t at = 0; at < stream.size() && !out.invalid; at += chunk) {
        pending += stream.substr(at, chunk);
        const ByteSpan data = as_bytes(pending);
        std::size_t consumed = 0;
        while (consumed < data.size()) {
            const MessageReader::Next next = reader.next(data.subspan(consumed), max_length);
            if (next.step == Step::Forward || next.step == Step::Skip) {
                CHECK(next.bytes.size() > 0);
                if (next.step == Step::Forward) out.forwarded += std::string(as_chars(next.bytes));
                consumed += next.bytes.size();
                continue;
            }
            if (next.step == Step::Invalid) {
                out.invalid = true;
                break;
            }
            if (next.step == Step::Partial && next.type == streamed) {
                if (skip) {
                    reader.skip_rest(next);
                } else {
                    out.forwarded += std::string(as_chars(next.bytes));
                    reader.forward_rest(next);
                }
                consumed = data.size();
                break;
            }
            if (next.step != Step::Message) break;  // fetch: wait for the whole message
            CHECK(next.bytes.size() == next.total);
            CHECK(next.body().size() == next.total - kTypedHeaderSize);
            out.whole.push_back(std::string(1, next.type) + std::string(as_chars(next.body())));
            if (next.type != streamed || !skip) out.forwarded += std::string(as_chars(next.bytes));
            consumed += next.total;
        }
        pending.erase(0, consumed);
    }
    if (!out.invalid) CHECK(pending.empty());
    CHECK_FALSE(reader.in_message());
    return out;
}

}  // namespace

TEST_CASE("examine: one step per kind of start") {
    const std::string query = message('Q', std::string("SELECT 1\0", 9));
    struct Row {
        std::string data;
        std::uint32_t max_length;
        Step step;
        char type;
        std::size_t total;
        std::size_t bytes;
    };
    const std::vector<Row> table = {
        {"", 100, Step::NeedMore, 0, 0, 0},
        {"Q", 100, Step::NeedMore, 'Q', 0, 1},
        {query.substr(0, 4), 100, Step::NeedMore, 'Q', 0, 4},
        {query.substr(0, 5), 100, Step::Partial, 'Q', query.size(), 5},
        {query.substr(0, query.size() - 1), 100, Step::Partial, 'Q', query.size(),
         query.size() - 1},
        {query, 100, Step::Message, 'Q', query.size(), query.size()},
        {query + "S", 100, Step::Message, 'Q', query.size(), query.size()},
        // The length field counts itself: below 4 can never be valid.
        {std::string("S\0\0\0\3", 5), 100, Step::Invalid, 'S', 0, 0},
        {std::string("S\0\0\0\4", 5), 100, Step::Message, 'S', 5, 5},
        // Above the limit: refused as soon as the header is in, never waited for.
        {query.substr(0, 5), 4, Step::Invalid, 'Q', 0, 0},
        {std::string("D\x7f\xff\xff\xff", 5), 1 << 20, Step::Invalid, 'D', 0, 0},
    };
    for (const auto& row : table) {
        CAPTURE(row.data.size());
        CAPTURE(row.max_length);
        const auto next = MessageReader::examine(as_bytes(row.data), row.max_length);
        CHECK(next.step == row.step);
        if (row.step != Step::NeedMore || row.data.size() >= 5) CHECK(next.type == row.type);
        CHECK(next.total == row.total);
        CHECK(next.bytes.size() == row.bytes);
    }
}

TEST_CASE("a remainder is counted off across reads, forwarded or skipped") {
    const std::string row = message('D', std::string(100, 'x'));
    MessageReader reader;
    auto partial = reader.next(as_bytes(row.substr(0, 30)), 1 << 20);
    REQUIRE(partial.step == Step::Partial);
    reader.forward_rest(partial);
    CHECK(reader.in_message());
    CHECK(reader.forwarding());
    CHECK(reader.remaining() == row.size() - 30);

    const std::string more = row.substr(30, 50);
    auto next = reader.next(as_bytes(more), 1 << 20);
    CHECK(next.step == Step::Forward);
    CHECK(next.bytes.size() == 50);
    CHECK(reader.remaining() == row.size() - 80);

    // Its receiver left: the rest is dropped, and the reader no longer counts as forwarding.
    reader.skip_remainder();
    CHECK_FALSE(reader.forwarding());
    CHECK(reader.in_message());
    const std::string tail = row.substr(80) + message('Z', "I");
    next = reader.next(as_bytes(tail), 1 << 20);
    CHECK(next.step == Step::Skip);
    CHECK(next.bytes.size() == row.size() - 80);
    CHECK_FALSE(reader.in_message());
    next = reader.next(as_bytes(tail).subspan(row.size() - 80), 1 << 20);
    CHECK(next.step == Step::Message);
    CHECK(next.type == 'Z');

    // reset() forgets a remainder.
    partial = reader.next(as_bytes(row.substr(0, 10)), 1 << 20);
    reader.skip_rest(partial);
    CHECK(reader.in_message());
    reader.reset();
    CHECK_FALSE(reader.in_message());
    CHECK(reader.next(as_bytes(row), 1 << 20).step == Step::Message);
}

TEST_CASE("a stream delivered in pieces of every size reads the same") {
    std::string stream;
    stream += message('T', std::string(20, 't'));
    stream += message('D', std::string(300, 'a'));
    stream += message('D', "");
    stream += message('C', std::string("SELECT 2\0", 9));
    stream += message('D', std::string(1000, 'b'));
    stream += message('Z', "I");
    const Outcome whole = run(stream, stream.size(), 'D', false);
    REQUIRE(whole.whole.size() == 6);
    for (std::size_t chunk = 1; chunk <= 64; ++chunk) {
        CAPTURE(chunk);
        // Forwarding: every byte goes on exactly once and in order, whatever the pieces.
        const Outcome forwarded = run(stream, chunk, 'D', false);
        CHECK_FALSE(forwarded.invalid);
        CHECK(forwarded.forwarded == stream);
        // Fetched messages are seen whole; a streamed one only when it arrived whole at once.
        std::size_t others = 0;
        for (const auto& m : forwarded.whole)
            others += m[0] != 'D';
        CHECK(others == 3);
        // Skipping: nothing of the streamed type is passed on.
        const Outcome skipped = run(stream, chunk, 'D', true);
        CHECK(skipped.forwarded == message('T', std::string(20, 't')) +
                                       message('C', std::string("SELECT 2\0", 9)) +
                                       message('Z', "I"));
    }
}

TEST_CASE("an invalid length stops the stream wherever it arrives") {
    std::string stream = message('Z', "I") + std::string("D\0\0\0\2", 5) + message('Z', "I");
    for (std::size_t chunk = 1; chunk <= stream.size(); ++chunk) {
        CAPTURE(chunk);
        const Outcome out = run(stream, chunk, 'D', false);
        CHECK(out.invalid);
        CHECK(out.whole.size() == 1);
    }
    // Too large for the limit: refused at the header.
    const Outcome big = run(message('D', std::string(200, 'x')), 7, 'D', false, 100);
    CHECK(big.invalid);
    CHECK(big.forwarded.empty());
}

TEST_CASE("read_messages hands over whole messages until told to stop") {
    const std::string stream = message('S', "a") + message('K', "bb") + message('Z', "I") +
                               message('D', "partial").substr(0, 7);
    struct Row {
        char stop_at;  // the type whose handler says stop; 0: never
        std::size_t consumed;
        std::size_t seen;
    };
    const std::size_t s = message('S', "a").size(), k = message('K', "bb").size(),
                      z = message('Z', "I").size();
    const std::vector<Row> table = {
        {0, s + k + z, 3},  // stops before the unfinished DataRow: it stays for later
        {'S', s, 1},        // the message that stopped counts as consumed
        {'K', s + k, 2},
        {'Z', s + k + z, 3},
    };
    for (const auto& row : table) {
        CAPTURE(row.stop_at);
        std::size_t seen = 0;
        const MessagesRead read =
            read_messages(as_bytes(stream), 1 << 20, [&](const MessageReader::Next& m) {
                ++seen;
                CHECK(m.step == Step::Message);
                return m.type != row.stop_at;
            });
        CHECK_FALSE(read.invalid);
        CHECK(read.consumed == row.consumed);
        CHECK(seen == row.seen);
    }
    const std::string bad = message('S', "a") + std::string("E\0\1\0\0", 5);
    std::size_t seen = 0;
    const MessagesRead read = read_messages(as_bytes(bad), 1000, [&](const auto&) {
        ++seen;
        return true;
    });
    CHECK(read.invalid);
    CHECK(read.length == 0x10000);
    CHECK(read.consumed == s);
    CHECK(seen == 1);
}
