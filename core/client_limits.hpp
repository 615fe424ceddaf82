// Client connection limits per database and per user (PgBouncer 1.24's
// max_db_client_connections and max_user_client_connections), as pure decisions.
//
// PgBouncer counts a client towards its database and its login user as soon as the start-up
// packet names them, before authentication, and refuses the one that takes a count past its
// limit; max_client_conn, the limit of the whole process, is checked earlier, at accept. The
// counts are the process's (every worker's clients together), like max_client_conn's.
#pragma once

#include <optional>
#include <string>

#include "core/config.hpp"

namespace pgtether {

// The limits that apply to a client of `database` logged in as `user`; 0 = none.
struct ClientLimits {
    int database = 0;
    int user = 0;

    bool operator==(const ClientLimits&) const = default;
};

// An entry's own value when it is > 0, else the global one, as PgBouncer resolves them
// (database_max_client_connections, user_client_max_connections). `database` / `user` may be
// null (no [databases] entry, no [users] entry).
[[nodiscard]] ClientLimits resolve_client_limits(const Config& config,
                                                 const DatabaseConfig* database,
                                                 const UserConfig* user);

// The refusal of a client whose arrival made the counts `database_clients` and `user_clients`
// (the newcomer included), or nullopt when both are within their limits. The database limit is
// checked first, as in PgBouncer. The text is PgBouncer's.
[[nodiscard]] std::optional<std::string> client_limit_refusal(const ClientLimits& limits,
                                                              int database_clients,
                                                              int user_clients);

}  // namespace pgtether
