#include "core/readiness.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace pgtether {

namespace {

std::string quoted(const std::string& name) {
    return "\"" + name + "\"";
}

// A problem is one line of the plain-text answer: a server's multi-line message is folded.
std::string one_line(std::string text) {
    std::replace_if(
        text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
    return text;
}

}  // namespace

Readiness decide_readiness(const ReadinessInputs& in) {
    Readiness out;
    switch (in.lifecycle) {
        case Lifecycle::Serving:
            break;
        case Lifecycle::Draining:
            out.problems.emplace_back(
                "shutting down (WAIT_FOR_CLIENTS): no new clients, waiting for connected ones "
                "to leave");
            break;
        case Lifecycle::ShuttingDown:
            out.problems.emplace_back("shutting down: no new clients");
            break;
    }
    if (in.paused_all) out.problems.emplace_back("paused (PAUSE): clients wait for RESUME");
    const std::set<std::string> paused(in.paused_databases.begin(), in.paused_databases.end());
    for (const auto& name : paused) {
        out.problems.push_back("database " + quoted(one_line(name)) + " paused (PAUSE or KILL)");
    }
    const std::set<std::string> disabled(in.disabled_databases.begin(),
                                         in.disabled_databases.end());
    for (const auto& name : disabled) {
        out.problems.push_back("database " + quoted(one_line(name)) + " disabled (DISABLE)");
    }

    // Per database, the pool whose unreachable streak is the most recent (with several users,
    // or several workers, each has its own pool of the database).
    std::map<std::string, const PoolLoginRecord*> unreachable;
    for (const auto& pool : in.pools) {
        if (!pool.failing_unreachable) continue;
        // A record from the future (another worker's clock) counts as now.
        const std::uint64_t age =
            in.now_ms > pool.last_failure_ms ? in.now_ms - pool.last_failure_ms : 0;
        if (age >= in.failure_memory_ms) continue;
        auto& worst = unreachable[pool.database];
        if (!worst || pool.last_failure_ms > worst->last_failure_ms) worst = &pool;
    }
    for (const auto& [name, pool] : unreachable) {
        const std::uint64_t since =
            in.now_ms > pool->failing_since_ms ? in.now_ms - pool->failing_since_ms : 0;
        std::string line = "database " + quoted(one_line(name)) +
                           " unreachable: server logins failing for " +
                           std::to_string(since / 1000) + " s";
        if (!pool->error.empty()) line += ": " + one_line(pool->error);
        out.problems.push_back(std::move(line));
    }
    out.ready = out.problems.empty();
    return out;
}

}  // namespace pgtether
