#include "core/client_timeouts.hpp"

namespace pgtether {

ClientTimeouts resolve_client_timeouts(const Config& config, const DatabaseConfig* database,
                                       const UserConfig* user) {
    // PgBouncer 1.24's per-user timeouts: only a positive value overrides.
    auto positive_or = [](const std::optional<Duration>& own, Duration global) {
        return own && own->count() > 0 ? *own : global;
    };
    // PgBouncer 1.26's query_wait_timeout: 0 is a value (off), negative is "not set".
    auto set = [](const std::optional<Duration>& own) { return own && own->count() >= 0; };
    ClientTimeouts t;
    t.query_timeout = positive_or(user ? user->query_timeout : std::nullopt, config.query_timeout);
    t.idle_transaction_timeout =
        positive_or(user ? user->idle_transaction_timeout : std::nullopt,
                    config.idle_transaction_timeout);
    t.transaction_timeout = positive_or(user ? user->transaction_timeout : std::nullopt,
                                        config.transaction_timeout);
    t.client_idle_timeout = positive_or(user ? user->client_idle_timeout : std::nullopt,
                                        config.client_idle_timeout);
    if (user && set(user->query_wait_timeout)) {
        t.query_wait_timeout = *user->query_wait_timeout;
    } else if (database && set(database->query_wait_timeout)) {
        t.query_wait_timeout = *database->query_wait_timeout;
    } else {
        t.query_wait_timeout = config.query_wait_timeout;
    }
    return t;
}

}  // namespace pgtether
