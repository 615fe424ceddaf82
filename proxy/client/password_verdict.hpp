// What a password check outside pgtether (PAM, LDAP) says: yes, or why not -- for the log only;
// the client hears PgBouncer's words ("PAM authentication failed", "LDAP authentication failed").
#pragma once

#include <string>

namespace pgtether {

struct PasswordVerdict {
    bool ok = false;
    std::string failure;  // which step failed and the service's own words
};

}  // namespace pgtether
