// PgBouncer's auth_file (userlist.txt): one `"user" "secret"` pair per line.
#pragma once

#include <map>
#include <string>

namespace pgtether {

enum class SecretKind {
    Plain,  // the password itself
    Md5,    // "md5" + md5(password || user) in hex
    Scram   // "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>"
};

struct UserSecret {
    std::string user;
    std::string secret;
    SecretKind kind = SecretKind::Plain;
};

using AuthFile = std::map<std::string, UserSecret>;

// Parses the file. Throws ConfigError naming the file and line for malformed lines or an unreadable
// file. A later line for the same user replaces the earlier one, as in PgBouncer.
AuthFile load_auth_file(const std::string& path);
// The same, from text already in memory (used by tests and by reload).
AuthFile parse_auth_file(const std::string& text, const std::string& file_name_for_errors);

SecretKind classify_secret(const std::string& secret);

}  // namespace pgtether
