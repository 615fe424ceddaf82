// ASCII case folding for the protocol's and the configuration's keywords (ini values, HTTP header
// names, TLS protocol names): locale-independent, as PostgreSQL and PgBouncer fold them, and
// unlike std::tolower never undefined for bytes above 0x7F.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

namespace pgtether::protocol {

[[nodiscard]] constexpr char ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Equal but for the case of ASCII letters.
[[nodiscard]] constexpr bool ascii_iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    }
    return true;
}

// Whether `text` contains `lower` (lower case) in any case of ASCII letters. Every Query text
// passes through this (the cheap test before a statement is parsed), so the candidates are
// found with memchr, for the first character in either case, each searched again only once
// passed.
[[nodiscard]] inline bool ascii_icontains(std::string_view text, std::string_view lower) {
    if (lower.empty()) return true;
    if (text.size() < lower.size()) return false;
    const std::size_t starts = text.size() - lower.size() + 1;  // where a match may start
    const char first = lower[0];
    const char first_upper =
        first >= 'a' && first <= 'z' ? static_cast<char>(first - 'a' + 'A') : first;
    const auto find = [&](char c, std::size_t from) -> std::size_t {
        if (from >= starts) return starts;
        const void* hit = std::memchr(text.data() + from, c, starts - from);
        return hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - text.data())
                   : starts;
    };
    std::size_t next_lower = find(first, 0);
    std::size_t next_upper = first_upper == first ? starts : find(first_upper, 0);
    while (true) {
        const std::size_t i = std::min(next_lower, next_upper);
        if (i >= starts) return false;
        std::size_t j = 1;
        while (j < lower.size() && ascii_lower(text[i + j]) == lower[j]) ++j;
        if (j == lower.size()) return true;
        if (i == next_lower) next_lower = find(first, i + 1);
        if (i == next_upper) next_upper = find(first_upper, i + 1);
    }
}

}  // namespace pgtether::protocol
