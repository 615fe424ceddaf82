// Fuzzes the decoder of the tether's state probe (decode_state_probe, core/state_probe.hpp): the rows a
// backend returns to pgtether's probe of its session state. A backend is trusted, but what it
// returns decides whether a client stays tethered, so a row the probe would never return must be
// refused, not misread.
//
// Input: rows separated by '\n', fields by '\t', a field `\N` is NULL (COPY's text format, so
// seeds are readable). Checked for rows that decode:
//  * every advisory row is one lock, and the locks come back sorted (bigint keys first, each key
//    space in numeric order);
//  * only probed kinds are reported present, advisory locks exactly when there are locks;
//  * the locks written back as probe rows decode to the same locks;
//  * the report can be described for logs and the admin console.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/lock_ledger.hpp"
#include "core/state_probe.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;
using pgtether::fuzz::split;

namespace {

std::vector<Row> rows_of(std::string_view input) {
    std::vector<Row> rows;
    if (input.empty()) return rows;
    for (std::string_view line : split(input, '\n', 256)) {
        Row row;
        for (std::string_view field : split(line, '\t', 16)) {
            if (field == "\\N") {
                row.emplace_back(std::nullopt);
            } else {
                row.emplace_back(std::string(field));
            }
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

auto order(const AdvisoryLockKey& k) {
    if (k.is_bigint) return std::tuple(0, k.bigint_key(), std::int64_t{0}, !k.exclusive);
    return std::tuple(1, std::int64_t{static_cast<std::int32_t>(k.classid)},
                      std::int64_t{static_cast<std::int32_t>(k.objid)}, !k.exclusive);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::vector<Row> rows = rows_of(as_text(data, size));
    const std::optional<StateReport> report = decode_state_probe(rows);
    if (!report) return 0;

    std::size_t advisory_rows = 0;
    for (const Row& row : rows)
        advisory_rows += (row.size() == 5 && row[0] && *row[0] == "advisory") ? 1 : 0;
    require(report->locks.size() == advisory_rows, "one lock per advisory row");
    for (std::size_t i = 1; i < report->locks.size(); ++i)
        require(!(order(report->locks[i]) < order(report->locks[i - 1])), "locks are sorted");
    require((report->present & ~kProbedKinds) == 0, "only probed kinds are present");
    require(((report->present & kStateAdvisoryLock) != 0) == !report->locks.empty(),
            "advisory locks are present exactly when there are locks");

    std::vector<Row> written;
    for (const AdvisoryLockKey& key : report->locks) {
        written.push_back({std::string("advisory"), std::to_string(key.classid),
                           std::to_string(key.objid), std::string(key.is_bigint ? "1" : "2"),
                           std::string(key.exclusive ? "ExclusiveLock" : "ShareLock")});
    }
    const auto again = decode_state_probe(written);
    require(again && again->locks == report->locks, "locks written back decode the same");

    (void)describe_state(report->present | kStateLoad | kStateUnknown,
                         describe_locks(report->locks), report->summaries);
    return 0;
}
