#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>

#include "protocol/md5_auth.hpp"

using namespace pgtether::protocol;

// Fixtures captured from PostgreSQL 15.18 (Debian 15.18-0+deb12u1): roles created with
// `SET password_encryption = 'md5'; CREATE ROLE ... PASSWORD ...`, secrets read from
// pg_authid.rolpassword; salts and responses captured on the wire between psql (libpq 15) and that
// server, with pg_hba method md5 over TCP.
namespace {

constexpr const char* kAliceSecret = "md56b765adf84f3c4341e8aab77ceda3bf1";  // alice / wonderland
constexpr const char* kBobUser = "Bob \xc3\x9c";                             // "Bob Ü"
constexpr const char* kBobSecret = "md5e8d0722f0636a989220cff8b8a6d1815";

// "pässwörd €" in UTF-8, as typed into psql (precomposed ä, ö).
const std::string kBobPasswordUtf8 = "p\xc3\xa4ssw\xc3\xb6rd \xe2\x82\xac";

// libpq's successful login as alice: AuthenticationMD5Password salt and its PasswordMessage.
constexpr std::array<std::uint8_t, 4> kAliceSalt = {0x9a, 0xbe, 0xf8, 0xc3};
constexpr const char* kAliceResponse = "md5494d2e39e23d4ecb132a582c83326993";
// libpq's failed login as alice with password "wrong".
constexpr std::array<std::uint8_t, 4> kAliceWrongSalt = {0x5c, 0xef, 0x14, 0x76};
constexpr const char* kAliceWrongResponse = "md5b0e3b84552d3b75ca8a0e78ac6b2c6f8";
// libpq's successful login as "Bob Ü".
constexpr std::array<std::uint8_t, 4> kBobSalt = {0x63, 0xc1, 0xa6, 0x99};
constexpr const char* kBobResponse = "md5e5c1180c71904fa544f0e5865b878412";

}  // namespace

TEST_CASE("md5: secrets match what PostgreSQL stores in pg_authid") {
    CHECK(md5_password_secret("alice", "wonderland") == kAliceSecret);
    CHECK(md5_password_secret(kBobUser, kBobPasswordUtf8) == kBobSecret);
    // The user name is part of the hash: same password, other user, other secret.
    CHECK(md5_password_secret("alicf", "wonderland") != kAliceSecret);
    CHECK(md5_password_secret("alice", "wonderlanD") != kAliceSecret);
}

TEST_CASE("md5: challenge responses match libpq's on the wire") {
    // From the plain password and from the stored secret alike.
    CHECK(md5_challenge_response("alice", "wonderland", kAliceSalt) == kAliceResponse);
    CHECK(md5_challenge_response("alice", kAliceSecret, kAliceSalt) == kAliceResponse);
    CHECK(md5_challenge_response("alice", "wrong", kAliceWrongSalt) == kAliceWrongResponse);
    CHECK(md5_challenge_response(kBobUser, kBobPasswordUtf8, kBobSalt) == kBobResponse);
    CHECK(md5_challenge_response(kBobUser, kBobSecret, kBobSalt) == kBobResponse);
    // A salt of zero bytes is hashed as four bytes, not as an empty C string (value computed with
    // Python's hashlib).
    CHECK(md5_challenge_response("alice", "wonderland", {0, 0, 0, 0}) ==
          "md58f2202131ecc4510c987ccba756782f5");
}

TEST_CASE("md5: verify accepts the right response for plain and hashed stored secrets") {
    CHECK(md5_verify("alice", kAliceSecret, kAliceSalt, kAliceResponse));
    CHECK(md5_verify("alice", "wonderland", kAliceSalt, kAliceResponse));
    CHECK(md5_verify(kBobUser, kBobSecret, kBobSalt, kBobResponse));
}

TEST_CASE("md5: verify rejects wrong responses") {
    // The response PostgreSQL rejected (wrong password).
    CHECK_FALSE(md5_verify("alice", kAliceSecret, kAliceWrongSalt, kAliceWrongResponse));
    // A correct response replayed against another salt.
    CHECK_FALSE(md5_verify("alice", kAliceSecret, kAliceWrongSalt, kAliceResponse));
    // With a plain stored password the user name is hashed in, so it must match. (A stored md5
    // secret already contains the user name: it verifies whatever `user` says, as in PostgreSQL.)
    CHECK_FALSE(md5_verify("bob", "wonderland", kAliceSalt, kAliceResponse));
    CHECK(md5_verify("bob", kAliceSecret, kAliceSalt, kAliceResponse));

    const std::string good = kAliceResponse;
    const std::string bad[] = {
        "",
        "md5",
        good.substr(0, good.size() - 1),        // truncated
        good + "0",                             // too long
        good.substr(3),                         // no "md5" prefix
        "MD5" + good.substr(3),                 // prefix case
        "md5494D2E39E23D4ECB132A582C83326993",  // uppercase hex
        good + std::string(1, '\0'),            // NUL left in
        good.substr(0, good.size() - 1) + "4",  // last digit off
    };
    for (const auto& response : bad) {
        CAPTURE(response);
        CHECK_FALSE(md5_verify("alice", kAliceSecret, kAliceSalt, response));
    }
}

TEST_CASE("md5: stored secret classification follows PostgreSQL's get_password_type") {
    CHECK(is_md5_secret(kAliceSecret));
    CHECK_FALSE(is_md5_secret("md56b765adf84f3c4341e8aab77ceda3bf"));    // 31 hex digits
    CHECK_FALSE(is_md5_secret("md56b765adf84f3c4341e8aab77ceda3bf1a"));  // 33
    CHECK_FALSE(is_md5_secret("md56B765ADF84F3C4341E8AAB77CEDA3BF1"));   // uppercase hex
    CHECK_FALSE(is_md5_secret("md56b765adf84f3c4341e8aab77ceda3bfg"));   // not hex
    CHECK_FALSE(is_md5_secret("MD56b765adf84f3c4341e8aab77ceda3bf1"));

    CHECK(password_type(kAliceSecret) == PasswordType::Md5);
    CHECK(password_type("wonderland") == PasswordType::Plain);
    CHECK(password_type("") == PasswordType::Plain);
    CHECK(
        password_type("SCRAM-SHA-256$4096:H4TAjuy5zZ+rzZvNOwFUiw==$AhQ7IJwNviBadzvP6FOMfOqmqzYsAOb"
                      "Q0XDVJnLgWn0=:CacCd8P5aJaHRNV9pLX+fhVXJ4jFtie314vTLfCRUOI=") ==
        PasswordType::ScramSha256);
    // Looks like SCRAM but does not parse: PostgreSQL treats it as a plain password too.
    CHECK(password_type("SCRAM-SHA-256$4096:xx$yy:zz") == PasswordType::Plain);
}

TEST_CASE("md5: a non-md5 'secret' is hashed as a plain password") {
    // Uppercase hex is not an md5 secret to PostgreSQL, so it is the password itself.
    const std::string upper = "md56B765ADF84F3C4341E8AAB77CEDA3BF1";
    CHECK(md5_challenge_response("alice", upper, kAliceSalt) != kAliceResponse);
    CHECK(
        md5_verify("alice", upper, kAliceSalt, md5_challenge_response("alice", upper, kAliceSalt)));
}

TEST_CASE("md5: a stored SCRAM secret never verifies an md5 response") {
    const std::string scram =
        "SCRAM-SHA-256$4096:H4TAjuy5zZ+rzZvNOwFUiw==$AhQ7IJwNviBadzvP6FOMfOqmqzYsAObQ0XDVJnLgWn0=:"
        "CacCd8P5aJaHRNV9pLX+fhVXJ4jFtie314vTLfCRUOI=";
    // Even the response computed by treating the secret text as a password is refused.
    CHECK_FALSE(
        md5_verify("carol", scram, kAliceSalt, md5_challenge_response("carol", scram, kAliceSalt)));
}
