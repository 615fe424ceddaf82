// A server connection's states, mirroring PgBouncer's SV_* lists (src/objects.c), as one table:
// which of the pool's lists a server in each state lives on, how SHOW SERVERS / SHOW POOLS count
// it, and which states may follow. Pure: proxy/server/server.cpp moves a server with
// Server::transition(), proxy/pool/pool.cpp keeps its lists and per-state counts from it, and
// proxy/pool/pool_census.cpp reads those counts (docs/architecture.md, "Servers").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace pgtether {

enum class ServerState : std::uint8_t {
    // ---- on the pool's used list (PgBouncer: SV_LOGIN, "new" in SHOW SERVERS) ----
    Connecting,    // resolving / connecting; nothing sent yet
    TlsAnswer,     // SSLRequest sent (server_tls_sslmode): its one-byte answer, then the handshake
    Login,         // StartupMessage sent: authenticating, ParameterStatus until ReadyForQuery
    // ---- on the used list, shown as "tested" (as before: PgBouncer runs it in SV_LOGIN) ----
    ConnectQuery,  // logged in; the database entry's connect_query runs
    // ---- on the pool's idle list ----
    Idle,          // SV_IDLE: clean, unlinked, nothing in flight; handed out as is
    Used,          // SV_USED: idle longer than server_check_delay with a server_check_query set:
                   // the check runs when it is handed out (the janitor moves Idle <-> Used)
    // ---- on the used list, linked to a client (SV_ACTIVE, "active") ----
    Linked,        // the client's messages and the backend's replies flow
    Syncing,       // pgtether's server_check_query or parameter sync for the client; its input waits
    Probing,       // the tether's probe (docs/advisory-locks.md): its answer is being consumed
    Relaying,      // a replication client's own backend (core/replication.hpp): the bytes pass
                   // both ways unread until either side leaves, then it closes
    // ---- on the used list, unlinked, pgtether's own queries (SV_TESTED, "tested") ----
    Resetting,     // server_reset_query (with tracking, unlock_all and its verification)
    Scrubbing,     // a client left mid-transaction or tethered: roll back, DISCARD ALL, verify
    Sweeping,      // the leak sweep: the periodic probe of a backend taken from the idle list
    // ---- on the used list (SV_BEING_CANCELED, "being_canceled") ----
    BeingCancelled,  // released, but a cancel request for its last client is still on its way
    // ---- on no list ----
    Closing,       // closed or closing: waiting for the handle to go
};
inline constexpr std::size_t kServerStateCount = static_cast<std::size_t>(ServerState::Closing) + 1;

// The pool list a server in a state lives on (Pool's idle_ and used_).
enum class PoolList : std::uint8_t { None, Idle, Used };

// The state column of SHOW SERVERS and the sv_* columns of SHOW POOLS (PgBouncer's names).
enum class ServerCensus : std::uint8_t { Login, Idle, Used, Tested, Active, BeingCanceled, Hidden };
inline constexpr std::size_t kServerCensusCount = static_cast<std::size_t>(ServerCensus::Hidden);

// What the backend's bytes are in a state: whose reader takes them (Server::on_stream_data).
enum class ServerInput : std::uint8_t {
    None,         // not read: nothing asked yet (connecting), or closing
    TlsAnswer,    // the one-byte answer to SSLRequest
    Login,        // the login exchange up to ReadyForQuery
    OwnQuery,     // the replies to pgtether's own query: consumed, never forwarded
    Client,       // the linked client's replies: forwarded
    Relay,        // a replication client's stream: forwarded unread
    Unsolicited,  // unasked for (idle): notices, parameter changes, a FATAL
};

// How long the janitor lets a server stay in a state (proxy/pool/janitor.cpp).
enum class ServerDeadline : std::uint8_t {
    None,
    Connect,    // server_connect_timeout, counted from the connect
    Login,      // server_connect_timeout, counted from when the connection was made
    CleanUp,    // pgtether's own work on an unlinked server (janitor::kCleanupTimeoutMs)
    ForClient,  // pgtether's query for a client: the same, once the client has left
};

struct ServerStateInfo {
    const char* name;      // for logs and docs
    PoolList list;
    ServerCensus census;
    bool linked;           // a client is linked (or was, until it left while pgtether's query ran)
    ServerInput input;
    ServerDeadline deadline;
    std::uint32_t next;    // the states that may follow (bit per ServerState)
};

[[nodiscard]] const ServerStateInfo& state_info(ServerState state);
[[nodiscard]] inline const char* to_string(ServerState state) { return state_info(state).name; }
// "new", "idle", "used", "tested", "active", "being_canceled"; nullptr for Hidden.
[[nodiscard]] const char* census_name(ServerCensus census);
[[nodiscard]] bool may_transition(ServerState from, ServerState to);

// Servers of a pool counted per state; the census columns are sums over states.
class ServerStateCounts {
public:
    void add(ServerState state) { ++counts_[index(state)]; }
    void remove(ServerState state) { --counts_[index(state)]; }
    void move(ServerState from, ServerState to) {
        remove(from);
        add(to);
    }
    [[nodiscard]] int in(ServerState state) const { return counts_[index(state)]; }
    [[nodiscard]] int in(ServerCensus census) const;

private:
    static std::size_t index(ServerState state) { return static_cast<std::size_t>(state); }
    std::array<int, kServerStateCount> counts_{};
};

}  // namespace pgtether
