// Fuzzes PostgreSQL's md5 password method (protocol/md5_auth.hpp): the secret classifier, the
// challenge response and its constant-time check.
//
// Input: user, password (or stored secret), client response, separated by NUL bytes; the salt is
// the first four bytes of the input (zero-padded). Checked:
//  * md5_password_secret always gives an md5 secret, and password_type agrees with the checks;
//  * the response computed from a plain password and from its md5 secret are the same, and
//    md5_verify accepts it against both stored forms (unless the "password" is a SCRAM secret,
//    which md5 can never verify);
//  * md5_verify accepts an arbitrary client response only when it is exactly the right one.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/md5_auth.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;
using pgtether::fuzz::split;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::array<std::uint8_t, 4> salt{};
    for (std::size_t i = 0; i < salt.size() && i < size; ++i)
        salt[i] = data[i];
    const auto parts = split(as_text(data, size), '\0', 3);
    const std::string_view user = parts[0];
    const std::string_view password = parts.size() > 1 ? parts[1] : std::string_view{};
    const std::string_view response = parts.size() > 2 ? parts[2] : std::string_view{};

    const PasswordType type = password_type(password);
    require((type == PasswordType::Md5) == (is_md5_secret(password) && type != PasswordType::ScramSha256),
            "password_type and is_md5_secret agree");

    const std::string secret = md5_password_secret(user, password);
    require(is_md5_secret(secret) && password_type(secret) == PasswordType::Md5,
            "an md5 secret is recognised");

    const std::string expected = md5_challenge_response(user, password, salt);
    require(expected.size() == 35 && expected.starts_with("md5"), "a response is md5 + 32 hex");
    if (type == PasswordType::Plain) {
        require(md5_challenge_response(user, secret, salt) == expected,
                "a password and its md5 secret answer alike");
        require(md5_verify(user, password, salt, expected), "the right response passes (plain)");
        require(md5_verify(user, secret, salt, expected), "the right response passes (md5)");
    } else if (type == PasswordType::Md5) {
        require(md5_verify(user, password, salt, expected), "the right response passes");
    } else {
        require(!md5_verify(user, password, salt, expected), "a SCRAM secret never passes md5");
    }
    if (md5_verify(user, password, salt, response)) {
        require(response == expected, "only the right response passes");
    }
    return 0;
}
