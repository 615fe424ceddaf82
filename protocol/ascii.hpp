// ASCII case folding for the protocol's and the configuration's keywords (ini values, HTTP header
// names, TLS protocol names): locale-independent, as PostgreSQL and PgBouncer fold them, and
// unlike std::tolower never undefined for bytes above 0x7F.
#pragma once

#include <cstddef>
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

}  // namespace pgtether::protocol
