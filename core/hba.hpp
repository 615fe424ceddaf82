// auth_hba_file: PgBouncer's subset of PostgreSQL's pg_hba.conf (pgbouncer.5, "HBA file format";
// PostgreSQL docs §21.1 "The pg_hba.conf File").
//
//   TYPE       DATABASE        USER            ADDRESS                 METHOD
//   local      all             postgres                                peer
//   host       app,reports     @readers.txt    10.0.0.0/8              scram-sha-256
//   hostssl    all             all             192.168.1.0 255.255.255.0  cert
//
// Types: local (Unix socket), host (TCP), hostssl (TCP with TLS), hostnossl (TCP without TLS).
// Database: all, sameuser, names, @file. User: all, names, @file. Names may be double-quoted
// ("all" in quotes is a name). Lists are comma-separated. Address: `all`, or IPv4 or IPv6 with
// /bits or followed by a netmask. Methods: trust, reject, md5, password, scram-sha-256, cert,
// peer; `map=NAME` after peer or cert names a map of auth_ident_file (core/ident_map.hpp).
// The first line whose type, database, user and address match decides; no match means reject.
//
// PgBouncer logs a bad line and skips it; pgtether refuses the whole file naming the line, so a
// typo cannot silently drop a `reject` rule (PostgreSQL refuses such a file too). What PgBouncer
// does not support is refused with a clear message: samerole, samegroup, +group,
// host names, `samehost`/`samenet` as addresses, options other than map=.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/ldap_options.hpp"
#include "core/replication.hpp"

struct sockaddr;

namespace pgtether {

struct IdentMaps;  // core/ident_map.hpp

enum class HbaMethod { Trust, Reject, Md5, Password, ScramSha256, Cert, Peer, Ldap };
const char* to_string(HbaMethod method);

struct HbaNames {
    bool all = false;
    bool sameuser = false;  // database field only: the database named like the user
    // Database field only: `replication`, the one keyword a physical replication connection
    // matches (PgBouncer 1.23, as PostgreSQL); it matches no other connection.
    bool replication = false;
    std::set<std::string> names;
};

struct HbaRule {
    enum class Type { Local, Host, HostSsl, HostNoSsl };
    Type type = Type::Local;
    HbaNames databases;
    HbaNames users;
    bool any_address = false;  // `all`: a host rule for every client address
    int family = 0;            // AF_INET or AF_INET6 for host rules with an address
    std::array<std::uint8_t, 16> address{};
    std::array<std::uint8_t, 16> mask{};
    HbaMethod method = HbaMethod::Reject;
    std::string ident_map;  // map=NAME (peer, cert): empty means system name == user name
    std::optional<LdapOptions> ldap;  // ldap: the line's options (PgBouncer 1.25), checked
    std::string file;  // where the rule was written, for logs
    int line = 0;
};

struct HbaRules {
    std::string file;
    std::vector<HbaRule> rules;
    // Lines kept that can never match, in PgBouncer's words, for the log.
    std::vector<std::string> warnings;
};

// Reads a file named in an @file reference (already resolved to a path); nullopt if unreadable.
using HbaFileReader = std::function<std::optional<std::string>(const std::string& path)>;

// Parses `text`, the contents of `file_name`. @file names are resolved against the directory of
// `file_name` and read with `read_file`. `ident_maps` is auth_ident_file's content (nullptr when
// it is not set): a map= option must name one of its maps. Throws ConfigError ("FILE:LINE:
// message").
HbaRules parse_hba(std::string_view text, const std::string& file_name,
                   const HbaFileReader& read_file, const IdentMaps* ident_maps = nullptr);
// Reads and parses the file (and its @files) from disk.
HbaRules load_hba_file(const std::string& path, const IdentMaps* ident_maps = nullptr);

// What is known about a client when its rule is looked up.
struct HbaClient {
    bool unix_socket = false;
    bool tls = false;
    const sockaddr* address = nullptr;  // the peer, for TCP clients
    std::string_view database;          // as the client asked for it
    std::string_view user;
    // A physical replication connection matches only lines whose database field says
    // `replication`; a logical one (replication=database) matches by its database, as any other.
    ReplicationMode replication = ReplicationMode::None;
};

// The first matching rule, or nullptr (no rule: reject).
[[nodiscard]] const HbaRule* match_hba(const HbaRules& rules, const HbaClient& client);

}  // namespace pgtether
