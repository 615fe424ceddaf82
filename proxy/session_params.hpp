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

// Values for every tracked parameter; an empty optional means "not set / unknown".
class ParamValues {
public:
    [[nodiscard]] const std::optional<std::string>& get(TrackedParam p) const {
        return values_[static_cast<std::size_t>(p)];
    }
    void set(TrackedParam p, std::string_view value) {
        values_[static_cast<std::size_t>(p)] = std::string(value);
    }
    void clear(TrackedParam p) { values_[static_cast<std::size_t>(p)].reset(); }

private:
    std::array<std::optional<std::string>, kTrackedParamCount> values_;
};

// The SET statements (one simple-query string) that make a backend whose current values are
// `backend` show `wanted`, where `defaults` stands in for parameters the client never chose.
// Empty when nothing differs.
std::string build_parameter_sync_query(const ParamValues& wanted, const ParamValues& defaults,
                                       const ParamValues& backend);

// Quotes a value as an SQL string literal that is valid whatever standard_conforming_strings is.
std::string quote_literal(std::string_view value);

}  // namespace pgtether
