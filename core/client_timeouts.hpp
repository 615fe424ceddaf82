// The timeouts that apply to one pool's clients: the [pgbouncer] values, overridden per user
// (query_timeout, idle_transaction_timeout, client_idle_timeout: PgBouncer 1.24;
// transaction_timeout: 1.25) and, for
// query_wait_timeout, per database and per user (PgBouncer 1.26), as pure resolution.
//
// PgBouncer reads an entry's query_timeout, idle_transaction_timeout, transaction_timeout and
// client_idle_timeout only when > 0 (0 there means "the global value"); an entry's query_wait_timeout of 0 turns the
// limit off and -1 means "not set", as PgBouncer 1.26 documents. A user's value wins over the
// database's.
#pragma once

#include "core/config.hpp"

namespace pgtether {

struct ClientTimeouts {
    Duration query_timeout{0};
    Duration idle_transaction_timeout{0};
    Duration transaction_timeout{0};  // PgBouncer 1.25
    Duration client_idle_timeout{0};
    Duration query_wait_timeout{0};

    bool operator==(const ClientTimeouts&) const = default;
};

// `database` and `user` may be null (no entry). `user` is the pool's user: the client's, or the
// database's forced `user=`.
[[nodiscard]] ClientTimeouts resolve_client_timeouts(const Config& config,
                                                     const DatabaseConfig* database,
                                                     const UserConfig* user);

}  // namespace pgtether
