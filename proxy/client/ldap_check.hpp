// One LDAP check of a user name and password (auth_type = ldap; docs/tls-and-auth.md, "LDAP"), as
// PostgreSQL and PgBouncer 1.25 make it: a simple bind as ldapprefix + user + ldapsuffix, or a
// search for the user's entry (bound as ldapbinddn, or anonymously) and a bind as the one entry
// found; StartTLS with ldaptls=1. Options come parsed and checked (core/ldap_options.hpp).
//
// It blocks (a network round trip or four): it runs on libuv's thread pool
// (proxy/client/login_work.hpp), never on the event loop, bounded by a 3 s connect and a 10 s
// operation timeout, and touches nothing but its request.
#pragma once

#include <string>

#include "core/ldap_options.hpp"
#include "proxy/client/password_verdict.hpp"

namespace pgtether {

struct LdapRequest {
    LdapOptions options;
    std::string user;
    std::string password;
};

PasswordVerdict run_ldap_check(const LdapRequest& request);

}  // namespace pgtether
