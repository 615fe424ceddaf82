// The trigger's findings for the statement texts seen most recently, so that a text which comes
// again is not scanned again.
//
// Drivers send the same text over and over: an unnamed Parse for every execution of a query
// (libpq's PQexecParams, pgbench -M extended, most drivers' default), whose scan is the largest
// piece of pgtether's own work per transaction (docs/benchmarks.md, "Instructions"). A SqlScanner
// is a pure function of the text, so its answer can be remembered: one lookup (a hash of the text
// and one comparison) instead of a pass of the lexer.
//
// Direct-mapped: the text's hash picks one slot, and a new text replaces whatever was there, so a
// lookup is one comparison and nothing needs evicting. Bounded: kSlots texts of at most kMaxText
// bytes (longer texts are scanned every time; their scan dwarfs the lookup anyway), allocated on
// first use. The memo does not know which scanner produced the answers: its owner clears it when
// the scanner changes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "protocol/sql_scanner.hpp"

namespace pgtether::protocol {

class ScanMemo {
  public:
    static constexpr std::size_t kSlots = 64;
    static constexpr std::size_t kMaxText = 1024;

    // `scanner.scan(text)`, taken from the memo when the text was stored lately. The memo must
    // only ever be used with one scanner (clear() it when the scanner changes).
    [[nodiscard]] std::uint32_t scan(const SqlScanner& scanner, std::string_view text) {
        if (text.size() > kMaxText) return scanner.scan(text);
        if (!slots_) slots_ = std::make_unique<std::array<Slot, kSlots>>();
        const std::size_t hash = std::hash<std::string_view>{}(text);
        Slot& slot = (*slots_)[hash % kSlots];
        if (slot.used && slot.hash == hash && slot.text == text) return slot.effects;
        slot.effects = scanner.scan(text);
        slot.hash = hash;
        slot.text.assign(text);  // the slot's capacity is reused by the next text it holds
        slot.used = true;
        return slot.effects;
    }

    // Whether `text`'s findings are remembered (what the next scan() of it will answer from).
    [[nodiscard]] bool holds(std::string_view text) const {
        if (!slots_ || text.size() > kMaxText) return false;
        const std::size_t hash = std::hash<std::string_view>{}(text);
        const Slot& slot = (*slots_)[hash % kSlots];
        return slot.used && slot.hash == hash && slot.text == text;
    }

    // Forgets everything (the scanner changed).
    void clear() { slots_.reset(); }

  private:
    struct Slot {
        std::size_t hash = 0;
        std::string text;
        std::uint32_t effects = 0;
        bool used = false;
    };
    std::unique_ptr<std::array<Slot, kSlots>> slots_;
};

}  // namespace pgtether::protocol
