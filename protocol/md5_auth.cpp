#include "protocol/md5_auth.hpp"

#include <openssl/evp.h>

#include "protocol/constant_time.hpp"
#include "protocol/scram.hpp"

namespace pgtether::protocol {

namespace {

constexpr std::string_view kMd5Prefix = "md5";
constexpr std::size_t kMd5HexLength = 32;

// Lowercase hex of md5(parts...), or "" if the digest is unavailable.
std::string md5_hex(std::string_view first, std::string_view second) {
    std::string out;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    if (ctx == nullptr) return out;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    bool ok = EVP_DigestInit_ex(ctx, EVP_md5(), nullptr) == 1 &&
              EVP_DigestUpdate(ctx, first.data(), first.size()) == 1 &&
              EVP_DigestUpdate(ctx, second.data(), second.size()) == 1 &&
              EVP_DigestFinal_ex(ctx, digest, &length) == 1 && length == kMd5HexLength / 2;
    EVP_MD_CTX_free(ctx);
    if (!ok) return out;
    constexpr std::string_view kHex = "0123456789abcdef";
    out.reserve(kMd5HexLength);
    for (unsigned int i = 0; i < length; ++i) {
        out.push_back(kHex[digest[i] >> 4]);
        out.push_back(kHex[digest[i] & 0x0f]);
    }
    return out;
}

}  // namespace

bool is_md5_secret(std::string_view text) {
    // PostgreSQL only accepts lowercase hex here (MD5_PASSWD_CHARSET in crypt.h).
    if (text.size() != kMd5Prefix.size() + kMd5HexLength || !text.starts_with(kMd5Prefix)) {
        return false;
    }
    for (char c : text.substr(kMd5Prefix.size())) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

PasswordType password_type(std::string_view stored_secret) {
    if (parse_scram_secret(stored_secret)) return PasswordType::ScramSha256;
    if (is_md5_secret(stored_secret)) return PasswordType::Md5;
    return PasswordType::Plain;
}

std::string md5_password_secret(std::string_view user, std::string_view password) {
    std::string hex = md5_hex(password, user);
    if (hex.empty()) return hex;
    return std::string(kMd5Prefix) + hex;
}

std::string md5_challenge_response(std::string_view user, std::string_view secret,
                                   const std::array<std::uint8_t, 4>& salt) {
    std::string inner;
    if (is_md5_secret(secret)) {
        inner = secret.substr(kMd5Prefix.size());
    } else {
        inner = md5_hex(secret, user);
        if (inner.empty()) return inner;
    }
    std::string outer =
        md5_hex(inner, std::string_view(reinterpret_cast<const char*>(salt.data()), salt.size()));
    if (outer.empty()) return outer;
    return std::string(kMd5Prefix) + outer;
}

bool md5_verify(std::string_view user, std::string_view stored_secret,
                const std::array<std::uint8_t, 4>& salt, std::string_view client_response) {
    if (password_type(stored_secret) == PasswordType::ScramSha256) return false;
    std::string expected = md5_challenge_response(user, stored_secret, salt);
    if (expected.empty()) return false;
    return constant_time_equal(expected, client_response);
}

}  // namespace pgtether::protocol
