// core/report_rate.hpp: the first occurrence is reported, then at most one per interval, each
// report counting what was left out since the previous one.
#include "core/report_rate.hpp"

#include <doctest/doctest.h>

using namespace pgtether;

TEST_CASE("ReportRate: the first occurrence, then one per interval with the count left out") {
    ReportRate rate(10'000);
    struct Row {
        std::uint64_t now_ms;
        std::optional<std::uint64_t> reported;  // nullopt: not reported
    };
    const Row rows[] = {
        {1'000, 0},             // the first, at once
        {1'001, std::nullopt},  // within the interval: counted
        {5'000, std::nullopt},
        {10'999, std::nullopt},
        {11'000, 3},  // the interval has passed: reported with the three left out
        {11'000, std::nullopt},
        {40'000, 1},  // a long quiet: reported at once, with the one before it
        {60'000, 0},
    };
    for (const Row& row : rows) {
        CAPTURE(row.now_ms);
        CHECK(rate.occurrence(row.now_ms) == row.reported);
    }
}

TEST_CASE("ReportRate::left_out_note: nothing for none, a count otherwise") {
    CHECK(ReportRate::left_out_note(0).empty());
    CHECK(ReportRate::left_out_note(199) == " (199 more since the last report)");
}
