#include "core/report_rate.hpp"

namespace pgtether {

std::optional<std::uint64_t> ReportRate::occurrence(std::uint64_t now_ms) {
    if (last_report_ms_ && now_ms - *last_report_ms_ < interval_ms_) {
        ++unreported_;
        return std::nullopt;
    }
    const std::uint64_t left_out = unreported_;
    last_report_ms_ = now_ms;
    unreported_ = 0;
    return left_out;
}

std::string ReportRate::left_out_note(std::uint64_t left_out) {
    if (left_out == 0) return "";
    return " (" + std::to_string(left_out) + " more since the last report)";
}

}  // namespace pgtether
