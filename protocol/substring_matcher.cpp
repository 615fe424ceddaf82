#include "protocol/substring_matcher.hpp"

#include <limits>

namespace pgtether::protocol {

namespace {

constexpr std::uint8_t fold(std::uint8_t b) {
    return (b >= 'A' && b <= 'Z') ? static_cast<std::uint8_t>(b + ('a' - 'A')) : b;
}

}  // namespace

SubstringMatcher::SubstringMatcher(std::span<const Pattern> patterns,
                                   const std::array<bool, 256>& word_bytes) {
    // Alphabet: one class per distinct folded byte used by some pattern; upper and lower case of
    // a letter share a class, which is what makes the whole automaton case-insensitive.
    for (const Pattern& p : patterns) {
        for (char ch : p.text) {
            const std::uint8_t b = fold(static_cast<std::uint8_t>(ch));
            if (byte_class_[b] != 0) continue;
            byte_class_[b] = static_cast<std::uint8_t>(class_count_++);
            if (b >= 'a' && b <= 'z') byte_class_[b - ('a' - 'A')] = byte_class_[b];
        }
    }

    // Trie of the patterns. kAbsent marks a missing edge until the failure links fill it in.
    constexpr State kAbsent = std::numeric_limits<State>::max();
    next_.assign(class_count_, kAbsent);
    mask_.assign(1, 0);
    for (const Pattern& p : patterns) {
        if (p.text.empty()) continue;
        if (min_length_ == 0 || p.text.size() < min_length_) min_length_ = p.text.size();
        State s = kStart;
        for (char ch : p.text) {
            const std::size_t slot =
                std::size_t{s} * class_count_ + byte_class_[static_cast<std::uint8_t>(ch)];
            if (next_[slot] == kAbsent) {
                next_[slot] = static_cast<State>(mask_.size());
                mask_.push_back(0);
                next_.resize(next_.size() + class_count_, kAbsent);
            }
            s = next_[slot];
        }
        mask_[s] |= p.mask;
    }

    // Breadth-first over the trie: a state's failure link is the longest proper suffix of its path
    // that is also a trie path. Shallower states are finished first, so each missing edge can be
    // copied from the (already complete) failure state, and each mask can absorb the failure
    // state's mask: a pattern that is a suffix of the current path has matched too.
    std::vector<State> fail(mask_.size(), kStart);
    std::vector<State> queue;
    queue.reserve(mask_.size());
    for (std::size_t c = 0; c < class_count_; ++c) {
        State& edge = next_[c];
        if (edge == kAbsent) {
            edge = kStart;
        } else {
            queue.push_back(edge);
        }
    }
    for (std::size_t head = 0; head < queue.size(); ++head) {
        const State s = queue[head];
        mask_[s] |= mask_[fail[s]];
        for (std::size_t c = 0; c < class_count_; ++c) {
            State& edge = next_[std::size_t{s} * class_count_ + c];
            const State via_fail = next_[std::size_t{fail[s]} * class_count_ + c];
            if (edge == kAbsent) {
                edge = via_fail;
            } else {
                fail[edge] = via_fail;
                queue.push_back(edge);
            }
        }
    }

    // The word automaton is built from state indices, before they become offsets.
    build_word_table(word_bytes);

    // From state indices to the State encoding: row offset plus kHitBit. (The offsets fit in 31
    // bits: that would take a table of gigabytes.)
    for (State& edge : next_) {
        edge = static_cast<State>(std::size_t{edge} * class_count_) |
               (mask_[edge] != 0 ? kHitBit : State{0});
    }
}

void SubstringMatcher::build_word_table(const std::array<bool, 256>& word_bytes) {
    const std::size_t states = mask_.size();
    const std::size_t stop_column = class_count_;
    const std::size_t columns = class_count_ + 1;
    for (std::size_t b = 0; b < word_class_.size(); ++b) {
        word_class_[b] = word_bytes[b] ? byte_class_[b] : static_cast<std::uint8_t>(stop_column);
    }
    // Rows 0 .. states-1 mirror the automaton's states (a hit state's own row is never entered);
    // row `states` is the absorbing hit state.
    word_hit_row_ = static_cast<State>(states * columns);
    word_next_.assign((states + 1) * columns, word_hit_row_);
    for (std::size_t s = 0; s < states; ++s) {
        for (std::size_t c = 0; c < class_count_; ++c) {
            const State target = next_[s * class_count_ + c];
            if (mask_[target] == 0) {
                word_next_[s * columns + c] = static_cast<State>(target * columns);
            }
        }
        word_next_[s * columns + stop_column] = kWordStop;
    }
    word_next_[states * columns + stop_column] = kWordStopHit;
}

}  // namespace pgtether::protocol
