#include "proxy/server/peer_cancels.hpp"

#include <algorithm>

#include "core/config.hpp"
#include "proxy/net/log.hpp"
#include "core/peering.hpp"
#include "proxy/server/server_context.hpp"
#include "proxy/server/cancel_forwarder.hpp"

namespace pgtether {

int PeerCancels::limit(int pool_size, std::size_t workers) {
    const int share = pool_size / static_cast<int>(std::max<std::size_t>(workers, 1));
    return std::max(share, 1);
}

int PeerCancels::limit_for(const PeerConfig& peer) const {
    return limit(peer.pool_size.value_or(context_.config().default_pool_size),
                 context_.worker_count());
}

int PeerCancels::in_flight(int peer_id) const {
    int count = 0;
    context_.for_each_cancel([&](const CancelForwarder& forwarder) {
        if (forwarder.peer_id() == peer_id) ++count;
    });
    return count;
}

void PeerCancels::forward(const PeerConfig& peer, const protocol::CancelKey& key) {
    std::deque<Queued>& queued = queued_[peer.id];
    if (queued.empty() && in_flight(peer.id) < limit_for(peer)) {
        start(peer, key, context_.now_ms());
        return;
    }
    const int queue_limit =
        peer_cancel_queue_limit(context_.config().max_client_conn, context_.worker_count());
    if (queued_total() >= static_cast<std::size_t>(queue_limit)) {
        if (auto left_out = queue_full_reports_.occurrence(context_.now_ms())) {
            spdlog::warn(
                "dropped a cancel request for peer {}: {} cancel requests already wait "
                "for a turn, the most for max_client_conn{}",
                peer.id, queued_total(), ReportRate::left_out_note(*left_out));
        }
        return;
    }
    queued.push_back({key, context_.now_ms()});
}

std::size_t PeerCancels::queued_total() const {
    std::size_t total = 0;
    for (const auto& [peer_id, queued] : queued_)
        total += queued.size();
    return total;
}

void PeerCancels::warn_ttl_exhausted(const std::string& from) {
    // PgBouncer's words for the first; how many followed on the next line.
    if (auto left_out = ttl_reports_.occurrence(context_.now_ms())) {
        spdlog::warn("{}: failed to forward cancel request because its TTL was exhausted{}", from,
                     ReportRate::left_out_note(*left_out));
    }
}

void PeerCancels::warn_unknown_peer(const std::string& from, int peer_id) {
    if (auto left_out = unknown_peer_reports_.occurrence(context_.now_ms())) {
        spdlog::warn("{}: could not find peer {} to forward cancel request to{}", from, peer_id,
                     ReportRate::left_out_note(*left_out));
    }
}

void PeerCancels::warn_forward_failed(int peer_id, const std::string& host, int port,
                                      const std::string& why) {
    auto rate = failure_reports_.try_emplace(peer_id, kReportIntervalMs).first;
    if (auto left_out = rate->second.occurrence(context_.now_ms())) {
        spdlog::warn("cannot forward a cancel request to peer {} ({}:{}): {}{}", peer_id, host,
                     port, why, ReportRate::left_out_note(*left_out));
    }
}

void PeerCancels::start(const PeerConfig& peer, const protocol::CancelKey& key,
                        std::uint64_t arrived_ms) {
    // Deletes itself when done.
    auto* forwarder = new CancelForwarder(context_, peer, key, arrived_ms);
    forwarder->start();
}

void PeerCancels::on_forwarder_gone(int peer_id) { pump(peer_id); }

void PeerCancels::pump(int peer_id) {
    auto it = queued_.find(peer_id);
    if (it == queued_.end() || it->second.empty() || context_.shutting_down()) return;
    std::deque<Queued>& queued = it->second;
    const auto& peers = context_.config().peers;
    auto peer = peers.find(peer_id);
    if (peer == peers.end()) {
        spdlog::warn("dropped {} cancel requests for peer {}: it is no longer configured",
                     queued.size(), peer_id);
        queued.clear();
        return;
    }
    // A request whose time ran out while it waited is dropped, not sent late (the tick that
    // ended a forwarder may come before the one that would drop it).
    drop_expired(peer_id, queued, context_.now_ms());
    const int limit = limit_for(peer->second);
    for (int running = in_flight(peer_id); !queued.empty() && running < limit; ++running) {
        const Queued next = queued.front();
        queued.pop_front();
        start(peer->second, next.key, next.since_ms);
    }
}

void PeerCancels::drop_expired(int peer_id, std::deque<Queued>& queued, std::uint64_t now_ms) {
    const auto timeout_ms =
        duration_ms(context_.config().cancel_wait_timeout);
    // The same rule as for a forwarder that has not sent yet (core/peering.hpp).
    auto unsent = [&](const Queued& q) {
        CancelForwardTimes times;
        times.to_peer = true;
        times.arrived_ms = q.since_ms;
        return cancel_forward_expiry(times, now_ms, timeout_ms) == CancelForwardExpiry::NotSent;
    };
    std::size_t dropped = 0;
    while (!queued.empty() && unsent(queued.front())) {
        queued.pop_front();
        ++dropped;
    }
    if (dropped > 0) {
        spdlog::warn("dropped {} cancel requests for peer {}: not forwarded within "
                     "cancel_wait_timeout",
                     dropped, peer_id);
    }
}

void PeerCancels::janitor() {
    // pump drops what waited too long, and starts what fits: room may have appeared without a
    // forwarder ending (a reload raised the pool_size).
    for (const auto& [peer_id, queued] : queued_)
        pump(peer_id);
}

int PeerCancels::queued(int peer_id) const {
    auto it = queued_.find(peer_id);
    return it == queued_.end() ? 0 : static_cast<int>(it->second.size());
}

}  // namespace pgtether
