// auth_file (userlist.txt) parsing and secret classification, including conf/userlist.txt whose
// secrets are checked against the passwords its comment states.
#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <optional>
#include <string>
#include <vector>

#include "core/auth_file.hpp"
#include "core/config.hpp"

using namespace pgtether;

namespace {

const std::string kConf = std::string(PGTETHER_TEST_DATA_DIR) + "/../../../conf";

std::optional<ConfigError> parse_error(const std::string& text) {
    try {
        parse_auth_file(text, "users.txt");
    } catch (const ConfigError& e) {
        return e;
    }
    return std::nullopt;
}

std::string hex(const unsigned char* data, std::size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(digits[data[i] >> 4]);
        out.push_back(digits[data[i] & 15]);
    }
    return out;
}

std::string base64_decode(const std::string& in) {
    std::string out(in.size(), '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(in.data()),
                            static_cast<int>(in.size()));
    REQUIRE(n >= 0);
    // EVP_DecodeBlock counts '=' padding as zero bytes.
    std::size_t pad = 0;
    for (auto it = in.rbegin(); it != in.rend() && *it == '='; ++it)
        ++pad;
    out.resize(static_cast<std::size_t>(n) - pad);
    return out;
}

std::string hmac_sha256(const std::string& key, const std::string& msg) {
    unsigned char out[SHA256_DIGEST_LENGTH];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
}

// Whether a "SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>" secret was made from
// `password` (RFC 5802 §3: SaltedPassword = Hi(password, salt, i); StoredKey =
// H(HMAC(SaltedPassword, "Client Key")); ServerKey = HMAC(SaltedPassword, "Server Key")).
bool scram_matches(const std::string& secret, const std::string& password) {
    auto dollar1 = secret.find('$');
    auto colon1 = secret.find(':', dollar1);
    auto dollar2 = secret.find('$', colon1);
    auto colon2 = secret.find(':', dollar2);
    REQUIRE(colon2 != std::string::npos);
    int iterations = std::stoi(secret.substr(dollar1 + 1, colon1 - dollar1 - 1));
    auto salt = base64_decode(secret.substr(colon1 + 1, dollar2 - colon1 - 1));
    auto stored_key = base64_decode(secret.substr(dollar2 + 1, colon2 - dollar2 - 1));
    auto server_key = base64_decode(secret.substr(colon2 + 1));

    std::string salted(SHA256_DIGEST_LENGTH, '\0');
    REQUIRE(PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                              reinterpret_cast<const unsigned char*>(salt.data()),
                              static_cast<int>(salt.size()), iterations, EVP_sha256(),
                              static_cast<int>(salted.size()),
                              reinterpret_cast<unsigned char*>(salted.data())) == 1);
    auto client_key = hmac_sha256(salted, "Client Key");
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(client_key.data()), client_key.size(), digest);
    return std::string(reinterpret_cast<char*>(digest), sizeof digest) == stored_key &&
           hmac_sha256(salted, "Server Key") == server_key;
}

std::string md5_secret(const std::string& password, const std::string& user) {
    std::string input = password + user;
    unsigned char digest[16];
    unsigned int len = 0;
    REQUIRE(EVP_Digest(input.data(), input.size(), digest, &len, EVP_md5(), nullptr) == 1);
    return "md5" + hex(digest, len);
}

}  // namespace

TEST_CASE("auth file: quoting, comments, blank lines, rest of line ignored") {
    auto users = parse_auth_file(
        "; comment\n"
        "\n"
        "   \t\n"
        "\"alice\" \"plain secret\"\n"
        "  \"bob\"\t\"md5" +
            std::string(32, 'a') +
            "\" ignored trailing text\n"
            "\"we\"\"ird\" \"pa\"\"ss\"\"\"\r\n"
            "   ; indented comment\n"
            "# a hash comment, which PgBouncer would take for a broken line\n"
            "  # indented hash comment\n"
            "\"empty\" \"\"\n"
            "\"alice\" \"second wins\"",
        "users.txt");
    REQUIRE(users.size() == 4);
    CHECK(users.at("alice").user == "alice");
    CHECK(users.at("alice").secret == "second wins");
    CHECK(users.at("alice").kind == SecretKind::Plain);
    CHECK(users.at("bob").secret == "md5" + std::string(32, 'a'));
    CHECK(users.at("bob").kind == SecretKind::Md5);
    CHECK(users.at("we\"ird").secret == "pa\"ss\"");
    CHECK(users.at("empty").secret.empty());
    CHECK(parse_auth_file("", "users.txt").empty());
}

TEST_CASE("auth file: malformed lines name the file and line") {
    struct Case {
        const char* text;
        int line;
        const char* message;
    };
    const Case cases[] = {
        {"alice secret\n", 1, "expected \"user\" \"secret\""},
        {"\"alice\" \"x\"\n# a comment\nbob x\n", 3, "comment lines start with ';' or '#'"},
        {"\"alice\n", 1, "unterminated quoted user name"},
        {"\n\"alice\"\n", 2, "expected the quoted secret"},
        {"\"alice\" secret\n", 1, "expected the quoted secret"},
        {"\"alice\" junk \"secret\"\n", 1, "expected the quoted secret"},
        {"\"alice\" \"secret\n\"more\"\n", 1, "unterminated quoted secret"},
        {"\"\" \"secret\"\n", 1, "empty user name"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        auto e = parse_error(c.text);
        REQUIRE(e);
        CHECK(e->file() == "users.txt");
        CHECK(e->line() == c.line);
        CHECK(std::string(e->what()).find(c.message) != std::string::npos);
    }
    auto e = parse_error("\"alice\" x\n");
    REQUIRE(e);
    CHECK(e->key() == "alice");
    CHECK(std::string(e->what()) ==
          "users.txt:1: alice: expected the quoted secret after the user name");
}

TEST_CASE("secret classification") {
    CHECK(classify_secret("md545f2603610af569b6155c45067268c6b") == SecretKind::Md5);
    CHECK(classify_secret("md545F2603610AF569B6155C45067268C6B") == SecretKind::Md5);
    CHECK(classify_secret("md545f2603610af569b6155c45067268c6") == SecretKind::Plain);    // 31
    CHECK(classify_secret("md545f2603610af569b6155c45067268c6bb") == SecretKind::Plain);  // 33
    CHECK(classify_secret("md545f2603610af569b6155c45067268cxx") == SecretKind::Plain);
    CHECK(classify_secret("MD545f2603610af569b6155c45067268c6b") == SecretKind::Plain);
    CHECK(classify_secret("SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5") == SecretKind::Scram);
    CHECK(classify_secret("scram-sha-256$4096:x$y:z") == SecretKind::Plain);
    CHECK(classify_secret("SCRAM-SHA-256") == SecretKind::Plain);
    CHECK(classify_secret("") == SecretKind::Plain);
    CHECK(classify_secret("hunter2") == SecretKind::Plain);
    // The example from PgBouncer's manual: user admin, password 1234.
    CHECK(md5_secret("1234", "admin") == "md545f2603610af569b6155c45067268c6b");
}

TEST_CASE("conf/userlist.txt holds the secrets its comment promises") {
    auto users = load_auth_file(kConf + "/userlist.txt");
    REQUIRE(users.size() == 3);
    CHECK(users.at("alice").kind == SecretKind::Plain);
    CHECK(users.at("alice").secret == "wonderland");
    CHECK(users.at("bob").kind == SecretKind::Md5);
    CHECK(users.at("bob").secret == md5_secret("builder", "bob"));
    CHECK(users.at("carol").kind == SecretKind::Scram);
    CHECK(scram_matches(users.at("carol").secret, "singing"));
    CHECK_FALSE(scram_matches(users.at("carol").secret, "wrong"));
}

TEST_CASE("auth file: unreadable file") {
    try {
        load_auth_file("/nonexistent/userlist.txt");
        FAIL("no error");
    } catch (const ConfigError& e) {
        CHECK(e.line() == 0);
        CHECK(std::string(e.what()) ==
              "/nonexistent/userlist.txt: cannot read auth file: No such file or directory");
    }
}
