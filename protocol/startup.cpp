#include "protocol/startup.hpp"

namespace pgtether::protocol {

const std::string* StartupPacket::find(std::string_view name) const {
    for (const auto& [key, value] : parameters) {
        if (key == name) return &value;
    }
    return nullptr;
}

namespace {

StartupParseResult failure(std::string why) { return {std::nullopt, std::move(why), true}; }
// An error PostgreSQL only logs: the client gets nothing, the connection is closed.
StartupParseResult silent_failure(std::string why) {
    return {std::nullopt, std::move(why), false};
}

// StartupMessage parameters: pairs of NUL-terminated strings ended by an empty name, scanned as
// PostgreSQL's ProcessStartupPacket scans them: a NUL is assumed after the packet's last byte,
// and the packet is accepted when the scan stops exactly at its last byte -- the terminator, or
// (a quirk of PostgreSQL's, kept so that the same bytes get the same answer) one stray byte after
// the last value. A name without a value, or anything else out of place, gets this one message.
StartupParseResult parse_parameters(ByteSpan body, StartupPacket packet) {
    const std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
    auto string_at = [&](std::size_t offset) {
        auto end = text.find('\0', offset);
        return text.substr(offset, end == std::string_view::npos ? end : end - offset);
    };
    std::size_t offset = 0;
    while (offset < text.size()) {
        std::string_view name = string_at(offset);
        if (name.empty()) break;  // the terminator
        std::size_t value_offset = offset + name.size() + 1;
        if (value_offset >= text.size()) break;  // no value
        std::string_view value = string_at(value_offset);
        packet.parameters.emplace_back(name, value);
        offset = value_offset + value.size() + 1;
    }
    if (offset + 1 != text.size()) {
        return failure("invalid startup packet layout: expected terminator as last byte");
    }
    return {std::move(packet), {}};
}

}  // namespace

StartupParseResult parse_startup_packet(ByteSpan bytes) {
    ByteReader reader(bytes);
    reader.u32();  // length, already validated by the framer
    StartupPacket packet;
    packet.code = reader.u32();
    if (!reader.ok()) return silent_failure("incomplete startup packet");

    switch (packet.code) {
        case kSslRequestCode:
        case kGssEncRequestCode:
            // PostgreSQL does not check these requests' length: bytes inside a longer declared
            // length are read and ignored.
            packet.kind = packet.code == kSslRequestCode ? StartupKind::SslRequest
                                                         : StartupKind::GssEncRequest;
            return {std::move(packet), {}};
        case kCancelRequestCode:
            packet.kind = StartupKind::CancelRequest;
            packet.cancel_key.pid = reader.i32();
            packet.cancel_key.secret = reader.i32();
            if (!reader.at_end()) return silent_failure("invalid length of cancel request packet");
            return {std::move(packet), {}};
        default:
            break;
    }
    if ((packet.code >> 16) != 3) {
        packet.kind = StartupKind::UnsupportedVersion;
        return {std::move(packet), {}};
    }
    packet.kind = StartupKind::Startup;
    return parse_parameters(reader.rest(), std::move(packet));
}

std::string unsupported_protocol_message(std::uint32_t code) {
    return "unsupported frontend protocol " + std::to_string(code >> 16) + "." +
           std::to_string(code & 0xffff) + ": server supports 3.0 to 3.0";
}

std::string build_startup_message(const std::vector<std::pair<std::string, std::string>>& params) {
    std::string out;
    MessageWriter w(out);
    w.begin_untyped().i32(static_cast<std::int32_t>(kProtocolVersion3));
    for (const auto& [name, value] : params) w.cstring(name).cstring(value);
    w.u8(0).end();
    return out;
}

std::string build_cancel_request(CancelKey key) {
    std::string out;
    MessageWriter w(out);
    w.begin_untyped()
        .i32(static_cast<std::int32_t>(kCancelRequestCode))
        .i32(key.pid)
        .i32(key.secret)
        .end();
    return out;
}

std::string build_ssl_request() {
    std::string out;
    MessageWriter w(out);
    w.begin_untyped().i32(static_cast<std::int32_t>(kSslRequestCode)).end();
    return out;
}

}  // namespace pgtether::protocol
