#include "core/client_limits.hpp"

namespace pgtether {

ClientLimits resolve_client_limits(const Config& config, const DatabaseConfig* database,
                                   const UserConfig* user) {
    auto own_or_global = [](const std::optional<int>& own, int global) {
        return own && *own > 0 ? *own : global;
    };
    ClientLimits limits;
    limits.database = own_or_global(
        database ? database->max_db_client_connections : std::nullopt,
        config.max_db_client_connections);
    limits.user = own_or_global(user ? user->max_user_client_connections : std::nullopt,
                                config.max_user_client_connections);
    return limits;
}

std::optional<std::string> client_limit_refusal(const ClientLimits& limits, int database_clients,
                                                int user_clients) {
    if (limits.database > 0 && database_clients > limits.database) {
        return "client connections exceeded (max_db_client_connections)";
    }
    if (limits.user > 0 && user_clients > limits.user) {
        return "client connections exceeded (max_user_client_connections)";
    }
    return std::nullopt;
}

}  // namespace pgtether
