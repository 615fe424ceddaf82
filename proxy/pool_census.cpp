#include "proxy/pool_census.hpp"

#include "proxy/client.hpp"
#include "proxy/pool.hpp"
#include "proxy/server.hpp"
#include "proxy/worker.hpp"

namespace pgtether {

const char* server_state_name(Worker& worker, Server& server) {
    switch (server.state()) {
        case Server::State::Connecting:
        case Server::State::Login:
            return "new";
        case Server::State::Active:
            return "active";
        case Server::State::Cleaning:
            return server.waiting_for_cancels() ? "being_canceled" : "tested";
        case Server::State::Idle: {
            const auto& config = worker.config();
            auto delay_ms = static_cast<std::uint64_t>(config.server_check_delay.count() / 1000);
            bool needs_check = !config.server_check_query.empty() &&
                               worker.now_ms() - server.idle_since_ms() >= delay_ms;
            return needs_check ? "used" : "idle";
        }
        case Server::State::Closing:
            return nullptr;
    }
    return nullptr;
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

std::map<const Pool*, PoolCensus> take_census(Worker& worker) {
    std::map<const Pool*, PoolCensus> census;
    for (const auto& [key, pool] : worker.pools())
        census[pool.get()];
    const std::uint64_t now = worker.now_ms();
    worker.for_each_client([&](Client& client) {
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
    worker.for_each_server([&](Server& server) {
        const char* state = server_state_name(worker, server);
        if (!state) return;
        auto& c = census[&server.pool()];
        std::string_view s = state;
        if (s == "active") {
            ++c.sv_active;
        } else if (s == "idle") {
            ++c.sv_idle;
        } else if (s == "used") {
            ++c.sv_used;
        } else if (s == "tested") {
            ++c.sv_tested;
        } else if (s == "new") {
            ++c.sv_login;
        } else if (s == "being_canceled") {
            ++c.sv_being_canceled;
        }
        if (worker.cancels_in_flight_for(server) > 0) ++c.sv_active_cancel;
        if (server.client() && server.client()->tethered()) ++c.sv_tethered;
    });
    return census;
}

}  // namespace pgtether
