// Log lines about events that anyone who can connect may cause in bulk (descriptors running out,
// cancel requests for peers that are unknown, full or not answering): the first occurrence is
// reported, then at most one line per interval, saying how many came in between. Counters, where
// there are any, still count every occurrence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pgtether {

class ReportRate {
  public:
    explicit ReportRate(std::uint64_t interval_ms) : interval_ms_(interval_ms) {}

    // An occurrence at `now_ms`: nullopt when it goes unreported; else report it now, with the
    // number of occurrences left out since the last report.
    [[nodiscard]] std::optional<std::uint64_t> occurrence(std::uint64_t now_ms);

    // " (N more since the last report)", or nothing for 0.
    [[nodiscard]] static std::string left_out_note(std::uint64_t left_out);

  private:
    std::uint64_t interval_ms_;
    std::optional<std::uint64_t> last_report_ms_;
    std::uint64_t unreported_ = 0;
};

}  // namespace pgtether
