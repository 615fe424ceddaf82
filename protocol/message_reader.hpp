// Reading one direction of a connection message by message, in PgBouncer's sbuf model: the header
// of each message is examined first, then its body is forwarded whole, skipped, or fetched (kept
// in the receive buffer until it is whole) for inspection (protocol §55.7 "Message Formats").
//
// The reader owns what outlives one read: the rest of a message whose first part was already
// forwarded (a large DataRow or CopyData streamed as it arrives) or skipped (a departed client's
// results). It never copies or allocates: every step points into the bytes it was given, so
// forwarded bodies leave straight from the receive buffer (the proxy batches them). Every length
// it reads is bounded by the caller's limit (max_packet_size, or a fixed limit for login and
// pgtether's own queries): a longer one is Invalid, never waited for.
//
// Pure: no I/O, no libuv; tests/unit/test_message_reader.cpp drives it table by table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/bytes.hpp"
#include "protocol/framing.hpp"

namespace pgtether::protocol {

class MessageReader {
  public:
    enum class Step : std::uint8_t {
        Forward,   // bytes of a message whose first part was forwarded: pass them on
        Skip,      // bytes of a message whose first part was skipped: drop them
        Message,   // a whole message (fetched): inspect it, then forward or drop `bytes`
        Partial,   // a header whose body has not all arrived: forward_rest(), skip_rest(), or
                   // consume nothing and wait for the whole message (fetch)
        NeedMore,  // not even a whole header yet
        Invalid,   // the length field is below 4 or above the limit: the stream is unusable
    };

    struct Next {
        Step step = Step::NeedMore;
        char type = 0;             // Message, Partial, Invalid
        std::uint32_t length = 0;  // the length field, once a header was read
        std::size_t total = 0;     // Message, Partial: bytes the whole message occupies
        // Forward, Skip: the remainder's bytes at the start of the data (already consumed by the
        // reader: the caller advances past them); Message: the whole message, header included;
        // Partial: what has arrived of it; NeedMore: what has arrived of the header.
        ByteSpan bytes;

        // Message only: the body after type byte and length.
        [[nodiscard]] ByteSpan body() const { return bytes.subspan(kTypedHeaderSize); }
    };

    // What the start of `data` is. A Forward or Skip step counts its bytes off the remainder;
    // for every other step the caller decides how much to consume.
    [[nodiscard]] Next next(ByteSpan data, std::uint32_t max_length) {
        if (remaining_ > 0) {
            const std::size_t n = remaining_ < data.size() ? remaining_ : data.size();
            remaining_ -= n;
            return {skipping_ ? Step::Skip : Step::Forward, 0, 0, 0, data.first(n)};
        }
        return examine(data, max_length);
    }

    // The next message at the start of `data`, without a remainder (login, pgtether's own
    // queries, the admin console: nothing there is streamed).
    [[nodiscard]] static Next examine(ByteSpan data, std::uint32_t max_length) {
        const Frame frame = frame_message(data, max_length);
        Next next;
        next.type = frame.type;
        next.length = frame.length;
        next.total = frame.total;
        switch (frame.status) {
            case FrameStatus::Complete:
                next.step = Step::Message;
                next.bytes = data.first(frame.total);
                return next;
            case FrameStatus::Invalid:
                next.step = Step::Invalid;
                next.total = 0;
                return next;
            case FrameStatus::NeedMore:
                next.step = frame.has_header() ? Step::Partial : Step::NeedMore;
                next.bytes = data;
                return next;
        }
        return next;
    }

    // After Partial: the caller forwards `partial.bytes` now; the rest of the message comes as
    // Forward steps.
    void forward_rest(const Next& partial) { start_remainder(partial, false); }
    // After Partial: the caller drops `partial.bytes`; the rest comes as Skip steps.
    void skip_rest(const Next& partial) { start_remainder(partial, true); }
    // The rest of a message being forwarded has nobody to go to any more: skip it instead.
    void skip_remainder() { skipping_ = true; }
    // Forgets the remainder: the connection starts over (a client handed to a new server).
    void reset() {
        remaining_ = 0;
        skipping_ = false;
    }

    // Inside a message: the next bytes are its rest, not a header.
    [[nodiscard]] bool in_message() const { return remaining_ > 0; }
    // Inside a message being forwarded: its peer would read whatever comes next as its rest.
    [[nodiscard]] bool forwarding() const { return remaining_ > 0 && !skipping_; }
    [[nodiscard]] std::size_t remaining() const { return remaining_; }

  private:
    void start_remainder(const Next& partial, bool skip) {
        remaining_ = partial.total - partial.bytes.size();
        skipping_ = skip;
    }

    std::size_t remaining_ = 0;  // bytes of the current message not yet seen
    bool skipping_ = false;      // they are dropped, not forwarded
};

// What read_messages() did.
struct MessagesRead {
    std::size_t consumed = 0;
    bool invalid = false;      // stopped at an Invalid header
    std::uint32_t length = 0;  // its length field (for the error: too large, or too small)
};

// Hands each whole message at the start of `data` to `on_message(const MessageReader::Next&)`
// (the message already counted as consumed), which returns false to stop. Stops before an
// unfinished message (it stays in the stream's buffer until whole: fetch) or at an invalid
// header. For the readers that forward nothing: login, pgtether's own queries, idle servers, the
// admin console.
template <typename OnMessage>
[[nodiscard]] MessagesRead read_messages(ByteSpan data, std::uint32_t max_length,
                                         OnMessage&& on_message) {
    MessagesRead read;
    while (read.consumed < data.size()) {
        const MessageReader::Next next =
            MessageReader::examine(data.subspan(read.consumed), max_length);
        if (next.step == MessageReader::Step::Invalid) {
            read.invalid = true;
            read.length = next.length;
            break;
        }
        if (next.step != MessageReader::Step::Message) break;
        read.consumed += next.total;
        if (!on_message(next)) break;
    }
    return read;
}

}  // namespace pgtether::protocol
