#include "core/hba.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "core/config.hpp"
#include "core/file_text.hpp"
#include "core/hba_tokens.hpp"
#include "core/ident_map.hpp"

namespace pgtether {

const char* to_string(HbaMethod method) {
    switch (method) {
        case HbaMethod::Trust:
            return "trust";
        case HbaMethod::Reject:
            return "reject";
        case HbaMethod::Md5:
            return "md5";
        case HbaMethod::Password:
            return "password";
        case HbaMethod::ScramSha256:
            return "scram-sha-256";
        case HbaMethod::Cert:
            return "cert";
        case HbaMethod::Peer:
            return "peer";
        case HbaMethod::Ldap:
            return "ldap";
    }
    return "?";
}

namespace {

// @file references may nest; a file that names itself must not recurse forever.
constexpr int kMaxIncludeDepth = 10;
// Nor may a few small files that each name the next one several times take forever to read: nine
// files naming the next eight times are 8^9 reads. The whole HBA file may read this many @files.
constexpr int kMaxIncludes = 1000;

std::string directory_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return "";
    return path.substr(0, slash + 1);
}

class Parser {
  public:
    Parser(const HbaFileReader& reader) : reader_(reader) {}

    void names(const std::vector<HbaToken>& tokens, bool database_field, HbaNames& out,
               const std::string& file, int line_no, int depth) {
        for (const auto& token : tokens) {
            const std::string& t = token.text;
            if (!token.quoted) {
                if (t == "all") {
                    out.all = true;
                    continue;
                }
                if (database_field && t == "sameuser") {
                    out.sameuser = true;
                    continue;
                }
                // `replication` matches only physical replication connections (PgBouncer 1.23;
                // `all` does not match them), never a database named so.
                if (database_field && t == "replication") {
                    out.replication = true;
                    continue;
                }
                if (database_field && (t == "samerole" || t == "samegroup")) {
                    throw ConfigError(file, line_no, "",
                                      "\"" + t + "\" is not supported (as in PgBouncer)");
                }
                if (!t.empty() && t[0] == '+') {
                    throw ConfigError(
                        file, line_no, "",
                        "group membership (\"" + t + "\") is not supported (as in PgBouncer)");
                }
                if (!t.empty() && t[0] == '@') {
                    include(t.substr(1), database_field, out, file, line_no, depth);
                    continue;
                }
            }
            if (t.empty()) throw ConfigError(file, line_no, "", "empty name");
            out.names.insert(t);
        }
    }

  private:
    void include(const std::string& name, bool database_field, HbaNames& out,
                 const std::string& file, int line_no, int depth) {
        if (name.empty()) throw ConfigError(file, line_no, "", "@ without a file name");
        if (depth >= kMaxIncludeDepth) {
            throw ConfigError(file, line_no, "", "@" + name + ": nested too deeply");
        }
        if (++includes_ > kMaxIncludes) {
            throw ConfigError(file, line_no, "",
                              "@" + name + ": more than " + std::to_string(kMaxIncludes) +
                                  " @file references in all (counting each time a file is read)");
        }
        std::string path = name[0] == '/' ? name : directory_of(file) + name;
        auto text = reader_(path);
        if (!text) throw ConfigError(file, line_no, "", "cannot read @" + name + " (" + path + ")");
        // The file lists names separated by whitespace, commas or line breaks; # comments.
        for_each_line(*text, [&](std::string_view line, int inner_line) {
            for (const auto& field : split_hba_line(line, path, inner_line)) {
                names(field, database_field, out, path, inner_line, depth + 1);
            }
        });
    }

    const HbaFileReader& reader_;
    int includes_ = 0;  // @files read so far
};

bool parse_address(const std::string& text, HbaRule& rule) {
    if (inet_pton(AF_INET, text.c_str(), rule.address.data()) == 1) {
        rule.family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, text.c_str(), rule.address.data()) == 1) {
        rule.family = AF_INET6;
        return true;
    }
    return false;
}

bool parse_prefix_length(const std::string& text, HbaRule& rule) {
    if (text.empty() || text.size() > 3) return false;
    int bits = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
        bits = bits * 10 + (c - '0');
    }
    if (bits > (rule.family == AF_INET ? 32 : 128)) return false;
    for (int i = 0; i < bits; ++i) {
        rule.mask[static_cast<std::size_t>(i / 8)] |= static_cast<std::uint8_t>(0x80 >> (i % 8));
    }
    return true;
}

HbaRule::Type rule_type(const std::string& word, const std::string& file, int line_no) {
    if (word == "local") return HbaRule::Type::Local;
    if (word == "host") return HbaRule::Type::Host;
    if (word == "hostssl") return HbaRule::Type::HostSsl;
    if (word == "hostnossl") return HbaRule::Type::HostNoSsl;
    if (word == "hostgssenc" || word == "hostnogssenc") {
        throw ConfigError(file, line_no, "", "connection type \"" + word + "\" is not supported");
    }
    throw ConfigError(
        file, line_no, "",
        "invalid connection type \"" + word + "\" (expected local, host, hostssl or hostnossl)");
}

HbaMethod method_of(const std::string& word, const std::string& file, int line_no) {
    if (word == "trust") return HbaMethod::Trust;
    if (word == "reject") return HbaMethod::Reject;
    if (word == "md5") return HbaMethod::Md5;
    if (word == "password") return HbaMethod::Password;
    if (word == "scram-sha-256") return HbaMethod::ScramSha256;
    if (word == "cert") return HbaMethod::Cert;
    if (word == "peer") return HbaMethod::Peer;
    if (word == "ldap") return HbaMethod::Ldap;
    throw ConfigError(file, line_no, "",
                      "authentication method \"" + word +
                          "\" is not supported (expected trust, reject, md5, password, "
                          "scram-sha-256, cert, peer or ldap)");
}

// An ldap line's options as key/value pairs: `key=value` tokens, where a quoted value is a token
// of its own after `key=` (the tokenizer ends a word at a quote), and a comma list holds several.
std::vector<std::pair<std::string, std::string>> ldap_option_pairs(
    const std::vector<std::vector<HbaToken>>& fields, std::size_t from, const std::string& file,
    int line_no) {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::size_t f = from; f < fields.size(); ++f) {
        for (const HbaToken& token : fields[f]) {
            const auto equals = token.text.find('=');
            if (token.quoted || equals == std::string::npos) {
                throw ConfigError(file, line_no, "",
                                  "LDAP option \"" + token.text + "\" is not key=value");
            }
            std::string key = token.text.substr(0, equals);
            std::string value = token.text.substr(equals + 1);
            const bool quoted_value_follows = value.empty() && !token.comma_after &&
                                              f + 1 < fields.size() && fields[f + 1].size() == 1 &&
                                              fields[f + 1][0].quoted;
            if (quoted_value_follows) value = fields[++f][0].text;
            pairs.emplace_back(std::move(key), std::move(value));
            if (quoted_value_follows) break;
        }
    }
    return pairs;
}

bool names_match(const HbaNames& names, std::string_view name, std::string_view user) {
    if (names.all) return true;
    if (names.sameuser && name == user) return true;
    return names.names.count(std::string(name)) > 0;
}

bool address_matches(const HbaRule& rule, const sockaddr* address) {
    if (!address) return false;
    const std::uint8_t* bytes = nullptr;
    in_addr mapped{};
    int family = address->sa_family;
    if (family == AF_INET) {
        bytes = reinterpret_cast<const std::uint8_t*>(
            &reinterpret_cast<const sockaddr_in*>(address)->sin_addr);
    } else if (family == AF_INET6) {
        const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6) && rule.family == AF_INET) {
            // An IPv4 client on a dual-stack socket (::ffff:a.b.c.d) matches IPv4 rules.
            std::memcpy(&mapped, a6->s6_addr + 12, 4);
            bytes = reinterpret_cast<const std::uint8_t*>(&mapped);
            family = AF_INET;
        } else {
            bytes = a6->s6_addr;
        }
    } else {
        return false;
    }
    if (family != rule.family) return false;
    std::size_t len = family == AF_INET ? 4 : 16;
    for (std::size_t i = 0; i < len; ++i) {
        if ((bytes[i] & rule.mask[i]) != rule.address[i]) return false;
    }
    return true;
}

}  // namespace

HbaRules parse_hba(std::string_view text, const std::string& file_name,
                   const HbaFileReader& read_file, const IdentMaps* ident_maps) {
    HbaRules result;
    result.file = file_name;
    Parser parser(read_file);
    for_each_line(text, [&](std::string_view line, int line_no) {
        auto fields = split_hba_line(line, file_name, line_no);
        if (fields.empty()) return;
        auto single = [&](std::size_t i, const char* what) -> const HbaToken& {
            if (i >= fields.size()) {
                throw ConfigError(file_name, line_no, "", std::string("missing ") + what);
            }
            if (fields[i].size() != 1) {
                throw ConfigError(file_name, line_no, "",
                                  std::string("a list is not allowed as ") + what);
            }
            return fields[i][0];
        };
        HbaRule rule;
        rule.file = file_name;
        rule.line = line_no;
        rule.type = rule_type(single(0, "connection type").text, file_name, line_no);
        if (fields.size() < 2) throw ConfigError(file_name, line_no, "", "missing database");
        if (fields.size() < 3) throw ConfigError(file_name, line_no, "", "missing user name");
        parser.names(fields[1], true, rule.databases, file_name, line_no, 0);
        parser.names(fields[2], false, rule.users, file_name, line_no, 0);
        std::size_t next = 3;
        if (rule.type != HbaRule::Type::Local && !single(next, "address").quoted &&
            fields[next][0].text == "all") {
            rule.any_address = true;  // PgBouncer 1.23+, PostgreSQL: any IPv4 or IPv6 address
            ++next;
        } else if (rule.type != HbaRule::Type::Local) {
            const HbaToken& addr = single(next++, "address");
            std::string address = addr.text;
            std::string prefix;
            bool has_prefix = false;
            if (auto slash = address.find('/'); slash != std::string::npos) {
                prefix = address.substr(slash + 1);
                address = address.substr(0, slash);
                has_prefix = true;
            }
            if (!parse_address(address, rule)) {
                throw ConfigError(file_name, line_no, "",
                                  "invalid IP address \"" + addr.text +
                                      "\" (host names, samehost and samenet are not "
                                      "supported)");
            }
            if (has_prefix) {
                if (!parse_prefix_length(prefix, rule)) {
                    throw ConfigError(file_name, line_no, "",
                                      "invalid CIDR mask in \"" + addr.text + "\"");
                }
            } else {
                const HbaToken& mask = single(next++, "netmask (or write the address as CIDR)");
                if (inet_pton(rule.family, mask.text.c_str(), rule.mask.data()) != 1) {
                    throw ConfigError(file_name, line_no, "",
                                      "invalid netmask \"" + mask.text + "\"");
                }
            }
            std::size_t len = rule.family == AF_INET ? 4 : 16;
            for (std::size_t i = 0; i < len; ++i) {
                if (rule.address[i] & ~rule.mask[i]) {
                    // As PgBouncer: kept, with a warning, and never matched (the masked client
                    // address cannot equal it).
                    char address_text[INET6_ADDRSTRLEN] = {};
                    char mask_text[INET6_ADDRSTRLEN] = {};
                    inet_ntop(rule.family, rule.address.data(), address_text, sizeof address_text);
                    inet_ntop(rule.family, rule.mask.data(), mask_text, sizeof mask_text);
                    result.warnings.push_back("address does not match mask in " + file_name +
                                           " line #" + std::to_string(line_no) + ": " +
                                           address_text + " / " + mask_text);
                    break;
                }
            }
        }
        rule.method = method_of(single(next++, "authentication method").text, file_name, line_no);
        if (rule.method == HbaMethod::Ldap) {
            auto options = ldap_options_from(ldap_option_pairs(fields, next, file_name, line_no));
            if (auto* error = std::get_if<std::string>(&options)) {
                throw ConfigError(file_name, line_no, "", *error);
            }
            rule.ldap = std::get<LdapOptions>(std::move(options));
            next = fields.size();
        }
        if (next + 1 < fields.size()) {
            throw ConfigError(file_name, line_no, "",
                              "unexpected \"" + fields[next + 1][0].text +
                                  "\" after the authentication options");
        }
        if (next < fields.size()) {
            const std::string& option = single(next++, "authentication option").text;
            if (option.rfind("map=", 0) != 0) {
                throw ConfigError(file_name, line_no, "",
                                  "authentication options such as \"" + option +
                                      "\" are not supported (map= is, with peer and cert)");
            }
            rule.ident_map = option.substr(4);
            if (rule.method != HbaMethod::Peer && rule.method != HbaMethod::Cert) {
                throw ConfigError(file_name, line_no, "",
                                  "map= applies to peer and cert authentication only");
            }
            if (rule.ident_map.empty()) {
                throw ConfigError(file_name, line_no, "", "map= without a map name");
            }
            if (!ident_maps) {
                throw ConfigError(file_name, line_no, "",
                                  "map=" + rule.ident_map + " needs auth_ident_file");
            }
            if (ident_maps->maps.find(rule.ident_map) == ident_maps->maps.end()) {
                throw ConfigError(file_name, line_no, "",
                                  "ident map \"" + rule.ident_map + "\" is not in " +
                                      ident_maps->file);
            }
        }
        if (rule.method == HbaMethod::Peer && rule.type != HbaRule::Type::Local) {
            throw ConfigError(file_name, line_no, "",
                              "peer authentication is only supported on local sockets");
        }
        // PgBouncer takes cert on host lines too (its own test vectors have one): a client
        // without TLS that matches such a line has no certificate and is refused.
        if (rule.method == HbaMethod::Cert && rule.type != HbaRule::Type::HostSsl &&
            rule.type != HbaRule::Type::Host) {
            throw ConfigError(file_name, line_no, "",
                              "cert authentication is only supported on host and hostssl "
                              "connections");
        }
        result.rules.push_back(std::move(rule));
    });
    return result;
}

HbaRules load_hba_file(const std::string& path, const IdentMaps* ident_maps) {
    std::string error;
    auto text = read_file_text(path, &error);
    if (!text) throw ConfigError(path, 0, "", "cannot read HBA file: " + error);
    return parse_hba(
        *text, path, [](const std::string& included) { return read_file_text(included); },
        ident_maps);
}

const HbaRule* match_hba(const HbaRules& rules, const HbaClient& client) {
    for (const auto& rule : rules.rules) {
        switch (rule.type) {
            case HbaRule::Type::Local:
                if (!client.unix_socket) continue;
                break;
            case HbaRule::Type::Host:
            case HbaRule::Type::HostSsl:
            case HbaRule::Type::HostNoSsl:
                if (client.unix_socket) continue;
                if (rule.type == HbaRule::Type::HostSsl && !client.tls) continue;
                if (rule.type == HbaRule::Type::HostNoSsl && client.tls) continue;
                if (!rule.any_address && !address_matches(rule, client.address)) continue;
                break;
        }
        if (client.replication == ReplicationMode::Physical) {
            if (!rule.databases.replication) continue;
        } else if (!names_match(rule.databases, client.database, client.user)) {
            continue;
        }
        if (!names_match(rule.users, client.user, client.user)) continue;
        return &rule;
    }
    return nullptr;
}

}  // namespace pgtether
