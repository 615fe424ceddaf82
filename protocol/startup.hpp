// Start-up phase packets (protocol §55.2.1 "Start-up", §55.7 StartupMessage, SSLRequest,
// GSSENCRequest, CancelRequest). They have no type byte; the Int32 after the length tells them apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/bytes.hpp"

namespace pgtether::protocol {

inline constexpr std::uint32_t kProtocolVersion3 = 196608;  // 3 << 16
inline constexpr std::uint32_t kCancelRequestCode = 80877102;
inline constexpr std::uint32_t kSslRequestCode = 80877103;
inline constexpr std::uint32_t kGssEncRequestCode = 80877104;

enum class StartupKind {
    Startup,             // protocol 3.x StartupMessage with parameters
    SslRequest,
    GssEncRequest,
    CancelRequest,
    UnsupportedVersion,  // a StartupMessage for another major version (2.0 and older)
};

struct CancelKey {
    std::int32_t pid = 0;
    std::int32_t secret = 0;
    bool operator==(const CancelKey&) const = default;
};

struct StartupPacket {
    StartupKind kind = StartupKind::Startup;
    std::uint32_t code = 0;  // the protocol version or request code as sent
    std::vector<std::pair<std::string, std::string>> parameters;
    CancelKey cancel_key;

    // The value of a parameter, or nullptr.
    const std::string* find(std::string_view name) const;
};

struct StartupParseResult {
    std::optional<StartupPacket> packet;
    std::string error;  // set when packet is empty: why the packet is malformed
    // Whether PostgreSQL tells the client (FATAL) or only logs the error and closes the
    // connection without a word (COMMERROR in ProcessStartupPacket, postmaster.c).
    bool tell_client = true;
};

// Parses a whole start-up packet (including its length word), as framed by frame_startup_packet.
[[nodiscard]] StartupParseResult parse_startup_packet(ByteSpan packet);

// PostgreSQL's answer to a start-up code it does not know, which it takes for a protocol
// version: "unsupported frontend protocol 1234.5679: server supports 3.0 to 3.0" (0A000).
std::string unsupported_protocol_message(std::uint32_t code);

// Builders for the packets pgtether sends to servers.
std::string build_startup_message(const std::vector<std::pair<std::string, std::string>>& params);
std::string build_cancel_request(CancelKey key);
std::string build_ssl_request();

}  // namespace pgtether::protocol
