#include "core/fd_budget.hpp"

#include <algorithm>

#include "core/config.hpp"

namespace pgtether {

namespace {

// Per worker: its event loop (epoll), the loop's wake-up eventfd and signal pipe, its mailbox.
constexpr std::uint64_t kPerWorker = 4;
// PgBouncer's allowance for the rest: listeners, logfile, DNS, the pidfile while written.
constexpr std::uint64_t kFixed = 10;

std::uint64_t servers_of(const Config& config, const DatabaseConfig& db, std::uint64_t users) {
    const std::uint64_t per_pool =
        static_cast<std::uint64_t>(std::max(0, db.pool_size.value_or(config.default_pool_size))) +
        static_cast<std::uint64_t>(
            std::max(0, db.reserve_pool_size.value_or(config.reserve_pool_size)));
    std::uint64_t servers = per_pool * (db.user.empty() ? users : 1);
    const int cap = db.max_db_connections.value_or(config.max_db_connections);
    if (cap > 0) servers = std::min(servers, static_cast<std::uint64_t>(cap));
    return servers;
}

}  // namespace

FdBudget expected_fd_use(const Config& config, std::size_t auth_file_users) {
    FdBudget budget;
    budget.clients = static_cast<std::uint64_t>(std::max(0, config.max_client_conn));
    const std::uint64_t users = std::max<std::uint64_t>(1, auth_file_users);
    for (const auto& db : config.databases)
        budget.servers += servers_of(config, db, users);
    budget.overhead = kFixed + kPerWorker * static_cast<std::uint64_t>(std::max(1, config.workers));
    return budget;
}

std::string fd_budget_line(std::uint64_t soft, std::uint64_t hard, const Config& config,
                           const FdBudget& budget) {
    return "kernel file descriptor limit: " + std::to_string(soft) +
           " (hard: " + std::to_string(hard) +
           "); max_client_conn: " + std::to_string(config.max_client_conn) +
           ", max expected fd use: " + std::to_string(budget.expected());
}

std::optional<std::string> fd_budget_warning(std::uint64_t soft, const FdBudget& budget) {
    if (budget.expected() <= soft) return std::nullopt;
    return "file descriptor limit " + std::to_string(soft) + " is below the expected use of " +
           std::to_string(budget.expected()) + " (" + std::to_string(budget.clients) +
           " clients, " + std::to_string(budget.servers) + " server connections, " +
           std::to_string(budget.overhead) +
           " other): connections beyond the limit wait in the listen queue; raise the limit "
           "(systemd LimitNOFILE=, ulimit -n) or lower max_client_conn or the pool sizes";
}

std::optional<std::string> AcceptFailureReports::on_failure(std::uint64_t now_ms,
                                                            const std::string& error) {
    const auto left_out = rate_.occurrence(now_ms);
    if (!left_out) return std::nullopt;
    return "accept() failed: " + error + ReportRate::left_out_note(*left_out) +
           "; not accepting new connections for " + std::to_string(kAcceptPauseMs) + " ms";
}

}  // namespace pgtether
