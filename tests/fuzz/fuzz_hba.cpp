// Fuzzes the auth_hba_file reader and matcher (core/hba.hpp) and the auth_ident_file reader
// (core/ident_map.hpp).
//
// Input: the HBA file, then NUL-separated texts of @files: `@1` names the first one, `@2` the
// second, ... (any other @file cannot be read). The first @file's text is also read as the
// ident map file, and the HBA file is read with its maps when it reads. A ConfigError is the
// expected answer to a bad file; any other exception, a crash or a hang is a bug. Checked for an
// ident map file that reads: each line of a map lets its system user log in as its database
// user. Checked for an HBA file that reads:
//  * each rule comes from a line of the file (a rule from an @file still carries its HBA line);
//  * a host rule whose address has bits outside its mask (kept, as PgBouncer keeps it, never
//    matching) comes with a warning;
//  * a host rule for all databases and users matches a client at its own address (with or
//    without TLS as the rule's type wants), at that rule or an earlier one;
//  * a local rule for all databases and users matches a Unix-socket client;
//  * match_hba returns a rule of the file or none;
//  * a rule's map= names a map of the ident map file.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"
#include "core/hba.hpp"
#include "core/ident_map.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;
using pgtether::fuzz::split;

namespace {

constexpr const char* kFile = "/fuzz/pg_hba.conf";

bool is_rule_of(const HbaRules& rules, const HbaRule* rule) {
    return rule == nullptr ||
           (rule >= rules.rules.data() && rule < rules.rules.data() + rules.rules.size());
}

void check_match_at_own_address(const HbaRules& rules, const HbaRule& rule) {
    sockaddr_in v4{};
    sockaddr_in6 v6{};
    const sockaddr* address = nullptr;
    if (rule.family == AF_INET) {
        v4.sin_family = AF_INET;
        std::memcpy(&v4.sin_addr, rule.address.data(), 4);
        address = reinterpret_cast<const sockaddr*>(&v4);
    } else {
        v6.sin6_family = AF_INET6;
        std::memcpy(&v6.sin6_addr, rule.address.data(), 16);
        address = reinterpret_cast<const sockaddr*>(&v6);
    }
    HbaClient client;
    client.tls = rule.type == HbaRule::Type::HostSsl;
    client.address = address;
    client.database = "db";
    client.user = "user";
    const HbaRule* found = match_hba(rules, client);
    require(found != nullptr && found <= &rule, "a host rule for all matches its own address");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = split(as_text(data, size), '\0', 10);
    const auto reader = [&](const std::string& path) -> std::optional<std::string> {
        const std::string prefix = "/fuzz/";
        if (path.size() != prefix.size() + 1 || !path.starts_with(prefix)) return std::nullopt;
        const char digit = path.back();
        if (digit < '1' || digit > '9') return std::nullopt;
        const auto index = static_cast<std::size_t>(digit - '0');
        if (index >= parts.size()) return std::nullopt;
        return std::string(parts[index]);
    };

    std::optional<IdentMaps> maps;
    if (parts.size() > 1) {
        try {
            maps = parse_ident_maps(parts[1], "/fuzz/pg_ident.conf");
        } catch (const ConfigError&) {
        }
    }
    if (maps) {
        for (const auto& [name, lines] : maps->maps) {
            for (const IdentMapping& line : lines) {
                require(external_name_allows(&*maps, name, line.system_user,
                                             line.any_database_user ? "anyone"
                                                                    : line.database_user),
                        "a map's line lets its system user in as its database user");
            }
        }
    }

    HbaRules rules;
    try {
        rules = parse_hba(parts[0], kFile, reader, maps ? &*maps : nullptr);
    } catch (const ConfigError&) {
        return 0;
    }
    std::size_t lines = 1;
    for (char c : parts[0])
        lines += c == '\n' ? 1 : 0;

    for (const HbaRule& rule : rules.rules) {
        require(rule.file == kFile && rule.line >= 1 && static_cast<std::size_t>(rule.line) <= lines,
                "a rule comes from a line of the file");
        (void)to_string(rule.method);
        if (!rule.ident_map.empty()) {
            require(maps && maps->maps.count(rule.ident_map) == 1, "map= names a map of the file");
        }
        const bool for_all = rule.databases.all && rule.users.all;
        if (rule.type == HbaRule::Type::Local) {
            if (for_all) {
                HbaClient client;
                client.unix_socket = true;
                client.database = "db";
                client.user = "user";
                const HbaRule* found = match_hba(rules, client);
                require(found != nullptr && found <= &rule, "a local rule for all matches");
            }
            continue;
        }
        if (rule.any_address) continue;
        require(rule.family == AF_INET || rule.family == AF_INET6, "a host rule has an address");
        bool host_bits = false;
        for (std::size_t i = 0; i < rule.address.size(); ++i)
            host_bits = host_bits || (rule.address[i] & ~rule.mask[i]) != 0;
        if (host_bits) {
            require(!rules.warnings.empty(), "an address with bits outside its mask is warned");
            continue;  // it matches no client, its own address included
        }
        if (for_all) check_match_at_own_address(rules, rule);
    }

    // A few clients that any fuzzed file may or may not admit.
    sockaddr_in loopback{};
    loopback.sin_family = AF_INET;
    loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (const bool unix_socket : {true, false}) {
        for (const bool tls : {false, true}) {
            HbaClient client;
            client.unix_socket = unix_socket;
            client.tls = tls && !unix_socket;
            client.address = unix_socket ? nullptr : reinterpret_cast<const sockaddr*>(&loopback);
            client.database = parts.size() > 1 ? parts[1] : "postgres";
            client.user = "postgres";
            require(is_rule_of(rules, match_hba(rules, client)), "a match is a rule of the file");
        }
    }
    return 0;
}
