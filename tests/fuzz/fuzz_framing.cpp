// Fuzzes message framing (protocol/framing.hpp) the way a connection uses it: an optional
// start-up packet, then typed messages one after another, each framed from the start of the bytes
// that are left. The first input byte picks the length limit and whether a start-up packet comes
// first; the rest is the stream. Checked for every frame:
//  * Complete: the header is read, the length is within [minimum, limit], the whole message is in
//    the buffer (its bytes are read, so ASan catches any bound that is off by one), and its
//    shorter prefixes (each one up to the header size, and the longest) are NeedMore, with the
//    header known once the header bytes are there;
//  * NeedMore: either the header is incomplete, or the header is valid and the message longer
//    than the buffer;
//  * Invalid: the header is complete and its length out of bounds.
#include <array>
#include <cstddef>
#include <cstdint>

#include "protocol/framing.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::require;

namespace {

constexpr std::array<std::uint32_t, 8> kLimits = {0, 3, 4, 5, 8, 1024, 1u << 30, 0xFFFFFFFFu};

volatile std::uint8_t sink;

void touch(ByteSpan bytes) {
    std::uint8_t sum = 0;
    for (std::uint8_t b : bytes)
        sum = static_cast<std::uint8_t>(sum + b);
    sink = sum;
}

// Prefixes of a complete message: every length up to the header and the longest proper one (not
// all of them, so a run stays linear in the input size).
void check_prefixes(ByteSpan message, std::size_t header_size,
                    Frame (*frame)(ByteSpan, std::uint32_t), std::uint32_t limit) {
    const auto check = [&](std::size_t len) {
        const Frame f = frame(message.first(len), limit);
        require(f.status == FrameStatus::NeedMore, "a proper prefix needs more");
        require(f.has_header() == (len >= header_size), "header known exactly when present");
    };
    for (std::size_t len = 0; len <= header_size && len < message.size(); ++len)
        check(len);
    check(message.size() - 1);
}

Frame typed(ByteSpan buffer, std::uint32_t limit) {
    return frame_message(buffer, limit);
}
Frame startup(ByteSpan buffer, std::uint32_t /*limit*/) {
    return frame_startup_packet(buffer);
}

// Frames one message at the start of `rest`; returns its size if complete, 0 otherwise.
std::size_t check_frame(ByteSpan rest, std::size_t header_size, std::uint32_t minimum,
                        std::uint32_t limit, Frame (*frame)(ByteSpan, std::uint32_t)) {
    const Frame f = frame(rest, limit);
    switch (f.status) {
        case FrameStatus::Complete: {
            require(f.has_header(), "complete has a header");
            require(f.length >= minimum && f.length <= limit, "complete length within bounds");
            require(f.total == f.length + (header_size - 4), "total counts the type byte");
            require(f.total <= rest.size(), "complete message is in the buffer");
            if (header_size == kTypedHeaderSize)
                require(f.type == static_cast<char>(rest[0]), "type");
            touch(rest.first(f.total));
            check_prefixes(rest.first(f.total), header_size, frame, limit);
            return f.total;
        }
        case FrameStatus::NeedMore:
            if (rest.size() < header_size) {
                require(!f.has_header(), "short buffer has no header");
            } else {
                require(f.has_header() && f.length >= minimum && f.length <= limit,
                        "need-more header is valid");
                require(f.total > rest.size(), "need-more message is longer than the buffer");
            }
            return 0;
        case FrameStatus::Invalid:
            require(rest.size() >= header_size, "invalid needs a complete header");
            require(f.length < minimum || f.length > limit, "invalid length is out of bounds");
            return 0;
    }
    require(false, "unknown frame status");
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint32_t limit = kLimits[data[0] % kLimits.size()];
    const bool startup_first = (data[0] & 0x80) != 0;
    ByteSpan rest(data + 1, size - 1);

    if (startup_first) {
        const std::size_t used =
            check_frame(rest, kStartupHeaderSize, 8,
                        kMaxStartupPacketLength + static_cast<std::uint32_t>(kStartupHeaderSize),
                        startup);
        if (used == 0) return 0;
        rest = rest.subspan(used);
    }
    while (!rest.empty()) {
        const std::size_t used = check_frame(rest, kTypedHeaderSize, 4, limit, typed);
        if (used == 0) break;
        rest = rest.subspan(used);
    }
    return 0;
}
