#include "protocol/known_names.hpp"

#include <algorithm>

namespace pgtether::protocol {

KnownNames::KnownNames(std::vector<std::string> names) : names_(std::move(names)) {
    std::sort(names_.begin(), names_.end());
    names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
}

bool KnownNames::contains_exact(std::string_view name) const {
    name = name.substr(0, kMaxNameBytes);
    return std::binary_search(names_.begin(), names_.end(), name,
                              [](std::string_view a, std::string_view b) { return a < b; });
}

bool KnownNames::contains_word(std::string_view word) const {
    char folded[kMaxNameBytes];
    const std::size_t n = std::min(word.size(), kMaxNameBytes);
    for (std::size_t i = 0; i < n; ++i) {
        const char c = word[i];
        folded[i] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    }
    return contains_exact(std::string_view(folded, n));
}

}  // namespace pgtether::protocol
