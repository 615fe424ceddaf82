// Fuzzes the message reader (protocol/message_reader.hpp) the way a connection uses it: the stream
// arrives in pieces, what a call leaves unconsumed is offered again with the next piece (as
// Stream does), messages of one type are streamed (forwarded or skipped as they arrive) and the
// others fetched whole. The first input byte picks the length limit, the piece size, whether
// streamed messages are forwarded or skipped, and which type is streamed; the rest is the stream.
// Checked:
//  * every step's bytes lie inside the bytes offered; Forward/Skip are never empty and never
//    more than the remainder; a Message is exactly its length + 1 with the length in bounds; a
//    Partial has its header and less than its total; Invalid has a length out of bounds;
//  * the pieces do not matter: the headers seen, in order, and whether the stream ends invalid
//    are those of reading the whole stream at once, and the bytes passed on are exactly the
//    stream's messages, in order, without the skipped ones.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/framing.hpp"
#include "protocol/message_reader.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using pgtether::fuzz::require;
using namespace pgtether::protocol;
using Step = MessageReader::Step;

namespace {

constexpr std::array<std::uint32_t, 8> kLimits = {0, 3, 4, 5, 8, 1024, 1u << 30, 0xFFFFFFFFu};
constexpr std::array<std::size_t, 8> kPieces = {1, 2, 3, 5, 7, 16, 64, 4096};

struct Read {
    std::vector<std::pair<char, std::size_t>> headers;  // type and total of each message begun
    std::string passed;                                 // bytes forwarded, in order
    bool invalid = false;
};

bool inside(ByteSpan part, ByteSpan whole) {
    return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Reads `stream` in pieces of `piece` bytes (the whole of it at once when piece is 0).
Read read(ByteSpan stream, std::size_t piece, std::uint32_t limit, char streamed, bool skip) {
    Read out;
    MessageReader reader;
    std::string pending;
    const std::size_t step_size = piece == 0 ? stream.size() : piece;
    for (std::size_t at = 0; at < stream.size() && !out.invalid; at += step_size) {
        const std::size_t n = std::min(step_size, stream.size() - at);
        pending.append(reinterpret_cast<const char*>(stream.data() + at), n);
        const ByteSpan data = as_bytes(pending);
        std::size_t consumed = 0;
        while (consumed < data.size()) {
            const ByteSpan rest = data.subspan(consumed);
            const std::size_t remaining = reader.remaining();
            const MessageReader::Next next = reader.next(rest, limit);
            if (next.step == Step::Forward || next.step == Step::Skip) {
                require(next.step == (skip ? Step::Skip : Step::Forward),
                        "remainder kept its kind");
                require(!next.bytes.empty() && next.bytes.size() <= remaining,
                        "a remainder step is within the remainder");
                require(next.bytes.data() == rest.data(), "a remainder starts the input");
                require(reader.remaining() == remaining - next.bytes.size(), "counted off");
                if (next.step == Step::Forward) out.passed += std::string(as_chars(next.bytes));
                consumed += next.bytes.size();
                continue;
            }
            require(remaining == 0, "a header only outside a message");
            if (next.step == Step::Invalid) {
                require(rest.size() >= kTypedHeaderSize, "invalid needs a header");
                require(next.length < 4 || next.length > limit, "invalid length out of bounds");
                out.invalid = true;
                break;
            }
            if (next.step == Step::NeedMore) {
                require(rest.size() < kTypedHeaderSize && next.bytes.size() == rest.size(),
                        "need-more lacks a header");
                break;
            }
            require(next.length >= 4 && next.length <= limit, "length within bounds");
            require(next.total == std::size_t{next.length} + 1, "total counts the type byte");
            require(next.type == static_cast<char>(rest[0]), "type");
            require(inside(next.bytes, rest), "bytes inside the input");
            if (next.step == Step::Partial) {
                require(next.bytes.size() == rest.size() && next.total > rest.size(),
                        "partial is all there is, and less than the message");
                if (next.type != streamed) break;  // fetch: wait for the whole message
                out.headers.emplace_back(next.type, next.total);
                if (skip) {
                    reader.skip_rest(next);
                } else {
                    out.passed += std::string(as_chars(next.bytes));
                    reader.forward_rest(next);
                }
                require(reader.in_message() && reader.forwarding() == !skip, "remainder begun");
                consumed = data.size();
                break;
            }
            require(next.step == Step::Message, "known step");
            require(next.bytes.size() == next.total && next.bytes.data() == rest.data(),
                    "a message is whole, at the start");
            require(next.body().size() == next.total - kTypedHeaderSize, "body after the header");
            out.headers.emplace_back(next.type, next.total);
            if (next.type != streamed || !skip) out.passed += std::string(as_chars(next.bytes));
            consumed += next.total;
        }
        pending.erase(0, consumed);
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint32_t limit = kLimits[data[0] % kLimits.size()];
    const std::size_t piece = kPieces[(data[0] >> 3) % kPieces.size()];
    const bool skip = (data[0] & 0x40) != 0;
    const char streamed = (data[0] & 0x80) != 0 ? 'd' : 'D';
    const ByteSpan stream(data + 1, size - 1);

    const Read whole = read(stream, 0, limit, streamed, skip);
    const Read pieces = read(stream, piece, limit, streamed, skip);
    require(pieces.invalid == whole.invalid, "pieces end invalid exactly when the whole does");
    require(pieces.headers == whole.headers, "pieces see the same headers");
    require(pieces.passed == whole.passed, "pieces pass on the same bytes");
    return 0;
}
