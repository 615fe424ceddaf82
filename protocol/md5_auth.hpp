// PostgreSQL's "md5" password method (protocol §55.2 "AuthenticationMD5Password", §55.3 for the
// stored forms; PostgreSQL source: src/common/md5_common.c, src/backend/libpq/crypt.c).
//
// pg_authid and PgBouncer's userlist.txt store "md5" + hex(md5(password || user)). On the wire the
// server sends a 4-byte random salt and the client answers with
// "md5" + hex(md5(hex(md5(password || user)) || salt)), so knowing the stored secret is enough to
// answer: that is what lets a pooler log in to PostgreSQL with a secret from userlist.txt.
//
// The password and user name are hashed as raw bytes: the md5 method never applied SASLprep.
// Nothing here can fail with the default OpenSSL provider; should MD5 be unavailable (a FIPS-only
// provider), the functions return an empty string, which md5_verify never accepts.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgtether::protocol {

// How PostgreSQL classifies a stored password (get_password_type() in crypt.c): a parseable SCRAM
// secret, else an md5 secret ("md5" + 32 lowercase hex digits), else a plain-text password.
enum class PasswordType { Plain, Md5, ScramSha256 };
[[nodiscard]] PasswordType password_type(std::string_view stored_secret);
[[nodiscard]] bool is_md5_secret(std::string_view text);

// "md5" + hex(md5(password || user)): the form pg_authid and userlist.txt store.
std::string md5_password_secret(std::string_view user, std::string_view password);

// The PasswordMessage body (without its terminating NUL) for an AuthenticationMD5Password
// challenge: "md5" + hex(md5(hex(md5(password || user)) || salt)). `secret` may be a plain
// password or an already-hashed md5 secret (anything is_md5_secret() accepts). A SCRAM secret
// cannot answer an md5 challenge (it is treated as a plain password, like any other text):
// callers check password_type() first.
std::string md5_challenge_response(std::string_view user, std::string_view secret,
                                   const std::array<std::uint8_t, 4>& salt);

// Does a client's md5 response match the stored secret (plain or md5) for this salt? Compared in
// constant time. A stored SCRAM secret never matches: PostgreSQL cannot verify an md5 response
// against one either (it switches such users to SCRAM instead, crypt.c md5_crypt_verify()).
[[nodiscard]] bool md5_verify(std::string_view user, std::string_view stored_secret,
                              const std::array<std::uint8_t, 4>& salt,
                              std::string_view client_response);

}  // namespace pgtether::protocol
