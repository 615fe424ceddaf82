#include "core/peering.hpp"

#include <algorithm>
#include <array>

namespace pgtether {

namespace {

using Bytes = std::array<std::uint8_t, 8>;

Bytes to_bytes(const protocol::CancelKey& key) {
    auto pid = static_cast<std::uint32_t>(key.pid);
    auto secret = static_cast<std::uint32_t>(key.secret);
    Bytes b{};
    for (int i = 0; i < 4; ++i) {
        b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(pid >> (24 - 8 * i));
        b[static_cast<std::size_t>(4 + i)] = static_cast<std::uint8_t>(secret >> (24 - 8 * i));
    }
    return b;
}

protocol::CancelKey from_bytes(const Bytes& b) {
    std::uint32_t pid = 0;
    std::uint32_t secret = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        pid = (pid << 8) | b[i];
        secret = (secret << 8) | b[4 + i];
    }
    return {static_cast<std::int32_t>(pid), static_cast<std::int32_t>(secret)};
}

}  // namespace

protocol::CancelKey stamp_cancel_key(protocol::CancelKey random, int peer_id) {
    Bytes b = to_bytes(random);
    if (peer_id > 0) {
        b[1] = static_cast<std::uint8_t>(peer_id & 0xff);
        b[2] = static_cast<std::uint8_t>((peer_id >> 8) & 0xff);
        b[7] |= kCancelTtlMask;
    }
    b[0] &= 0x7f;
    return from_bytes(b);
}

int cancel_key_peer(const protocol::CancelKey& key) {
    Bytes b = to_bytes(key);
    return b[1] | (b[2] << 8);
}

CancelRoute route_cancel(const protocol::CancelKey& key, int own_peer_id) {
    if (own_peer_id <= 0) return {CancelRoute::Action::Local, 0, key};
    Bytes b = to_bytes(key);
    int peer = cancel_key_peer(key);
    if (peer == own_peer_id) {
        b[7] |= kCancelTtlMask;
        return {CancelRoute::Action::Local, peer, from_bytes(b)};
    }
    if ((b[7] & kCancelTtlMask) == 0) return {CancelRoute::Action::Drop, peer, key};
    b[7] = static_cast<std::uint8_t>(b[7] - 1);  // the TTL is the lowest bits: no borrow
    return {CancelRoute::Action::Forward, peer, from_bytes(b)};
}

int peer_cancel_queue_limit(int max_client_conn, std::size_t workers) {
    const auto share =
        static_cast<std::size_t>(std::max(max_client_conn, 0)) / std::max<std::size_t>(workers, 1);
    return static_cast<int>(std::max<std::size_t>(share, 1));
}

CancelForwardExpiry cancel_forward_expiry(const CancelForwardTimes& times, std::uint64_t now_ms,
                                          std::uint64_t timeout_ms) {
    if (timeout_ms == 0) return CancelForwardExpiry::Keep;  // cancel_wait_timeout = 0: no limit
    if (!times.sent_ms) {
        return now_ms - times.arrived_ms >= timeout_ms ? CancelForwardExpiry::NotSent
                                                       : CancelForwardExpiry::Keep;
    }
    if (times.to_peer && now_ms - *times.sent_ms >= timeout_ms) {
        return CancelForwardExpiry::SentToPeerUnanswered;
    }
    return CancelForwardExpiry::Keep;
}

}  // namespace pgtether
