// Finds many fixed names at once, anywhere in a byte stream, ASCII case-insensitively.
//
// An Aho–Corasick automaton compiled into a dense transition table: feeding one byte is two table
// loads, there is no backtracking, and a match may end at any byte, so a caller can stream bytes it
// decodes on the fly (escape sequences in string literals) without building a copy. Each pattern
// carries a bit mask; a state's mask is the union of the masks of every pattern that ends there.
// The SQL scanner uses it to spot function names inside identifiers, string literals and
// dollar-quoted bodies in one pass.
//
// Words (read_word) get a second copy of the automaton, because the scanner reads every
// identifier of every statement and almost none contains a name: there the question is only
// "where does the word end, and does any name occur in it", so each byte that cannot continue a
// word leads to a stop state and every state where a pattern ends leads to an absorbing hit
// state. A byte of a word is then one class load and one table load, with no separate test for
// the word's end or for a hit; the rare word with a hit is searched again with find_all.
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

    // `word_bytes`: the bytes that continue a word, for read_word (by default none do, and a
    // word is its first byte).
    explicit SubstringMatcher(std::span<const Pattern> patterns,
                              const std::array<bool, 256>& word_bytes = {});

    // A state is the offset of its row in the transition table, with kHitBit set when some
    // pattern ends there: a step is then one load and an add, and the common no-hit case never
    // touches the mask table.
    using State = std::uint32_t;
    static constexpr State kStart = 0;

    [[nodiscard]] State step(State state, std::uint8_t byte) const {
        return next_[(state & ~kHitBit) + byte_class_[byte]];
    }
    // Union of the masks of the patterns that end at the byte that led to `state`.
    [[nodiscard]] std::uint32_t mask(State state) const {
        return (state & kHitBit) == 0 ? 0 : mask_[(state & ~kHitBit) / class_count_];
    }

    // Union of the masks of every pattern occurring in `text`.
    [[nodiscard]] inline std::uint32_t find_all(std::string_view text) const;

    // Length of the shortest pattern (0 when there is none): shorter texts cannot match.
    [[nodiscard]] std::size_t min_length() const { return min_length_; }

    struct Word {
        std::size_t end;  // the offset just after the word
        bool hit;         // some pattern occurs in the word
    };
    // The word starting at `text[start]` (taken whatever it is; start < text.size()): it runs
    // while the bytes are word bytes, or to the end of the text.
    [[nodiscard]] inline Word read_word(std::string_view text, std::size_t start) const;

  private:
    static constexpr State kHitBit = State{1} << 31;

    // The word automaton's states are row offsets into word_next_; the two stop states are
    // reached on a byte that ends the word, from a state without and with a hit before it.
    static constexpr State kWordStop = ~State{1};
    static constexpr State kWordStopHit = ~State{0};
    void build_word_table(const std::array<bool, 256>& word_bytes);

    // Bytes that occur in no pattern share class 0, so the table has one column per distinct
    // (case-folded) pattern byte plus one, not 256.
    std::array<std::uint8_t, 256> byte_class_{};
    std::size_t class_count_ = 1;
    std::vector<State> next_;          // row-major: [state index * class_count_ + class]
    std::vector<std::uint32_t> mask_;  // per state index
    std::size_t min_length_ = 0;

    std::array<std::uint8_t, 256> word_class_{};  // byte_class_, or the stop column
    std::vector<State> word_next_;                 // row-major, class_count_ + 1 columns
    State word_hit_row_ = 0;                       // the absorbing hit state
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

inline SubstringMatcher::Word SubstringMatcher::read_word(std::string_view text,
                                                         std::size_t start) const {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
    const std::size_t n = text.size();
    State state = word_next_[byte_class_[bytes[start]]];  // the first byte is taken in any case
    std::size_t i = start + 1;
    while (state < kWordStop && i < n)
        state = word_next_[state + word_class_[bytes[i++]]];
    if (state >= kWordStop) return {i - 1, state == kWordStopHit};  // bytes[i - 1] ended it
    return {i, state == word_hit_row_};
}

}  // namespace pgtether::protocol
