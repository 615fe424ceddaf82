#include "proxy/server/cancel_forwarder.hpp"

#include "proxy/net/log.hpp"

#include "core/config.hpp"
#include "core/peering.hpp"
#include "proxy/server/server_context.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/server/peer_cancels.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

CancelForwarder::CancelForwarder(ServerContext& context, Server& target)
    : context_(context), target_(&target), stream_(context, *this) {
    request_ = protocol::build_cancel_request(target.backend_key());
    target.cancel_started();
    arrived_ms_ = context_.now_ms();
    context_.register_cancel(*this);
}

CancelForwarder::CancelForwarder(ServerContext& context, const PeerConfig& peer,
                                 const protocol::CancelKey& key, std::uint64_t arrived_ms)
    : context_(context),
      target_(nullptr),
      stream_(context, *this),
      request_(protocol::build_cancel_request(key)),
      peer_host_(peer.host),
      peer_port_(peer.port),
      peer_id_(peer.id) {
    arrived_ms_ = arrived_ms;
    context_.register_cancel(*this);
}

CancelForwarder::~CancelForwarder() {
    context_.unregister_cancel(*this);
    if (peer_id_ != 0) context_.peer_cancels().on_forwarder_gone(peer_id_);
}

void CancelForwarder::janitor(std::uint64_t now_ms) {
    if (finished_) return;
    const auto timeout_ms =
        duration_ms(context_.config().cancel_wait_timeout);
    CancelForwardTimes times;
    times.to_peer = peer_id_ != 0;
    times.arrived_ms = arrived_ms_;
    if (sent_) times.sent_ms = sent_ms_;
    switch (cancel_forward_expiry(times, now_ms, timeout_ms)) {
        case CancelForwardExpiry::Keep:
            break;
        case CancelForwardExpiry::NotSent:
            fail("not forwarded within cancel_wait_timeout");
            break;
        case CancelForwardExpiry::SentToPeerUnanswered:
            fail("sent, but the peer did not close the connection within cancel_wait_timeout");
            break;
    }
}

void CancelForwarder::start() {
    if (!peer_host_.empty()) {
        // A peer is reached like a side connection: Unix socket directory, IP literal or a
        // name resolved now (proxy/net/server_address.hpp).
        bool unix_socket = false;
        std::string error =
            start_side_connect(stream_, context_.loop(), peer_host_, peer_port_, context_.config(),
                               *this, unix_socket, resolving_);
        if (!error.empty()) fail(error);
        return;
    }
    int rc;
    if (target_->address_is_unix()) {
        rc = stream_.init_pipe();
        if (rc == 0) rc = stream_.connect_pipe(target_->unix_path());
    } else {
        rc = stream_.init_tcp();
        if (rc == 0) rc = stream_.connect_tcp(reinterpret_cast<const sockaddr*>(&target_->address()));
    }
    if (rc != 0) fail(std::string("cannot connect: ") + uv_strerror(rc));
}

void CancelForwarder::on_resolved(int status, const sockaddr* address) {
    resolving_ = false;
    if (finished_) {
        maybe_delete();
        return;
    }
    if (address == nullptr) {
        fail("cannot resolve " + peer_host_ + ": " + uv_strerror(status));
        return;
    }
    if (auto error = connect_side_tcp(stream_, address); !error.empty()) fail(error);
}

void CancelForwarder::on_stream_connected(int status) {
    if (finished_) return;
    if (status != 0) {
        fail(std::string("cannot connect: ") + uv_strerror(status));
        return;
    }
    stream_.write(request_);
    sent_ = true;
    sent_ms_ = context_.now_ms();
    // The postmaster (or the peer) closes the connection once it has handled the request.
    stream_.start_reading();
}

void CancelForwarder::on_stream_end(int) { finish(); }

void CancelForwarder::fail(const std::string& why) {
    if (peer_host_.empty()) {
        spdlog::warn("cannot forward a cancel request: {}", why);
    } else {
        context_.peer_cancels().warn_forward_failed(peer_id_, peer_host_, peer_port_, why);
    }
    finish();
}

void CancelForwarder::finish() {
    if (finished_) return;
    finished_ = true;
    if (Server* target = target_) {
        target_ = nullptr;
        target->cancel_finished();
    }
    stream_.close();
}

void CancelForwarder::on_stream_closed() {
    stream_closed_ = true;
    maybe_delete();
}

void CancelForwarder::maybe_delete() {
    if (stream_closed_ && !resolving_) delete this;
}

}  // namespace pgtether
