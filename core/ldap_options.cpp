#include "core/ldap_options.hpp"

#include <cctype>
#include <charconv>

namespace pgtether {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// One `key=value`, possibly quoted on either side; false at the end of the text.
struct Pair {
    std::string key;
    std::string value;
};

std::optional<std::string> read_quoted(std::string_view text, std::size_t& at) {
    // at: just after the opening quote. "" stands for one quote.
    std::string out;
    while (at < text.size()) {
        if (text[at] == '"') {
            if (at + 1 < text.size() && text[at + 1] == '"') {
                out += '"';
                at += 2;
                continue;
            }
            ++at;
            return out;
        }
        out += text[at++];
    }
    return std::nullopt;  // unterminated
}

std::variant<std::vector<Pair>, std::string> split_pairs(std::string_view text) {
    std::vector<Pair> pairs;
    std::size_t at = 0;
    auto skip = [&] {
        while (at < text.size() && (is_space(text[at]) || text[at] == ',')) ++at;
    };
    for (skip(); at < text.size(); skip()) {
        Pair pair;
        if (text[at] == '"') {
            ++at;
            auto key = read_quoted(text, at);
            if (!key) return std::string("unterminated quoted key");
            pair.key = *key;
        } else {
            while (at < text.size() && text[at] != '=' && !is_space(text[at])) pair.key += text[at++];
        }
        if (at >= text.size() || text[at] != '=') {
            return "\"" + pair.key + "\" has no value (expected key=value)";
        }
        ++at;
        if (at < text.size() && text[at] == '"') {
            ++at;
            auto value = read_quoted(text, at);
            if (!value) return "unterminated quoted value of \"" + pair.key + "\"";
            pair.value = *value;
        } else {
            while (at < text.size() && !is_space(text[at]) && text[at] != ',') {
                pair.value += text[at++];
            }
        }
        if (pair.key.empty() || pair.value.empty()) {
            return "\"" + pair.key + "=\" has an empty key or value";
        }
        pairs.push_back(std::move(pair));
    }
    return pairs;
}

std::optional<int> parse_port(std::string_view text) {
    int port = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
        return std::nullopt;
    }
    return port;
}

std::optional<std::string> percent_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
            !std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
            return std::nullopt;
        }
        out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
        i += 2;
    }
    return out;
}

// RFC 4516: scheme://[host[:port]]/[dn[?attributes[?scope[?filter[?extensions]]]]].
std::optional<std::string> apply_url(LdapOptions& options, std::string_view url) {
    const auto colon = url.find("://");
    if (colon == std::string_view::npos) return "could not parse LDAP URL \"" + std::string(url) + "\"";
    const std::string scheme(url.substr(0, colon));
    if (scheme != "ldap" && scheme != "ldaps") return "unsupported LDAP URL scheme: " + scheme;
    options.scheme = scheme;
    std::string_view rest = url.substr(colon + 3);
    const auto slash = rest.find('/');
    std::string_view hostport = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (const auto port_at = hostport.rfind(':'); port_at != std::string_view::npos) {
        auto port = parse_port(hostport.substr(port_at + 1));
        if (!port) return "invalid port in LDAP URL \"" + std::string(url) + "\"";
        options.port = *port;
        hostport = hostport.substr(0, port_at);
    }
    if (!hostport.empty()) options.servers = {std::string(hostport)};
    std::vector<std::string_view> parts;
    while (true) {
        const auto q = rest.find('?');
        parts.push_back(rest.substr(0, q));
        if (q == std::string_view::npos) break;
        rest = rest.substr(q + 1);
    }
    auto decoded = [&](std::size_t i) -> std::optional<std::string> {
        return i < parts.size() ? percent_decode(parts[i]) : std::optional<std::string>("");
    };
    auto dn = decoded(0);
    auto attributes = decoded(1);
    auto scope = decoded(2);
    auto filter = decoded(3);
    if (!dn || !attributes || !scope || !filter) {
        return "invalid percent-encoding in LDAP URL \"" + std::string(url) + "\"";
    }
    options.base_dn = *dn;
    // Only the first attribute is used (PostgreSQL and PgBouncer).
    options.search_attribute = attributes->substr(0, attributes->find(','));
    if (scope->empty() || *scope == "sub") {
        options.scope = LdapScope::Subtree;
    } else if (*scope == "one") {
        options.scope = LdapScope::OneLevel;
    } else if (*scope == "base") {
        options.scope = LdapScope::Base;
    } else {
        return "invalid scope \"" + *scope + "\" in LDAP URL \"" + std::string(url) + "\"";
    }
    options.search_filter = *filter;
    return std::nullopt;
}

}  // namespace

std::string LdapOptions::uris() const {
    std::string out;
    for (const auto& server : servers) {
        if (!out.empty()) out += ' ';
        out += scheme + "://" + server + ":" + std::to_string(effective_port());
    }
    return out;
}

std::variant<LdapOptions, std::string> parse_ldap_options(std::string_view text) {
    auto split = split_pairs(text);
    if (auto* error = std::get_if<std::string>(&split)) return *error;
    std::vector<std::pair<std::string, std::string>> pairs;
    for (Pair& pair : std::get<std::vector<Pair>>(split)) {
        pairs.emplace_back(std::move(pair.key), std::move(pair.value));
    }
    return ldap_options_from(pairs);
}

std::variant<LdapOptions, std::string> ldap_options_from(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
    LdapOptions options;
    for (const auto& [key, value] : pairs) {
        if (value.empty()) return "\"" + key + "=\" has an empty value";
        if (key == "ldaptls") {
            options.start_tls = value == "1";
        } else if (key == "ldapscheme") {
            if (value != "ldap" && value != "ldaps") {
                return "invalid ldapscheme value: \"" + value + "\"";
            }
            options.scheme = value;
        } else if (key == "ldapport") {
            auto port = parse_port(value);
            if (!port) return "invalid LDAP port number: \"" + value + "\"";
            options.port = *port;
        } else if (key == "ldapserver") {
            options.servers.clear();
            std::size_t at = 0;
            while (at < value.size()) {
                while (at < value.size() && is_space(value[at])) ++at;
                std::size_t end = at;
                while (end < value.size() && !is_space(value[end])) ++end;
                if (end > at) options.servers.push_back(value.substr(at, end - at));
                at = end;
            }
        } else if (key == "ldapbinddn") {
            options.bind_dn = value;
        } else if (key == "ldapbindpasswd") {
            options.bind_password = value;
        } else if (key == "ldapsearchattribute") {
            options.search_attribute = value;
        } else if (key == "ldapsearchfilter") {
            options.search_filter = value;
        } else if (key == "ldapbasedn") {
            options.base_dn = value;
        } else if (key == "ldapprefix") {
            options.prefix = value;
        } else if (key == "ldapsuffix") {
            options.suffix = value;
        } else if (key == "ldapurl") {
            if (auto error = apply_url(options, value)) return *error;
        } else {
            return "invalid LDAP key parameter: \"" + key + "\"";
        }
    }
    // PostgreSQL's (and PgBouncer's) rules: one mode or the other, one way of searching.
    if (!options.prefix.empty() || !options.suffix.empty()) {
        if (!options.base_dn.empty() || !options.bind_dn.empty() ||
            !options.bind_password.empty() || !options.search_attribute.empty() ||
            !options.search_filter.empty()) {
            return "cannot use ldapbasedn, ldapbinddn, ldapbindpasswd, ldapsearchattribute, "
                   "ldapsearchfilter, or ldapurl together with ldapprefix";
        }
    } else if (options.base_dn.empty()) {
        return "authentication method \"ldap\" requires argument \"ldapbasedn\", \"ldapprefix\", "
               "or \"ldapsuffix\" to be set";
    }
    if (!options.search_attribute.empty() && !options.search_filter.empty()) {
        return "cannot use ldapsearchattribute together with ldapsearchfilter";
    }
    // pgtether needs a server to ask: DNS SRV discovery from the base DN is not done.
    if (options.servers.empty()) {
        return "ldapserver (or a host in ldapurl) is required: DNS SRV discovery of LDAP servers "
               "is not supported by pgtether";
    }
    return options;
}

std::optional<std::string> ldap_search_filter(const LdapOptions& options, std::string_view user) {
    for (char c : user) {
        if (c == '*' || c == '(' || c == ')' || c == '\\' || c == '/') return std::nullopt;
    }
    if (options.search_filter.empty()) {
        const std::string attribute =
            options.search_attribute.empty() ? "uid" : options.search_attribute;
        return "(" + attribute + "=" + std::string(user) + ")";
    }
    static constexpr std::string_view kPlaceholder = "$username";
    std::string filter;
    std::string_view pattern = options.search_filter;
    while (!pattern.empty()) {
        if (pattern.starts_with(kPlaceholder)) {
            filter += user;
            pattern.remove_prefix(kPlaceholder.size());
        } else {
            filter += pattern.front();
            pattern.remove_prefix(1);
        }
    }
    return filter;
}

std::string ldap_simple_bind_dn(const LdapOptions& options, std::string_view user) {
    return options.prefix + std::string(user) + options.suffix;
}

}  // namespace pgtether
