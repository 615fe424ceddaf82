#include "proxy/pool/pool_census.hpp"

#include "proxy/client/client.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_context.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

const char* server_state_name(const Server& server) {
    return census_name(state_info(server.state()).census);
}

const char* client_state_name(const Client& client) {
    switch (client.state()) {
        case Client::State::Idle:
        case Client::State::Active:
            return "active";
        case Client::State::Waiting:
        case Client::State::WelcomeWait:
            return "waiting";
        case Client::State::Startup:
        case Client::State::AuthLookup:
        case Client::State::Auth:
        case Client::State::Closing:
            return nullptr;
    }
    return nullptr;
}

std::map<const Pool*, PoolCensus> take_census(PoolContext& context) {
    std::map<const Pool*, PoolCensus> census;
    for (const auto& [key, pool] : context.pools())
        census[pool.get()];
    const std::uint64_t now = context.now_ms();
    context.for_each_client([&](Client& client) {
        Pool* pool = client.pool();
        const char* state = client_state_name(client);
        if (!pool || !state) return;
        auto& c = census[pool];
        if (client.state() == Client::State::Waiting ||
            client.state() == Client::State::WelcomeWait) {
            ++c.cl_waiting;
            auto waited = (now - client.state_since_ms()) * 1000;
            if (waited > c.maxwait_us) c.maxwait_us = waited;
        } else if (client.server()) {
            ++c.cl_linked;
        } else {
            ++c.cl_idle;
        }
        if (client.tethered()) {
            ++c.cl_tethered;
            c.held_locks += static_cast<int>(client.lock_ledger().entries().size());
            for (std::uint32_t kind = 1; kind <= kStateUnknown; kind <<= 1) {
                if ((client.tether_kinds() & kind & kTetherKinds) != 0) ++c.tethered_by_kind[kind];
            }
        }
    });
    for (const auto& [key, pool] : context.pools()) {
        const ServerStateCounts& counts = pool->state_counts();
        auto& c = census[pool.get()];
        c.sv_active = counts.in(ServerCensus::Active);
        c.sv_idle = counts.in(ServerCensus::Idle);
        c.sv_used = counts.in(ServerCensus::Used);
        c.sv_tested = counts.in(ServerCensus::Tested);
        c.sv_login = counts.in(ServerCensus::Login);
        c.sv_being_canceled = counts.in(ServerCensus::BeingCanceled);
    }
    context.for_each_server([&](Server& server) {
        if (server.state() == Server::State::Closing) return;
        auto& c = census[&server.pool()];
        if (context.cancels_in_flight_for(server) > 0) ++c.sv_active_cancel;
        if (server.client() && server.client()->tethered()) ++c.sv_tethered;
    });
    return census;
}

}  // namespace pgtether
