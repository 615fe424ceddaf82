// File descriptors: how many pgtether expects to use, and how it reports running out of them.
//
// PgBouncer logs its budget at start-up ("kernel file descriptor limit: 1024 (hard: 4096);
// max_client_conn: 100, max expected fd use: 172") and "accept() failed: Too many open files"
// when accept(2) hits the limit. pgtether does both, raises its soft limit to the hard one first,
// warns when the budget does not fit, and at the limit stops accepting for a moment (the waiting
// connections stay queued in the kernel) instead of letting a connection be dropped unseen.
// Pure: the limits and clock are passed in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/report_rate.hpp"

namespace pgtether {

struct Config;

struct FdBudget {
    std::uint64_t clients = 0;   // max_client_conn
    std::uint64_t servers = 0;   // server connections the pools may open
    std::uint64_t overhead = 0;  // listeners, event loops, logfile, lookups
    [[nodiscard]] std::uint64_t expected() const { return clients + servers + overhead; }
};

// PgBouncer's estimate (src/main.c, check_limits), with pgtether's additions: max_client_conn,
// plus for each [databases] entry its pool_size (else default_pool_size) and reserve pool,
// times the users of the auth_file (one for an entry with a forced user; at most the entry's
// max_db_connections when it has one), plus 10 and a few descriptors per worker.
[[nodiscard]] FdBudget expected_fd_use(const Config& config, std::size_t auth_file_users);

// The start-up lines: PgBouncer's LOG line, and a warning when the budget does not fit `soft`.
[[nodiscard]] std::string fd_budget_line(std::uint64_t soft, std::uint64_t hard,
                                         const Config& config, const FdBudget& budget);
[[nodiscard]] std::optional<std::string> fd_budget_warning(std::uint64_t soft,
                                                           const FdBudget& budget);

// How long a listener stops accepting after accept() failed for want of descriptors.
inline constexpr std::uint64_t kAcceptPauseMs = 100;
// At most one log line per this long about it (the counter counts every time).
inline constexpr std::uint64_t kAcceptFailureReportMs = 10'000;

// Rate limit for "accept() failed: Too many open files": the first occurrence is reported, then
// at most one line per kAcceptFailureReportMs, saying how many came in between.
class AcceptFailureReports {
  public:
    // An occurrence at `now_ms`: the line to log now, if any.
    [[nodiscard]] std::optional<std::string> on_failure(std::uint64_t now_ms,
                                                        const std::string& error);

  private:
    ReportRate rate_{kAcceptFailureReportMs};
};

}  // namespace pgtether
