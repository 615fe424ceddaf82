#include "protocol/startup.hpp"

namespace pgtether::protocol {

const std::string* StartupPacket::find(std::string_view name) const {
    for (const auto& [key, value] : parameters) {
        if (key == name) return &value;
    }
    return nullptr;
}

namespace {

StartupParseResult failure(std::string why) { return {std::nullopt, std::move(why)}; }

// StartupMessage parameters: pairs of NUL-terminated strings ended by an empty name. PostgreSQL
// (ProcessStartupPacket) requires the final terminator and rejects a name without a value.
StartupParseResult parse_parameters(ByteReader& reader, StartupPacket packet) {
    while (true) {
        std::string_view name = reader.cstring();
        if (!reader.ok()) return failure("invalid startup packet layout: expected terminator as last byte");
        if (name.empty()) break;
        std::string_view value = reader.cstring();
        if (!reader.ok()) return failure("invalid startup packet layout: missing value for \"" + std::string(name) + "\"");
        packet.parameters.emplace_back(name, value);
    }
    if (!reader.at_end()) return failure("invalid startup packet layout: expected terminator as last byte");
    return {std::move(packet), {}};
}

}  // namespace

StartupParseResult parse_startup_packet(ByteSpan bytes) {
    ByteReader reader(bytes);
    reader.u32();  // length, already validated by the framer
    StartupPacket packet;
    packet.code = reader.u32();
    if (!reader.ok()) return failure("incomplete startup packet");

    switch (packet.code) {
        case kSslRequestCode:
        case kGssEncRequestCode:
            if (!reader.at_end()) return failure("invalid length of startup packet");
            packet.kind = packet.code == kSslRequestCode ? StartupKind::SslRequest
                                                         : StartupKind::GssEncRequest;
            return {std::move(packet), {}};
        case kCancelRequestCode:
            packet.kind = StartupKind::CancelRequest;
            packet.cancel_key.pid = reader.i32();
            packet.cancel_key.secret = reader.i32();
            if (!reader.at_end()) return failure("invalid length of cancel request packet");
            return {std::move(packet), {}};
        default:
            break;
    }
    if ((packet.code >> 16) != 3) {
        packet.kind = StartupKind::UnsupportedVersion;
        return {std::move(packet), {}};
    }
    packet.kind = StartupKind::Startup;
    return parse_parameters(reader, std::move(packet));
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
