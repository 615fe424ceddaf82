// Counting clients and servers of every pool by state, in PgBouncer's terms, for SHOW POOLS,
// SHOW CLIENTS / SERVERS and the metrics endpoint, so all three always agree.
#pragma once

#include <cstdint>
#include <map>

namespace pgtether {

class Client;
class Pool;
class Server;
class PoolContext;

// PgBouncer's server states (SHOW SERVERS' state column), read from the server's state
// (core/server_state.hpp, ServerCensus):
//   active          linked to a client (Linked, Syncing, Probing)
//   idle            in the pool, usable at once (Idle)
//   used            idle longer than server_check_delay: server_check_query runs before reuse (Used)
//   tested          running pgtether's own queries (ConnectQuery, Resetting, Scrubbing, Sweeping)
//   new             connecting or logging in (Connecting, TlsAnswer, Login)
//   being_canceled  released, but a cancel request for it is still on its way (BeingCancelled)
// nullptr for a server that is closing (not shown).
const char* server_state_name(const Server& server);

// PgBouncer's client states (SHOW CLIENTS): "active" (logged in, with or without a server),
// "waiting" (has a request, or waits for the pool's first server). nullptr for clients that are
// logging in or closing, which PgBouncer does not list either.
const char* client_state_name(const Client& client);

struct PoolCensus {
    int cl_linked = 0;   // active clients with a server
    int cl_idle = 0;     // active clients without one
    int cl_waiting = 0;  // waiting for a server
    int cl_tethered = 0;
    int sv_active = 0;
    int sv_idle = 0;
    int sv_used = 0;
    int sv_tested = 0;
    int sv_login = 0;
    int sv_being_canceled = 0;
    int sv_active_cancel = 0;      // servers a cancel request is being forwarded to
    int sv_tethered = 0;           // servers linked to a tethered client
    int held_locks = 0;            // advisory locks the pool's tethered clients hold
    // Tethered clients per reason (a client tethered for two reasons counts in both).
    std::map<std::uint32_t, int> tethered_by_kind;  // StateKind → clients
    std::uint64_t maxwait_us = 0;  // how long the oldest waiting client has waited
};

std::map<const Pool*, PoolCensus> take_census(PoolContext& context);

}  // namespace pgtether
