#include <doctest/doctest.h>

#include <string>

#include "protocol/base64.hpp"

using pgtether::protocol::base64_decode;
using pgtether::protocol::base64_encode;

TEST_CASE("base64: RFC 4648 section 10 test vectors") {
    struct Vector {
        const char* raw;
        const char* encoded;
    };
    const Vector vectors[] = {{"", ""},
                              {"f", "Zg=="},
                              {"fo", "Zm8="},
                              {"foo", "Zm9v"},
                              {"foob", "Zm9vYg=="},
                              {"fooba", "Zm9vYmE="},
                              {"foobar", "Zm9vYmFy"}};
    for (const auto& v : vectors) {
        CAPTURE(v.raw);
        CHECK(base64_encode(v.raw) == v.encoded);
        auto decoded = base64_decode(v.encoded);
        REQUIRE(decoded.has_value());
        CHECK(*decoded == v.raw);
    }
}

TEST_CASE("base64: every byte value and every length round-trip") {
    std::string all;
    for (int i = 0; i < 256; ++i)
        all.push_back(static_cast<char>(i));
    CHECK(base64_decode(base64_encode(all)) == all);

    // Lengths 0..70 cover all three tail shapes many times; the content is a simple LCG so the
    // bytes are not all alike.
    std::uint32_t state = 12345;
    std::string raw;
    for (int length = 0; length <= 70; ++length) {
        CAPTURE(length);
        std::string encoded = base64_encode(raw);
        CHECK(encoded.size() == (raw.size() + 2) / 3 * 4);
        CHECK(base64_decode(encoded) == raw);
        state = state * 1103515245u + 12345u;
        raw.push_back(static_cast<char>(state >> 24));
    }
}

TEST_CASE("base64: the standard alphabet, including + and /") {
    CHECK(base64_encode("\xfb\xff\xbf") == "+/+/");
    CHECK(base64_decode("+/+/") == std::string("\xfb\xff\xbf"));
}

TEST_CASE("base64: invalid input is rejected") {
    const char* invalid[] = {
        "Z",            // truncated: not a multiple of 4
        "Zm9",          // truncated
        "Zm9vYg=",      // truncated padding
        "Zm9vY",        // truncated
        "Zg",           // padding omitted
        "Zg==Zg==",     // padding in the middle
        "Z===",         // too much padding
        "====",         // only padding
        "=Zm9",         // padding first
        "Zm=v",         // padding inside a quantum
        "Zm9v!A==",     // character outside the alphabet
        "Zm 9v",        // whitespace is not skipped
        "Zm9v\n",       // newline
        "Zm9v-_==",     // URL-safe alphabet
        "Zh==",         // non-canonical: unused bits set (RFC 4648 section 3.5)
        "Zm9=",         // non-canonical
        "\xc3\xa4Zg=",  // non-ASCII byte
    };
    for (const char* text : invalid) {
        CAPTURE(text);
        CHECK_FALSE(base64_decode(text).has_value());
    }
    CHECK_FALSE(base64_decode(std::string("Zg=\0", 4)).has_value());
    CHECK_FALSE(base64_decode(std::string("Z\0==", 4)).has_value());
}
