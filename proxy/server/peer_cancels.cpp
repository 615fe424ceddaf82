#include "proxy/server/peer_cancels.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/config.hpp"
#include "proxy/daemon/worker.hpp"
#include "proxy/daemon/worker_group.hpp"
#include "proxy/server/cancel_forwarder.hpp"

namespace pgtether {

int PeerCancels::limit(int pool_size, std::size_t workers) {
    const int share = pool_size / static_cast<int>(std::max<std::size_t>(workers, 1));
    return std::max(share, 1);
}

int PeerCancels::limit_for(const PeerConfig& peer) const {
    return limit(peer.pool_size.value_or(worker_.config().default_pool_size),
                 worker_.group().size());
}

void PeerCancels::forward(const PeerConfig& peer, const protocol::CancelKey& key) {
    Peer& state = peers_[peer.id];
    if (state.in_flight < limit_for(peer) && state.queued.empty()) {
        start(peer, key);
        return;
    }
    state.queued.push_back({key, worker_.now_ms()});
}

void PeerCancels::start(const PeerConfig& peer, const protocol::CancelKey& key) {
    ++peers_[peer.id].in_flight;
    auto* forwarder = new CancelForwarder(worker_, peer, key);  // deletes itself when done
    forwarder->start();
}

void PeerCancels::on_forwarder_gone(int peer_id) {
    auto it = peers_.find(peer_id);
    if (it == peers_.end()) return;  // cleared by a shutdown meanwhile
    if (it->second.in_flight > 0) --it->second.in_flight;
    pump(peer_id);
}

void PeerCancels::pump(int peer_id) {
    auto it = peers_.find(peer_id);
    if (it == peers_.end() || worker_.shutting_down()) return;
    const auto& peers = worker_.config().peers;
    auto peer = peers.find(peer_id);
    if (peer == peers.end()) {
        if (!it->second.queued.empty()) {
            spdlog::warn("dropped {} cancel requests for peer {}: it is no longer configured",
                         it->second.queued.size(), peer_id);
        }
        it->second.queued.clear();
        return;
    }
    while (!it->second.queued.empty() && it->second.in_flight < limit_for(peer->second)) {
        const protocol::CancelKey key = it->second.queued.front().key;
        it->second.queued.pop_front();
        start(peer->second, key);
    }
}

void PeerCancels::janitor(std::uint64_t now_ms) {
    const auto timeout_ms =
        static_cast<std::uint64_t>(worker_.config().cancel_wait_timeout.count() / 1000);
    for (auto& [peer_id, state] : peers_) {
        std::size_t dropped = 0;
        while (timeout_ms != 0 && !state.queued.empty() &&
               now_ms - state.queued.front().since_ms >= timeout_ms) {
            state.queued.pop_front();
            ++dropped;
        }
        if (dropped > 0) {
            spdlog::warn("dropped {} cancel requests for peer {}: not forwarded within "
                         "cancel_wait_timeout",
                         dropped, peer_id);
        }
        // Room may have appeared without a forwarder ending: a reload raised the pool_size.
        pump(peer_id);
    }
}

int PeerCancels::queued(int peer_id) const {
    auto it = peers_.find(peer_id);
    return it == peers_.end() ? 0 : static_cast<int>(it->second.queued.size());
}

}  // namespace pgtether
