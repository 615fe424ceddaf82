// PgBouncer-compatible peering (PgBouncer 1.19+, `peer_id` and `[peers]`): which process owns a
// cancel key. Pure: the proxy stamps the keys it hands out and carries out the route computed
// here for every CancelRequest it receives.
//
// Several poolers behind one TCP load balancer (or sharing a port with so_reuseport) each see a
// share of the CancelRequests, which arrive on connections of their own (protocol §55.2.8), so a
// cancel often lands on a process that does not know its key. PgBouncer's answer, which pgtether
// follows byte for byte so that pgtether and PgBouncer processes can peer with each other: a
// process with a peer_id writes it into every cancel key it issues, and a process that receives
// a key with another peer's id forwards the CancelRequest to that peer.
//
// The 8 key bytes as they travel on the wire (BackendKeyData: process id, then secret, both
// big-endian Int32), numbered 0..7:
//   byte 0        bit 7 cleared, so the "process id" is positive (pg_basebackup needed that)
//   bytes 1, 2    the peer id, low byte first (byte 1 = id & 0xff, byte 2 = id >> 8)
//   byte 7        the low two bits are a TTL, 3 when issued; each forward decrements it, so a
//                 misconfigured ring of peers drops a cancel after three hops instead of looping
//   all others    random
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "protocol/startup.hpp"

namespace pgtether {

// PgBouncer's bounds: 0 turns peering off; ids fit in 14 bits.
inline constexpr int kMaxPeerId = 16383;
inline constexpr std::uint8_t kCancelTtlMask = 0x03;

// `random` with `peer_id` written in (PgBouncer's layout above); with peer_id 0 only the sign
// bit of the process id is cleared.
[[nodiscard]] protocol::CancelKey stamp_cancel_key(protocol::CancelKey random, int peer_id);

// The peer id a key carries (bytes 1 and 2).
[[nodiscard]] int cancel_key_peer(const protocol::CancelKey& key);

struct CancelRoute {
    enum class Action {
        Local,    // look `key` up among this process's clients
        Forward,  // send a CancelRequest with `key` (TTL already decremented) to peer `peer`
        Drop,     // another peer's key whose TTL is used up: ignore it
    };
    Action action = Action::Local;
    int peer = 0;
    protocol::CancelKey key;
};

// Where a CancelRequest with `key` goes, received by the process whose peer_id is `own_peer_id`.
// Without peering (0) every key is local and looked up as it came. With peering, a key of ours
// is looked up with its TTL bits restored (a peer may have decremented them); another peer's is
// forwarded while its TTL lasts.
[[nodiscard]] CancelRoute route_cancel(const protocol::CancelKey& key, int own_peer_id);

// How many cancel requests for peers one worker keeps waiting for a turn, all peers together:
// max_client_conn split over the workers, at least 1. PgBouncer holds each waiting request as a
// client connection, counted against max_client_conn; pgtether holds only its key, within the
// same bound, and drops a request that finds the queue full.
[[nodiscard]] int peer_cancel_queue_limit(int max_client_conn, std::size_t workers);

// Whether a CancelRequest on its way (to a postmaster or a peer) is given up, by the janitor.
enum class CancelForwardExpiry {
    Keep,
    // Not sent within cancel_wait_timeout of its arrival: the receiver does not accept.
    NotSent,
    // Sent to a peer, whose close has not come within cancel_wait_timeout of the sending. The
    // bytes are the peer's: closing our end takes nothing back, so a late cancel is no likelier;
    // it only frees the peer's slot here. A request sent to a postmaster is never given up: its
    // backend stays out of the pool until the postmaster closes (a late cancel must not hit the
    // next client's query).
    SentToPeerUnanswered,
};

struct CancelForwardTimes {
    bool to_peer = false;
    std::uint64_t arrived_ms = 0;
    std::optional<std::uint64_t> sent_ms;  // nullopt: still resolving or connecting
};

[[nodiscard]] CancelForwardExpiry cancel_forward_expiry(const CancelForwardTimes& times,
                                                        std::uint64_t now_ms,
                                                        std::uint64_t timeout_ms);

}  // namespace pgtether
