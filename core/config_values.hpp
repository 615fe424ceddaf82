// Value parsers for pgbouncer.ini settings, written to accept what PgBouncer accepts.
//
// PgBouncer reads its settings with libusual's cfparser (usual/cfparser.c) and its connection
// strings with src/loader.c; each parser below names the function whose behaviour it follows and
// where it deliberately differs (always by refusing something PgBouncer would silently misread).
// Parsers return the value or a short "expected ..." message; the caller adds file, line and key.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config.hpp"

namespace pgtether {

template <typename T>
struct Parsed {
    std::optional<T> value;
    std::string error;  // set when value is empty: what was expected instead

    static Parsed ok(T v) { return Parsed{std::move(v), {}}; }
    static Parsed fail(std::string message) { return Parsed{std::nullopt, std::move(message)}; }
    explicit operator bool() const { return value.has_value(); }
};

// An integer as cf_set_int reads it: strtol(value, &end, 0) over the whole text, so an optional
// sign, then "0x" hex, a leading "0" for octal, or decimal. Unlike PgBouncer, a value that does not
// fit in [min, max] is an error instead of being truncated to an int.
Parsed<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max);

// `workers`: "auto" (any case) is `cpus` (at least 1, at most `max`), anything else an integer
// in [1, max] as parse_integer reads it.
Parsed<std::int64_t> parse_worker_count(std::string_view text, unsigned cpus, std::int64_t max);

// A decimal integer only, for connection-string values PgBouncer reads with atoi(). Unlike atoi,
// trailing junk ("10x") and an empty value are errors instead of being read as 10 and 0.
Parsed<std::int64_t> parse_decimal(std::string_view text, std::int64_t min, std::int64_t max);

// A boolean: PgBouncer declares every boolean setting as CF_INT, so any integer is accepted and
// non-zero means on. "on", "true", "yes" are refused exactly as PgBouncer refuses them.
Parsed<bool> parse_boolean(std::string_view text);

// A time value as cf_set_time_usec reads it: a non-negative number of seconds, fractions allowed
// ("1.5", ".25", "2e3"), no unit suffix, truncated to whole microseconds. PgBouncer's strtod also
// takes hexadecimal floats, "inf" and "nan"; those are refused here.
Parsed<Duration> parse_seconds(std::string_view text);

// A Unix file mode. PgBouncer reads unix_socket_mode with strtol(base 0), so "0777" is octal but
// "777" is decimal 777 (= 01411); to avoid that trap only the octal spelling with a leading 0 is
// accepted. At most 07777.
Parsed<int> parse_file_mode(std::string_view text);

// One of `choices`, compared case-insensitively like cf_set_lookup; yields the spelling from
// `choices`.
Parsed<std::string> parse_choice(std::string_view text, std::span<const std::string_view> choices);

// A list setting (listen_addr, admin_users, ignore_startup_parameters, ...). PgBouncer splits
// these on commas and, where it matches names with strlist_contains, on whitespace too; both are
// separators here and empty items are dropped.
std::vector<std::string> split_list(std::string_view text);

// A [databases] / [users] / [peers] value: `key=value key='quoted value' ...` as PgBouncer's
// cstr_get_pair reads it. Inside single quotes a doubled '' is one quote; there are no backslash
// escapes (PgBouncer keeps a backslash as it is, unlike libpq). Empty values are errors, as in
// PgBouncer. Differences: a tab separates pairs like a space (PgBouncer makes it part of the
// value), and text glued to a closing quote is an error (PgBouncer silently drops one character
// after the quote).
Parsed<std::vector<std::pair<std::string, std::string>>> parse_connstring(std::string_view text);

}  // namespace pgtether
