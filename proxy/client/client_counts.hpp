// The process's client connections per database and per user, for max_db_client_connections and
// max_user_client_connections (core/client_limits.hpp): every worker's clients together, as
// max_client_conn counts them, so the limits are limits of the process however clients spread
// over workers. A client is counted once its start-up packet names database and user and until
// it is gone; only login and departure come here, never the per-query path.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace pgtether {

class ClientCounts {
public:
    // Counts one more client of `database` and `user`; returns both counts, the newcomer
    // included.
    [[nodiscard]] std::pair<int, int> add(const std::string& database, const std::string& user);
    // A client counted with add() is gone.
    void remove(const std::string& database, const std::string& user);
    // The clients of `database` now (SHOW DATABASES' current_client_connections).
    [[nodiscard]] int database_clients(const std::string& database);
    // The clients logged in (or logging in) as `user` now (SHOW USERS).
    [[nodiscard]] int user_clients(const std::string& user);

private:
    std::mutex mutex_;
    std::map<std::string, int> databases_;
    std::map<std::string, int> users_;
};

}  // namespace pgtether
