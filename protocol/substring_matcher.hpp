// Finds many fixed names at once, anywhere in a byte stream, ASCII case-insensitively.
//
// An Aho–Corasick automaton compiled into a dense transition table: feeding one byte is two table
// loads, there is no backtracking, and a match may end at any byte, so a caller can stream bytes it
// decodes on the fly (escape sequences in string literals) without building a copy. Each pattern
// carries a bit mask; a state's mask is the union of the masks of every pattern that ends there.
// The SQL scanner uses it to spot function names inside identifiers, string literals and
// dollar-quoted bodies in one pass.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace pgtether::protocol {

class SubstringMatcher {
  public:
    struct Pattern {
        std::string_view text;  // matched ASCII case-insensitively; empty patterns are ignored
        std::uint32_t mask;
    };

    explicit SubstringMatcher(std::span<const Pattern> patterns);

    // A state is the offset of its row in the transition table, with kHitBit set when some
    // pattern ends there: a step is then one load and an add, and the common no-hit case never
    // touches the mask table.
    using State = std::uint32_t;
    static constexpr State kStart = 0;

    [[nodiscard]] State step(State state, std::uint8_t byte) const {
        return next_[(state & ~kHitBit) + byte_class_[byte]];
    }
    // Whether some pattern ends at the byte that led to `state` (only then is mask() non-zero).
    // A caller may OR the states of a run together and test once, then collect the masks with
    // find_all() in the rare run that has a hit.
    [[nodiscard]] static bool hit(State state) { return (state & kHitBit) != 0; }
    // Union of the masks of the patterns that end at the byte that led to `state`.
    [[nodiscard]] std::uint32_t mask(State state) const {
        return (state & kHitBit) == 0 ? 0 : mask_[(state & ~kHitBit) / class_count_];
    }

    // Union of the masks of every pattern occurring in `text`.
    [[nodiscard]] inline std::uint32_t find_all(std::string_view text) const;

    // Length of the shortest pattern (0 when there is none): shorter texts cannot match.
    [[nodiscard]] std::size_t min_length() const { return min_length_; }

  private:
    static constexpr State kHitBit = State{1} << 31;

    // Bytes that occur in no pattern share class 0, so the table has one column per distinct
    // (case-folded) pattern byte plus one, not 256.
    std::array<std::uint8_t, 256> byte_class_{};
    std::size_t class_count_ = 1;
    std::vector<State> next_;          // row-major: [state index * class_count_ + class]
    std::vector<std::uint32_t> mask_;  // per state index
    std::size_t min_length_ = 0;
};

// Feeds bytes one at a time and remembers every mask seen; reset() forgets the partial match
// (a token boundary) but keeps the hits.
class MatchCursor {
  public:
    explicit MatchCursor(const SubstringMatcher& matcher) : matcher_(&matcher) {}

    void feed(std::uint8_t byte) {
        state_ = matcher_->step(state_, byte);
        hits_ |= matcher_->mask(state_);
    }
    void reset() { state_ = SubstringMatcher::kStart; }
    [[nodiscard]] std::uint32_t hits() const { return hits_; }

  private:
    const SubstringMatcher* matcher_;
    SubstringMatcher::State state_ = SubstringMatcher::kStart;
    std::uint32_t hits_ = 0;
};

inline std::uint32_t SubstringMatcher::find_all(std::string_view text) const {
    MatchCursor cursor(*this);
    for (char ch : text)
        cursor.feed(static_cast<std::uint8_t>(ch));
    return cursor.hits();
}

}  // namespace pgtether::protocol
