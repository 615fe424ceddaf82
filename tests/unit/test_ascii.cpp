// protocol/ascii.hpp: ASCII case folding, and the case-insensitive substring test every Query
// text passes through before it is parsed for LISTEN or a reserved statement name.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

#include "protocol/ascii.hpp"

using pgtether::protocol::ascii_icontains;
using pgtether::protocol::ascii_lower;

TEST_CASE("ascii_icontains: a lower-case needle in any case of the text") {
    struct Case {
        const char* text;
        const char* needle;
        bool found;
    };
    static constexpr Case kCases[] = {
        {"LISTEN jobs", "listen", true},
        {"unlisten *", "listen", true},
        {"select 1; LiStEn x", "listen", true},
        {"SELECT 1", "listen", false},
        {"LISTE", "listen", false},          // shorter than the needle
        {"listen", "listen", true},          // the whole text
        {"xxlisten", "listen", true},        // at the very end
        {"LLLlistEN", "listen", true},       // candidates for the first letter in both cases first
        {"lIsTeLiStEn", "listen", true},
        {"l i s t e n", "listen", false},
        {"", "listen", false},
        {"anything", "", true},
        {"pgtether_1", "pgtether_", true},
        {"PGTETHER1", "pgtether_", false},
        {"\xc4\xb0listen", "listen", true},
        {"L\xc4\xb0STEN", "listen", false},  // bytes above 0x7F are never folded (U+0130)
    };
    for (const auto& c : kCases) {
        CAPTURE(c.text);
        CAPTURE(c.needle);
        CHECK(ascii_icontains(c.text, c.needle) == c.found);
    }
}

TEST_CASE("ascii_icontains agrees with a plain search over the folded text") {
    // Texts over a small alphabet, so that near misses and overlapping candidates are common.
    std::mt19937 random(20261205);
    const std::string alphabet = "lLiIsStTeEnN _";
    for (int round = 0; round < 20000; ++round) {
        std::string text(random() % 24, ' ');
        for (char& c : text) c = alphabet[random() % alphabet.size()];
        std::string folded = text;
        std::transform(folded.begin(), folded.end(), folded.begin(), ascii_lower);
        for (const char* needle : {"listen", "ll", "n", "nn_"}) {
            CAPTURE(text);
            CAPTURE(needle);
            CHECK(ascii_icontains(text, needle) ==
                  (folded.find(needle) != std::string::npos));
        }
    }
}
