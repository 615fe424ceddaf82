// Fuzzes the start-up packet reader (protocol/startup.hpp, protocol §55.7 StartupMessage,
// SSLRequest, GSSENCRequest, CancelRequest) and what pgtether reads from a StartupMessage next:
// the `options` parameter (parse_startup_options, core/session_settings.hpp).
//
// The input is the packet after its length word; the target prepends the length, as
// frame_startup_packet would have checked it. Checked:
//  * a result is a packet or an error message, never both or neither;
//  * what the reader accepted is what the builders write: a v3.0 StartupMessage rebuilt from its
//    parameters is the input byte for byte but the last (PostgreSQL accepts one stray byte in
//    place of the final terminator, and so does pgtether), a CancelRequest rebuilt from its key
//    is the input; SSLRequest and GSSENCRequest may carry ignored bytes, as in PostgreSQL;
//  * a 3.x StartupMessage has no empty parameter name and no NUL inside a name or value;
//  * other kinds carry no parameters.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "protocol/bytes.hpp"
#include "protocol/startup.hpp"
#include "core/session_settings.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string packet(4, '\0');
    store_u32(reinterpret_cast<std::uint8_t*>(packet.data()), static_cast<std::uint32_t>(size + 4));
    packet.append(as_text(data, size));

    const StartupParseResult result = parse_startup_packet(as_bytes(packet));
    require(result.packet.has_value() == result.error.empty(), "a packet or an error");
    if (!result.packet) return 0;
    const StartupPacket& p = *result.packet;

    switch (p.kind) {
        case StartupKind::Startup: {
            require((p.code >> 16) == 3, "a StartupMessage is protocol 3.x");
            for (const auto& [name, value] : p.parameters) {
                require(!name.empty(), "no empty parameter name");
                require(name.find('\0') == std::string::npos &&
                            value.find('\0') == std::string::npos,
                        "no NUL inside a parameter");
                require(p.find(name) != nullptr, "find() finds every parameter");
            }
            if (p.code == kProtocolVersion3) {
                const std::string rebuilt = build_startup_message(p.parameters);
                require(rebuilt.size() == packet.size() &&
                            rebuilt.compare(0, rebuilt.size() - 1, packet, 0,
                                            packet.size() - 1) == 0,
                        "a v3.0 StartupMessage round-trips (but for a stray last byte)");
            }
            if (const std::string* options = p.find("options")) {
                (void)pgtether::parse_startup_options(*options);
            }
            break;
        }
        case StartupKind::CancelRequest:
            require(p.code == kCancelRequestCode && p.parameters.empty(), "cancel request");
            require(build_cancel_request(p.cancel_key) == packet, "a CancelRequest round-trips");
            break;
        case StartupKind::SslRequest:
            require(p.code == kSslRequestCode && p.parameters.empty(), "SSLRequest");
            if (size == 4) require(build_ssl_request() == packet, "an SSLRequest round-trips");
            break;
        case StartupKind::GssEncRequest:
            require(p.code == kGssEncRequestCode && p.parameters.empty(), "GSSENCRequest");
            break;
        case StartupKind::UnsupportedVersion:
            require((p.code >> 16) != 3 && p.parameters.empty(), "another protocol version");
            break;
    }
    return 0;
}
