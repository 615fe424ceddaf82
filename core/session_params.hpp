// The client-visible session parameters pgtether keeps per client and per backend.
//
// PostgreSQL reports these with ParameterStatus (protocol §55.2.7 "Asynchronous Operations"), so
// a client caches them and would be misled if a shared backend carried another client's values.
// Every client remembers the values it chose (start-up packet or a later SET the server reported);
// every backend remembers its current values; before a backend serves a client the difference is
// applied with SET (see Server::sync_parameters).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace pgtether {

enum class TrackedParam : std::size_t {
    ClientEncoding,
    DateStyle,
    TimeZone,
    IntervalStyle,
    StandardConformingStrings,
    ApplicationName,
};
inline constexpr std::size_t kTrackedParamCount = 6;

// The spelling PostgreSQL reports, e.g. "DateStyle".
std::string_view tracked_param_name(TrackedParam p);
// Case-insensitive lookup ("datestyle" → DateStyle), nullopt for other names.
std::optional<TrackedParam> find_tracked_param(std::string_view name);

// Values for every tracked parameter; nullopt means "not set / unknown" (an empty value is a value).
//
// Every client and every backend has one, so it is compact: the values (a few short strings) sit
// back to back in one string, found through their end offsets, instead of six
// std::optional<std::string> (240 bytes before any value is stored).
class ParamValues {
public:
    // The view is valid until the next set() or clear().
    [[nodiscard]] std::optional<std::string_view> get(TrackedParam p) const {
        auto i = static_cast<std::size_t>(p);
        if ((set_ & (1u << i)) == 0) return std::nullopt;
        std::uint32_t start = begin(i);  // the offsets are always within values_
        return std::string_view(values_.data() + start, ends_[i] - start);
    }
    void set(TrackedParam p, std::string_view value) {
        auto i = static_cast<std::size_t>(p);
        replace(i, value);
        set_ = static_cast<std::uint8_t>(set_ | (1u << i));
    }
    void clear(TrackedParam p) {
        auto i = static_cast<std::size_t>(p);
        replace(i, {});
        set_ = static_cast<std::uint8_t>(set_ & ~(1u << i));
    }

    // Whether parameter `p` is set in both and has the same value: what get(p) == other.get(p)
    // says for two set values, without building the optionals (asked six times per link).
    [[nodiscard]] bool same_set_value(TrackedParam p, const ParamValues& other) const {
        auto i = static_cast<std::size_t>(p);
        if ((set_ & other.set_ & (1u << i)) == 0) return false;
        const std::uint32_t start = begin(i);
        const std::uint32_t other_start = other.begin(i);
        const std::uint32_t size = ends_[i] - start;
        return size == other.ends_[i] - other_start &&
               (size == 0 ||
                std::memcmp(values_.data() + start, other.values_.data() + other_start, size) ==
                    0);
    }
    [[nodiscard]] bool has(TrackedParam p) const {
        return (set_ & (1u << static_cast<std::size_t>(p))) != 0;
    }

private:
    [[nodiscard]] std::uint32_t begin(std::size_t i) const { return i == 0 ? 0 : ends_[i - 1]; }
    void replace(std::size_t i, std::string_view value);

    std::string values_;                                     // every set value, in enum order
    std::array<std::uint32_t, kTrackedParamCount> ends_{};  // end of value i in values_
    std::uint8_t set_ = 0;                                   // bit i: parameter i has a value
};

// The SET statements that make a backend whose current values are `backend` show `wanted`, where
// `defaults` stands in for parameters the client never chose, as simple-query strings sent one
// after the other. A change of client_encoding is a query of its own, sent first: PostgreSQL
// converts a query string from the client_encoding in force when the string arrives, so values
// in the same string (an application_name in SJIS, say) would be read in the backend's previous
// encoding -- an error, or silently another value.
struct ParameterSync {
    std::string encoding;  // "SET client_encoding = ...;" when it changes, else empty
    std::string rest;      // the other SET statements, in one string
    [[nodiscard]] bool empty() const { return encoding.empty() && rest.empty(); }
};
ParameterSync build_parameter_sync(const ParamValues& wanted, const ParamValues& defaults,
                                   const ParamValues& backend);
// Whether that sync would be empty: the check made for every link, which builds nothing.
bool parameters_in_sync(const ParamValues& wanted, const ParamValues& defaults,
                        const ParamValues& backend);

// Quotes a value as an SQL string literal that is valid whatever standard_conforming_strings and
// backslash_quote are, and that no byte sequence can escape under any client_encoding: E'...' for
// ASCII values, dollar quotes with a tag the value does not contain otherwise.
std::string quote_literal(std::string_view value);

}  // namespace pgtether
