// The names one database's catalog knows that may stand right before '(' in a statement:
// functions and procedures, relations, types, access methods and SQL keywords. The SQL scanner
// uses them to notice a call of a function that did not exist when the catalog was last read --
// a lock wrapper created a moment ago on a direct connection or through another pgtether
// (docs/advisory-locks.md, "Freshness"). A miss costs one probe; the set only has to be a
// superset of what ordinary statements put before '(' so that they are not probed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pgtether::protocol {

class KnownNames {
  public:
    // PostgreSQL truncates identifiers to NAMEDATALEN - 1 bytes (§4.1.1).
    static constexpr std::size_t kMaxNameBytes = 63;

    // Names as the catalog spells them (case kept); sorted and deduplicated here.
    explicit KnownNames(std::vector<std::string> names);

    // An unquoted word: folded to lower case (ASCII, as the server folds identifiers) and
    // truncated to kMaxNameBytes before the lookup.
    [[nodiscard]] bool contains_word(std::string_view word) const;
    // A quoted identifier's name, exactly (truncated like a word).
    [[nodiscard]] bool contains_exact(std::string_view name) const;

    [[nodiscard]] std::size_t size() const { return names_.size(); }
    [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
    bool operator==(const KnownNames& other) const { return names_ == other.names_; }

  private:
    std::vector<std::string> names_;
};

}  // namespace pgtether::protocol
