#include "core/server_state.hpp"

namespace pgtether {

namespace {

using S = ServerState;

constexpr std::uint32_t bit(S state) { return 1u << static_cast<unsigned>(state); }

template <typename... States>
constexpr std::uint32_t bits(States... states) {
    return (bit(states) | ...);
}

// Linking a server to a client (Server::link; a check or parameter sync follows from Linked).
constexpr std::uint32_t kLinking = bit(S::Linked);
// Where Pool::release can send a server: closed (retired, server_lifetime, PAUSE), waiting for a
// cancel still in flight, through server_reset_query, or onto the idle list, from which the
// pool's once-per-loop hand-off (Pool::serve_waiting_clients) links it to a waiting client.
constexpr std::uint32_t kReleased = bits(S::Closing, S::BeingCancelled, S::Resetting, S::Idle);

// Indexed by ServerState.
using In = ServerInput;
using Due = ServerDeadline;
constexpr std::array<ServerStateInfo, kServerStateCount> kStates = {{
    {"connecting", PoolList::Used, ServerCensus::Login, false, In::None, Due::Connect,
     bits(S::TlsAnswer, S::Login, S::Closing)},
    {"tls answer", PoolList::Used, ServerCensus::Login, false, In::TlsAnswer, Due::Login,
     bits(S::Login, S::Closing)},
    // A replication client's backend goes straight to it (Relaying), never to the idle list.
    {"login", PoolList::Used, ServerCensus::Login, false, In::Login, Due::Login,
     bits(S::ConnectQuery, S::Relaying) | kReleased},
    // A role check (servers that do not report it) may come before connect_query.
    {"connect query", PoolList::Used, ServerCensus::Tested, false, In::OwnQuery, Due::CleanUp,
     bits(S::ConnectQuery) | kReleased},
    {"idle", PoolList::Idle, ServerCensus::Idle, false, In::Unsolicited, Due::None,
     bits(S::Used, S::Sweeping, S::Closing) | kLinking},
    {"used", PoolList::Idle, ServerCensus::Used, false, In::Unsolicited, Due::None,
     bits(S::Idle, S::Sweeping, S::Closing) | kLinking},
    // A transaction ends: probe, keep (stay), release; a client leaves: release or scrub.
    {"linked", PoolList::Used, ServerCensus::Active, true, In::Client, Due::None,
     bits(S::Syncing, S::Probing, S::Scrubbing) | kReleased},
    // Done: forward (or sync after the check); the client left meanwhile: release or scrub.
    {"syncing", PoolList::Used, ServerCensus::Active, true, In::OwnQuery, Due::ForClient,
     bits(S::Linked, S::Scrubbing) | kReleased},
    {"probing", PoolList::Used, ServerCensus::Active, true, In::OwnQuery, Due::ForClient,
     bits(S::Linked, S::Scrubbing) | kReleased},
    // Closed when either side leaves: never reused (core/replication.hpp).
    {"relaying", PoolList::Used, ServerCensus::Active, true, In::Relay, Due::None,
     bit(S::Closing)},
    {"resetting", PoolList::Used, ServerCensus::Tested, false, In::OwnQuery, Due::CleanUp,
     kReleased},
    // A cancelled scrub runs again.
    {"scrubbing", PoolList::Used, ServerCensus::Tested, false, In::OwnQuery, Due::CleanUp,
     bits(S::Scrubbing) | kReleased},
    // A leak found is scrubbed.
    {"sweeping", PoolList::Used, ServerCensus::Tested, false, In::OwnQuery, Due::CleanUp,
     bits(S::Scrubbing) | kReleased},
    {"being cancelled", PoolList::Used, ServerCensus::BeingCanceled, false, In::Unsolicited,
     Due::CleanUp, kReleased & ~bit(S::BeingCancelled)},
    {"closing", PoolList::None, ServerCensus::Hidden, false, In::None, Due::None, 0},
}};

}  // namespace

const ServerStateInfo& state_info(ServerState state) {
    return kStates[static_cast<std::size_t>(state)];
}

const char* census_name(ServerCensus census) {
    switch (census) {
        case ServerCensus::Login: return "new";
        case ServerCensus::Idle: return "idle";
        case ServerCensus::Used: return "used";
        case ServerCensus::Tested: return "tested";
        case ServerCensus::Active: return "active";
        case ServerCensus::BeingCanceled: return "being_canceled";
        case ServerCensus::Hidden: return nullptr;
    }
    return nullptr;
}

bool may_transition(ServerState from, ServerState to) {
    return (state_info(from).next & bit(to)) != 0;
}

int ServerStateCounts::in(ServerCensus census) const {
    int sum = 0;
    for (std::size_t i = 0; i < kServerStateCount; ++i) {
        if (kStates[i].census == census) sum += counts_[i];
    }
    return sum;
}

}  // namespace pgtether
