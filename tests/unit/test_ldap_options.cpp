// core/ldap_options: auth_ldap_options as PostgreSQL's pg_hba.conf options, PgBouncer 1.25's
// rules on mixing them, ldapurl (RFC 4516), and the search filter for a user.
#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "core/ldap_options.hpp"

using namespace pgtether;

namespace {

LdapOptions ok(const std::string& text) {
    auto parsed = parse_ldap_options(text);
    if (auto* error = std::get_if<std::string>(&parsed)) FAIL(text << ": " << *error);
    return std::get<LdapOptions>(parsed);
}

std::string error(const std::string& text) {
    auto parsed = parse_ldap_options(text);
    auto* message = std::get_if<std::string>(&parsed);
    return message ? *message : "parsed";
}

}  // namespace

TEST_CASE("ldap options: simple bind and search+bind") {
    auto simple = ok("ldapserver=ldap.example.net ldapprefix=uid= ldapsuffix=\",ou=people,dc=x\"");
    CHECK_FALSE(simple.search_bind());
    CHECK(simple.uris() == "ldap://ldap.example.net:389");
    CHECK(ldap_simple_bind_dn(simple, "alice") == "uid=alice,ou=people,dc=x");

    auto search = ok("ldapserver=\"a b\", ldapport=1389 ldaptls=1 ldapbasedn=dc=x "
                     "ldapbinddn=\"cn=admin,dc=x\" ldapbindpasswd=\"p \"\"w\"");
    CHECK(search.search_bind());
    CHECK(search.start_tls);
    CHECK(search.uris() == "ldap://a:1389 ldap://b:1389");
    CHECK(search.bind_dn == "cn=admin,dc=x");
    CHECK(search.bind_password == "p \"w");
    CHECK(ldap_search_filter(search, "alice") == "(uid=alice)");

    auto ldaps = ok("ldapscheme=ldaps ldapserver=h ldapbasedn=dc=x ldapsearchattribute=cn");
    CHECK(ldaps.uris() == "ldaps://h:636");
    CHECK(ldap_search_filter(ldaps, "alice") == "(cn=alice)");

    auto filtered = ok("ldapserver=h ldapbasedn=dc=x "
                       "ldapsearchfilter=\"(|(uid=$username)(mail=$username@x))\"");
    CHECK(ldap_search_filter(filtered, "bob") == "(|(uid=bob)(mail=bob@x))");
    // Characters that would change the filter are refused, whatever the filter.
    for (const char* user : {"a*", "a(b", "a)", "a\\b", "a/b"}) {
        CAPTURE(user);
        CHECK_FALSE(ldap_search_filter(filtered, user));
        CHECK_FALSE(ldap_search_filter(search, user));
    }
}

TEST_CASE("ldap options: ldapurl") {
    auto url = ok("ldapurl=\"ldap://ldap.example.net:1389/ou=people,dc=example,dc=net?uid?one\"");
    CHECK(url.uris() == "ldap://ldap.example.net:1389");
    CHECK(url.base_dn == "ou=people,dc=example,dc=net");
    CHECK(url.search_attribute == "uid");
    CHECK(url.scope == LdapScope::OneLevel);
    auto filter = ok("ldapurl=ldaps://h/dc=x%20y??base?(cn=$username)");
    CHECK(filter.uris() == "ldaps://h:636");
    CHECK(filter.base_dn == "dc=x y");
    CHECK(filter.scope == LdapScope::Base);
    CHECK(ldap_search_filter(filter, "z") == "(cn=z)");
    CHECK(error("ldapurl=http://h/dc=x") == "unsupported LDAP URL scheme: http");
    CHECK(error("ldapurl=ldap://h/dc=x??whole") ==
          "invalid scope \"whole\" in LDAP URL \"ldap://h/dc=x??whole\"");
}

TEST_CASE("ldap options: what PostgreSQL and PgBouncer refuse") {
    struct Case {
        const char* text;
        const char* says;
    };
    const Case cases[] = {
        {"ldapserver=h", "requires argument \"ldapbasedn\", \"ldapprefix\", or \"ldapsuffix\""},
        {"ldapserver=h ldapprefix=uid= ldapbasedn=dc=x", "together with ldapprefix"},
        {"ldapserver=h ldapbasedn=dc=x ldapsearchattribute=uid ldapsearchfilter=(uid=$username)",
         "cannot use ldapsearchattribute together with ldapsearchfilter"},
        {"ldapserver=h ldapbasedn=dc=x ldapport=70000", "invalid LDAP port number: \"70000\""},
        {"ldapserver=h ldapbasedn=dc=x ldapscheme=http", "invalid ldapscheme value: \"http\""},
        {"ldapserver=h ldapbasedn=dc=x ldapfoo=1", "invalid LDAP key parameter: \"ldapfoo\""},
        {"ldapserver=h ldapbasedn", "has no value"},
        {"ldapserver=h ldapbasedn=\"dc=x", "unterminated quoted value"},
        {"ldapbasedn=dc=x", "DNS SRV discovery of LDAP servers is not supported"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.text);
        CHECK(error(c.text).find(c.says) != std::string::npos);
    }
}
