// PgBouncer-compatible peering (core/peering.hpp): the cancel-key layout, byte by byte, and where
// a CancelRequest goes, table by table.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>

#include "core/peering.hpp"
#include "proxy/server/peer_cancels.hpp"

using namespace pgtether;
using protocol::CancelKey;
using Action = CancelRoute::Action;

namespace {

// The key as its 8 wire bytes (process id, then secret, both big-endian).
std::array<std::uint8_t, 8> wire(const CancelKey& key) {
    std::array<std::uint8_t, 8> b{};
    auto pid = static_cast<std::uint32_t>(key.pid);
    auto secret = static_cast<std::uint32_t>(key.secret);
    for (int i = 0; i < 4; ++i) {
        b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(pid >> (24 - 8 * i));
        b[static_cast<std::size_t>(4 + i)] = static_cast<std::uint8_t>(secret >> (24 - 8 * i));
    }
    return b;
}

CancelKey key_of(std::array<std::uint8_t, 8> b) {
    auto be = [&](std::size_t at) {
        return static_cast<std::int32_t>((std::uint32_t{b[at]} << 24) |
                                         (std::uint32_t{b[at + 1]} << 16) |
                                         (std::uint32_t{b[at + 2]} << 8) | b[at + 3]);
    };
    return {be(0), be(4)};
}

}  // namespace

TEST_CASE("a stamped key carries the peer id in bytes 1-2, low byte first, and TTL 3") {
    const CancelKey random = key_of({0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88});
    struct Row {
        int peer;
        std::array<std::uint8_t, 8> expected;
    };
    const Row rows[] = {
        // peer 0: only the sign bit of the process id is cleared (PgBouncer does that always)
        {0, {0x7f, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88}},
        {1, {0x7f, 0x01, 0x00, 0xcc, 0xbb, 0xaa, 0x99, 0x8b}},
        {2, {0x7f, 0x02, 0x00, 0xcc, 0xbb, 0xaa, 0x99, 0x8b}},
        {258, {0x7f, 0x02, 0x01, 0xcc, 0xbb, 0xaa, 0x99, 0x8b}},
        {kMaxPeerId, {0x7f, 0xff, 0x3f, 0xcc, 0xbb, 0xaa, 0x99, 0x8b}},
    };
    for (const auto& row : rows) {
        CAPTURE(row.peer);
        CancelKey stamped = stamp_cancel_key(random, row.peer);
        CHECK(wire(stamped) == row.expected);
        CHECK(stamped.pid > 0);
        if (row.peer > 0) CHECK(cancel_key_peer(stamped) == row.peer);
    }
}

TEST_CASE("route_cancel: local, forwarded with the TTL decremented, or dropped") {
    const int own = 1;
    auto with = [](int peer, std::uint8_t ttl) {
        return key_of({0x12, static_cast<std::uint8_t>(peer & 0xff),
                       static_cast<std::uint8_t>(peer >> 8), 0x34, 0x56, 0x78, 0x9a,
                       static_cast<std::uint8_t>(0xbc | ttl)});
    };
    struct Row {
        const char* what;
        int own_peer;
        CancelKey key;
        Action action;
        int peer;
        CancelKey routed;
    };
    const Row rows[] = {
        {"no peering: every key is ours, unchanged", 0, with(2, 1), Action::Local, 0, with(2, 1)},
        {"our key, as issued", own, with(own, 3), Action::Local, own, with(own, 3)},
        {"our key after a hop: the TTL bits restored for the lookup", own, with(own, 1),
         Action::Local, own, with(own, 3)},
        {"our key with the TTL used up still is ours", own, with(own, 0), Action::Local, own,
         with(own, 3)},
        {"another peer's key: forwarded, TTL 3 -> 2", own, with(2, 3), Action::Forward, 2,
         with(2, 2)},
        {"TTL 1 -> 0", own, with(2, 1), Action::Forward, 2, with(2, 0)},
        {"TTL 0: dropped", own, with(2, 0), Action::Drop, 2, with(2, 0)},
        {"a peer id above 255", own, with(300, 3), Action::Forward, 300, with(300, 2)},
        {"a key without a peer id (peer 0) at a peering process: forwarded to peer 0", own,
         with(0, 2), Action::Forward, 0, with(0, 1)},
    };
    for (const auto& row : rows) {
        CAPTURE(row.what);
        CancelRoute route = route_cancel(row.key, row.own_peer);
        CHECK(route.action == row.action);
        CHECK(route.peer == row.peer);
        CHECK(route.key == row.routed);
    }
}

TEST_CASE("cancel requests in flight to a peer: its pool_size split over the workers, at least 1") {
    CHECK(PeerCancels::limit(20, 1) == 20);
    CHECK(PeerCancels::limit(20, 2) == 10);
    CHECK(PeerCancels::limit(3, 2) == 1);
    CHECK(PeerCancels::limit(1, 4) == 1);
    CHECK(PeerCancels::limit(1, 0) == 1);
}

TEST_CASE(
    "cancel requests waiting for a peer: max_client_conn split over the workers, at least 1") {
    CHECK(peer_cancel_queue_limit(100, 1) == 100);
    CHECK(peer_cancel_queue_limit(100, 2) == 50);
    CHECK(peer_cancel_queue_limit(1, 2) == 1);
    CHECK(peer_cancel_queue_limit(0, 1) == 1);
    CHECK(peer_cancel_queue_limit(7, 0) == 7);
}

TEST_CASE("cancel_forward_expiry: unsent ones after the timeout, sent ones only to a peer") {
    using E = CancelForwardExpiry;
    struct Row {
        bool to_peer;
        std::optional<std::uint64_t> sent_ms;
        std::uint64_t now_ms;
        std::uint64_t timeout_ms;
        E expected;
    };
    // Every request arrived at 1000 ms.
    const Row rows[] = {
        {false, std::nullopt, 1'000, 3'000, E::Keep},
        {false, std::nullopt, 3'999, 3'000, E::Keep},
        {false, std::nullopt, 4'000, 3'000, E::NotSent},
        {true, std::nullopt, 4'000, 3'000, E::NotSent},
        {true, std::nullopt, 99'000, 0, E::Keep},  // cancel_wait_timeout = 0: no limit
        // Sent: the timeout counts from the sending.
        {true, 2'000, 4'999, 3'000, E::Keep},
        {true, 2'000, 5'000, 3'000, E::SentToPeerUnanswered},
        {true, 2'000, 99'000, 0, E::Keep},
        // Sent to a postmaster: never given up (its backend waits for the close).
        {false, 2'000, 99'000, 3'000, E::Keep},
    };
    for (const Row& row : rows) {
        CAPTURE(row.to_peer);
        CAPTURE(row.now_ms);
        CAPTURE(row.timeout_ms);
        CancelForwardTimes times{row.to_peer, 1'000, row.sent_ms};
        CHECK(cancel_forward_expiry(times, row.now_ms, row.timeout_ms) == row.expected);
    }
}
