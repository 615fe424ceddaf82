// Message framing for the PostgreSQL wire protocol (protocol §55.7 "Message Formats").
//
// After start-up every message is a type byte followed by an Int32 length that counts itself and
// the body but not the type byte. Start-up packets (StartupMessage, SSLRequest, GSSENCRequest,
// CancelRequest) have no type byte: just the Int32 length and the body.
//
// These functions only look at headers: they never copy or allocate, so the proxy can forward bodies
// straight out of its receive buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/bytes.hpp"

namespace pgtether::protocol {

enum class FrameStatus {
    NeedMore,  // not enough bytes yet to know (header) or to hold the whole message
    Complete,  // the whole message is in the buffer
    Invalid    // the header can never be valid: length below the minimum or above the limit
};

struct Frame {
    FrameStatus status = FrameStatus::NeedMore;
    char type = 0;             // typed messages only
    std::uint32_t length = 0;  // the wire length field (counts itself); 0 until the header is read
    // Bytes the whole message occupies in the stream: length + 1 for typed messages, length for
    // start-up packets. Valid whenever length != 0.
    std::size_t total = 0;

    [[nodiscard]] bool has_header() const { return length != 0; }
};

inline constexpr std::size_t kTypedHeaderSize = 5;    // type byte + Int32 length
inline constexpr std::size_t kStartupHeaderSize = 4;  // Int32 length
// PostgreSQL's own cap on a start-up packet's body, after the length word
// (MAX_STARTUP_PACKET_LENGTH in pqcomm.h): the length field may say up to 10004.
inline constexpr std::uint32_t kMaxStartupPacketLength = 10000;

// Frames a typed message at the start of `buffer`. A length field below 4 or above `max_length` is
// Invalid. NeedMore with has_header() means the header is known and the body is still arriving.
[[nodiscard]] Frame frame_message(ByteSpan buffer, std::uint32_t max_length);

// Frames a start-up packet at the start of `buffer` (length at least 8: length + protocol code,
// at most kMaxStartupPacketLength + 4). Invalid is what PostgreSQL logs as "invalid length of
// startup packet" and answers by closing the connection without a word.
[[nodiscard]] Frame frame_startup_packet(ByteSpan buffer);

}  // namespace pgtether::protocol
