// LDAP authentication's options (auth_type = ldap, auth_ldap_options; PgBouncer 1.25, with
// PostgreSQL's pg_hba.conf option names): parsed and checked when the configuration is loaded, so
// a mistake is a configuration error naming the key, not a failed login at 3 a.m. Pure: the bind
// and search themselves are proxy/client/ldap_check.cpp's.
//
// Two modes, as in PostgreSQL: simple bind (ldapprefix + user name + ldapsuffix is the DN bound
// with the client's password), or search+bind (bind as ldapbinddn, or anonymously, search
// ldapbasedn for the user by ldapsearchattribute, default uid, or by ldapsearchfilter with
// $username, then bind as the one entry found). ldapurl (RFC 4516: ldap[s]://host[:port]/basedn
// [?attribute[?scope[?filter]]]) sets the search+bind options in one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pgtether {

enum class LdapScope { Base, OneLevel, Subtree };

struct LdapOptions {
    std::string scheme = "ldap";       // ldapscheme: ldap or ldaps
    std::vector<std::string> servers;  // ldapserver: space-separated host names
    int port = 0;                      // ldapport; 0: 389, or 636 for ldaps
    bool start_tls = false;            // ldaptls=1
    // simple bind
    std::string prefix;
    std::string suffix;
    // search+bind
    std::string base_dn;
    std::string bind_dn;
    std::string bind_password;
    std::string search_attribute;  // empty: "uid" (unless search_filter is set)
    std::string search_filter;     // with $username
    LdapScope scope = LdapScope::Subtree;

    [[nodiscard]] bool search_bind() const { return !base_dn.empty(); }
    [[nodiscard]] int effective_port() const { return port ? port : scheme == "ldaps" ? 636 : 389; }
    // "ldap://host:port ldap://other:port", for ldap_initialize.
    [[nodiscard]] std::string uris() const;
};

// Parses `key=value` pairs separated by spaces or commas (a value may be "quoted", with "" for a
// quote). An error says what is wrong, in PostgreSQL's / PgBouncer's words.
std::variant<LdapOptions, std::string> parse_ldap_options(std::string_view text);

// The same from key/value pairs already split (an auth_hba_file line's options).
std::variant<LdapOptions, std::string> ldap_options_from(
    const std::vector<std::pair<std::string, std::string>>& pairs);

// The search filter for `user`: ldapsearchfilter with every $username replaced, else
// "(ATTRIBUTE=USER)". nullopt when the user name holds a character that would change the filter
// (* ( ) \ /), which PostgreSQL refuses too.
std::optional<std::string> ldap_search_filter(const LdapOptions& options, std::string_view user);

// The DN of the simple-bind mode.
std::string ldap_simple_bind_dn(const LdapOptions& options, std::string_view user);

}  // namespace pgtether
