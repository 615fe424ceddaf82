#include "core/config_values.hpp"

#include <algorithm>

#include <charconv>
#include <cmath>
#include <limits>

#include "protocol/ascii.hpp"

namespace pgtether {

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

using protocol::ascii_iequals;
using protocol::ascii_lower;

int digit_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 99;
}

std::string range_text(std::int64_t min, std::int64_t max) {
    if (max == std::numeric_limits<int>::max()) {
        return "an integer >= " + std::to_string(min);
    }
    return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

// Digits in `base` from text[pos], accumulated with overflow detection (saturating at a value
// that is out of every range we check).
Parsed<std::int64_t> parse_digits(std::string_view text, std::size_t pos, int base, bool negative,
                                  std::int64_t min, std::int64_t max) {
    if (pos >= text.size()) return Parsed<std::int64_t>::fail("expected " + range_text(min, max));
    constexpr std::int64_t kCap = std::int64_t{1} << 62;
    std::int64_t value = 0;
    for (; pos < text.size(); ++pos) {
        int d = digit_value(text[pos]);
        if (d >= base) return Parsed<std::int64_t>::fail("expected " + range_text(min, max));
        value = value > kCap / base ? kCap : value * base + d;
    }
    if (negative) value = -value;
    if (value < min || value > max) {
        return Parsed<std::int64_t>::fail("out of range: expected " + range_text(min, max));
    }
    return Parsed<std::int64_t>::ok(value);
}

}  // namespace

Parsed<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max) {
    std::size_t pos = 0;
    bool negative = false;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
        negative = text[pos] == '-';
        ++pos;
    }
    // strtol base 0: "0x" prefix = hex, other leading "0" = octal (so "08" is an error).
    if (text.size() - pos > 2 && text[pos] == '0' && ascii_lower(text[pos + 1]) == 'x') {
        return parse_digits(text, pos + 2, 16, negative, min, max);
    }
    if (text.size() - pos > 1 && text[pos] == '0') {
        return parse_digits(text, pos + 1, 8, negative, min, max);
    }
    return parse_digits(text, pos, 10, negative, min, max);
}

Parsed<std::int64_t> parse_worker_count(std::string_view text, unsigned cpus, std::int64_t max) {
    if (ascii_iequals(text, "auto")) {
        // hardware_concurrency() may say 0 when it cannot tell.
        return Parsed<std::int64_t>::ok(std::clamp<std::int64_t>(cpus, 1, max));
    }
    auto n = parse_integer(text, 1, max);
    if (!n) return Parsed<std::int64_t>::fail(n.error + " (or auto: one per CPU)");
    return n;
}

Parsed<std::int64_t> parse_decimal(std::string_view text, std::int64_t min, std::int64_t max) {
    std::size_t pos = 0;
    bool negative = false;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
        negative = text[pos] == '-';
        ++pos;
    }
    return parse_digits(text, pos, 10, negative, min, max);
}

Parsed<bool> parse_boolean(std::string_view text) {
    auto n = parse_integer(text, std::numeric_limits<std::int64_t>::min() / 2,
                           std::numeric_limits<std::int64_t>::max() / 2);
    if (!n) {
        return Parsed<bool>::fail(
            "expected 0 (off) or 1 (on); PgBouncer reads booleans as integers and refuses "
            "on/off/true/false");
    }
    return Parsed<bool>::ok(*n.value != 0);
}

Parsed<Duration> parse_seconds(std::string_view text) {
    const std::string expected =
        "expected a number of seconds such as 30, 1.5 or 0.25 (no unit suffix)";
    // Accept exactly: [+] (digits [. digits*] | . digits) [(e|E) [+|-] digits]
    std::size_t pos = 0;
    if (pos < text.size() && text[pos] == '+') ++pos;
    std::size_t number_start = pos;
    std::size_t int_digits = 0, frac_digits = 0;
    while (pos < text.size() && is_digit(text[pos]))
        ++pos, ++int_digits;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        while (pos < text.size() && is_digit(text[pos]))
            ++pos, ++frac_digits;
    }
    if (int_digits + frac_digits == 0) {
        if (pos < text.size() && text[pos] == '-') {
            return Parsed<Duration>::fail("negative time: " + expected);
        }
        return Parsed<Duration>::fail(expected);
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
        ++pos;
        if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) ++pos;
        std::size_t exp_digits = 0;
        while (pos < text.size() && is_digit(text[pos]))
            ++pos, ++exp_digits;
        if (exp_digits == 0) return Parsed<Duration>::fail(expected);
    }
    if (pos != text.size()) return Parsed<Duration>::fail(expected);

    double seconds = 0;
    auto number = text.substr(number_start);
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), seconds);
    // About 31 years; anything longer is a typo, and it keeps microseconds far from overflow.
    constexpr double kMaxSeconds = 1e9;
    if (ec == std::errc::result_out_of_range || !std::isfinite(seconds) || seconds > kMaxSeconds) {
        return Parsed<Duration>::fail("out of range: at most 1e9 seconds");
    }
    if (ec != std::errc() || end != number.data() + number.size()) {
        return Parsed<Duration>::fail(expected);
    }
    // The same arithmetic as cf_set_time_usec: (usec_t)(USEC * v), truncating.
    return Parsed<Duration>::ok(Duration(static_cast<std::int64_t>(1000000.0 * seconds)));
}

Parsed<int> parse_file_mode(std::string_view text) {
    const std::string expected =
        "expected an octal file mode with a leading 0, such as 0777 or 0660";
    if (text.empty() || text[0] != '0') return Parsed<int>::fail(expected);
    int mode = 0;
    for (char c : text) {
        if (c < '0' || c > '7') return Parsed<int>::fail(expected);
        mode = mode * 8 + (c - '0');
        if (mode > 07777) return Parsed<int>::fail("out of range: at most 07777");
    }
    return Parsed<int>::ok(mode);
}

Parsed<std::string> parse_choice(std::string_view text, std::span<const std::string_view> choices) {
    for (auto choice : choices) {
        if (ascii_iequals(text, choice)) return Parsed<std::string>::ok(std::string(choice));
    }
    std::string message = "expected one of: ";
    for (std::size_t i = 0; i < choices.size(); ++i) {
        if (i > 0) message += ", ";
        message += choices[i];
    }
    return Parsed<std::string>::fail(std::move(message));
}

std::vector<std::string> split_list(std::string_view text) {
    std::vector<std::string> items;
    std::string current;
    for (char c : text) {
        if (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f') {
            if (!current.empty()) items.push_back(std::move(current));
            current.clear();
        } else {
            current.push_back(c);
        }
    }
    if (!current.empty()) items.push_back(std::move(current));
    return items;
}

Parsed<std::vector<std::pair<std::string, std::string>>> parse_connstring(std::string_view text) {
    using Result = Parsed<std::vector<std::pair<std::string, std::string>>>;
    auto is_space = [](char c) { return c == ' ' || c == '\t'; };
    std::vector<std::pair<std::string, std::string>> pairs;
    std::size_t pos = 0;
    auto skip_spaces = [&] {
        while (pos < text.size() && is_space(text[pos]))
            ++pos;
    };
    for (;;) {
        skip_spaces();
        if (pos >= text.size()) break;
        // Key: everything up to '=' or a space (cstr_get_key).
        std::size_t key_start = pos;
        while (pos < text.size() && text[pos] != '=' && !is_space(text[pos]))
            ++pos;
        std::string key(text.substr(key_start, pos - key_start));
        skip_spaces();
        if (key.empty()) return Result::fail("missing parameter name before '='");
        if (pos >= text.size() || text[pos] != '=') {
            return Result::fail("missing '=' after \"" + key + "\"");
        }
        ++pos;
        skip_spaces();
        std::string value;
        if (pos < text.size() && text[pos] == '\'') {
            // Quoted value (cstr_unquote_value): '' stands for one quote, nothing else escapes.
            ++pos;
            bool closed = false;
            while (pos < text.size()) {
                if (text[pos] == '\'') {
                    if (pos + 1 < text.size() && text[pos + 1] == '\'') {
                        value.push_back('\'');
                        pos += 2;
                        continue;
                    }
                    ++pos;
                    closed = true;
                    break;
                }
                value.push_back(text[pos++]);
            }
            if (!closed) return Result::fail("unterminated quoted value for \"" + key + "\"");
            if (pos < text.size() && !is_space(text[pos])) {
                return Result::fail("unexpected text after the closing quote of \"" + key +
                                    "\" (a space must separate parameters)");
            }
        } else {
            std::size_t value_start = pos;
            while (pos < text.size() && !is_space(text[pos]))
                ++pos;
            value.assign(text.substr(value_start, pos - value_start));
        }
        // PgBouncer refuses empty values, quoted or not ("disallow empty values").
        if (value.empty()) return Result::fail("empty value for \"" + key + "\"");
        pairs.emplace_back(std::move(key), std::move(value));
    }
    return Result::ok(std::move(pairs));
}

}  // namespace pgtether
