// Delivers one CancelRequest on a connection of its own (protocol §55.2.8), either
//  - to a backend's postmaster, telling the server object when it is done, so the backend is not
//    handed to another client while a cancel meant for the previous one may still arrive; or
//  - to a peer pgtether / PgBouncer process that owns the cancel key ([peers], core/peering.hpp).
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>

#include "protocol/startup.hpp"
#include "proxy/net/intrusive_list.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/net/stream.hpp"

namespace pgtether {

class Server;
class ServerContext;
struct PeerConfig;

class CancelForwarder final : public Stream::Handler, public ResolveClient {
public:
    CancelForwarder(ServerContext& context, Server& target);
    // Forwards `key` (its TTL already decremented) to `peer`. The request arrived at
    // `arrived_ms`: it may have waited for a turn, and cancel_wait_timeout counts from arrival.
    CancelForwarder(ServerContext& context, const PeerConfig& peer, const protocol::CancelKey& key,
                    std::uint64_t arrived_ms);
    ~CancelForwarder();
    void start();
    // The target server is going away: stop reporting to it.
    void forget_target() { target_ = nullptr; }
    [[nodiscard]] Server* target() { return target_; }
    // The peer a CancelRequest goes to (0: a backend of this process's own).
    [[nodiscard]] int peer_id() const { return peer_id_; }
    // Whether the request has been sent and the receiver's close is awaited (else it is still
    // being resolved or connected).
    [[nodiscard]] bool sent() const { return sent_; }
    // Gives up on a request not sent within cancel_wait_timeout (a peer or postmaster that does
    // not accept, PgBouncer 1.22), and on one sent to a peer that has not closed within
    // cancel_wait_timeout since (core/peering.hpp: cancel_forward_expiry).
    void janitor(std::uint64_t now_ms);

    ListHook worker_hook_;

private:
    std::size_t on_stream_data(protocol::ByteSpan data) override { return data.size(); }
    void on_stream_end(int status) override;
    void on_stream_drained() override {}
    void on_stream_connected(int status) override;
    void on_stream_closed() override;
    void on_resolved(int status, const sockaddr* address) override;
    void finish();
    void fail(const std::string& why);
    void maybe_delete();

    ServerContext& context_;
    Server* target_;
    Stream stream_;
    std::string request_;
    std::string peer_host_;  // empty unless forwarding to a peer
    int peer_port_ = 0;
    int peer_id_ = 0;
    bool finished_ = false;
    bool sent_ = false;
    std::uint64_t arrived_ms_ = 0;
    std::uint64_t sent_ms_ = 0;
    bool resolving_ = false;
    bool stream_closed_ = false;
};

}  // namespace pgtether
