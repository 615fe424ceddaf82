// Property checks inside fuzz targets. A failed check aborts, which libFuzzer reports as a crash
// (and saves the input), and which fails the ctest replay of committed inputs in normal builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pgtether::fuzz {

inline void require(bool ok, const char* property) {
    if (ok) return;
    std::fprintf(stderr, "fuzz property violated: %s\n", property);
    std::abort();
}

// The fuzzer's bytes as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// Does `part` lie inside `whole` (readers return views into the message body, never copies or
// views past its end)? An empty view may point anywhere.
inline bool within(std::string_view part, std::string_view whole) {
    if (part.empty()) return true;
    const std::less_equal<const char*> le;
    return le(whole.data(), part.data()) && le(part.data() + part.size(), whole.data() + whole.size());
}

// Splits `input` at every `separator` into at most `max_parts` parts (the last keeps the rest).
// Targets that need several inputs (a user and a password, a file and its @file) take them from
// one fuzzer input this way.
inline std::vector<std::string_view> split(std::string_view input, char separator,
                                           std::size_t max_parts) {
    std::vector<std::string_view> parts;
    while (parts.size() + 1 < max_parts) {
        const std::size_t at = input.find(separator);
        if (at == std::string_view::npos) break;
        parts.push_back(input.substr(0, at));
        input.remove_prefix(at + 1);
    }
    parts.push_back(input);
    return parts;
}

// `text` in double quotes with every quote doubled: how SQL identifiers, userlist.txt fields and
// quoted ini keys are written, so targets can write back what a reader read.
inline std::string double_quoted(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

}  // namespace pgtether::fuzz
