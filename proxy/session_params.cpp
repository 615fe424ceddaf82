#include "proxy/session_params.hpp"

#include <strings.h>

namespace pgtether {

namespace {

constexpr std::array<std::string_view, kTrackedParamCount> kNames = {
    "client_encoding", "DateStyle", "TimeZone", "IntervalStyle", "standard_conforming_strings",
    "application_name"};

}  // namespace

std::string_view tracked_param_name(TrackedParam p) { return kNames[static_cast<std::size_t>(p)]; }

std::optional<TrackedParam> find_tracked_param(std::string_view name) {
    for (std::size_t i = 0; i < kNames.size(); ++i) {
        if (name.size() == kNames[i].size() &&
            strncasecmp(name.data(), kNames[i].data(), name.size()) == 0) {
            return static_cast<TrackedParam>(i);
        }
    }
    return std::nullopt;
}

void ParamValues::replace(std::size_t i, std::string_view value) {
    // Values come from protocol messages, whose lengths are 32-bit; so are the offsets.
    std::uint32_t start = begin(i);
    std::uint32_t old_size = ends_[i] - start;
    values_.replace(start, old_size, value);
    auto size = static_cast<std::uint32_t>(value.size());
    for (std::size_t j = i; j < kTrackedParamCount; ++j) ends_[j] = ends_[j] - old_size + size;
}

std::string quote_literal(std::string_view value) {
    // E'' strings treat backslash as an escape regardless of standard_conforming_strings, so
    // doubling both quotes and backslashes is always right.
    std::string out = "E'";
    for (char c : value) {
        if (c == '\'' || c == '\\') out.push_back(c);
        out.push_back(c);
    }
    out.push_back('\'');
    return out;
}

std::string build_parameter_sync_query(const ParamValues& wanted, const ParamValues& defaults,
                                       const ParamValues& backend) {
    std::string sql;
    for (std::size_t i = 0; i < kTrackedParamCount; ++i) {
        auto p = static_cast<TrackedParam>(i);
        auto want = wanted.get(p);
        if (!want) want = defaults.get(p);
        if (!want || want == backend.get(p)) continue;
        sql += "SET ";
        sql += kNames[i];
        sql += " = ";
        sql += quote_literal(*want);
        sql += ';';
    }
    return sql;
}

}  // namespace pgtether
