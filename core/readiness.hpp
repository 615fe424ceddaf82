// Whether pgtether is ready for new clients: the verdict behind GET /readyz on the metrics port
// (docs/admin.md, "Health endpoints"). Pure: the worker gathers what it already knows (shutdown,
// PAUSE/KILL/DISABLE, each pool's record of failed server logins) and this decides; a probe never
// opens a connection to PostgreSQL.
//
// "A database is reachable" means: no pool of it is in a streak of failed logins of the
// Unreachable kind (core/login_retry.hpp: no connection, a connection that broke during login,
// 57P01/57P02/57P03) whose last failure is more recent than server_login_retry. A login the
// server refused (password, unknown database, limits) is a reachable server with a wrong
// setting: it shows in the logs and SHOW POOLS, not here, or one user's bad password would take
// every database of the process out of service. A database no client has used yet has no record
// and counts as reachable: a fresh instance must become ready before anyone connects. A failure
// is forgotten after server_login_retry without a new attempt, so an instance that a load
// balancer stopped sending clients to does not stay unready for ever.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pgtether {

enum class Lifecycle {
    Serving,
    Draining,      // SHUTDOWN WAIT_FOR_CLIENTS, SIGTERM: connected clients are served, no new ones
    ShuttingDown,  // SHUTDOWN [WAIT_FOR_SERVERS], SIGINT, SIGQUIT
};

// One pool's record of failed server logins since its last successful one.
struct PoolLoginRecord {
    std::string database;  // the name clients use
    std::string user;
    bool failing_unreachable = false;  // the streak's last failure was of the Unreachable kind
    std::uint64_t failing_since_ms = 0;
    std::uint64_t last_failure_ms = 0;
    std::string error;  // the last failure's message
};

struct ReadinessInputs {
    std::uint64_t now_ms = 0;
    // How long a failed login counts (server_login_retry).
    std::uint64_t failure_memory_ms = 15'000;
    Lifecycle lifecycle = Lifecycle::Serving;
    bool paused_all = false;                      // PAUSE without a database
    std::vector<std::string> paused_databases;    // PAUSE db, KILL db
    std::vector<std::string> disabled_databases;  // DISABLE db
    std::vector<PoolLoginRecord> pools;           // only pools with a failure streak matter
};

struct Readiness {
    bool ready = true;
    // Every reason it is not ready, one line each ("paused", "database \"app\" unreachable ..."),
    // in a stable order; empty when ready.
    std::vector<std::string> problems;
};

[[nodiscard]] Readiness decide_readiness(const ReadinessInputs& inputs);

}  // namespace pgtether
