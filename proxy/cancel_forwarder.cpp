#include "proxy/cancel_forwarder.hpp"

#include <spdlog/spdlog.h>

#include "protocol/startup.hpp"
#include "proxy/server.hpp"
#include "proxy/worker.hpp"

namespace pgtether {

CancelForwarder::CancelForwarder(Worker& worker, Server& target)
    : worker_(worker), target_(&target), stream_(worker, *this) {
    request_ = protocol::build_cancel_request(target.backend_key());
    target.cancel_started();
    worker_.register_cancel(*this);
}

CancelForwarder::~CancelForwarder() { worker_.unregister_cancel(*this); }

void CancelForwarder::start() {
    int rc;
    if (target_->address_is_unix()) {
        rc = stream_.init_pipe();
        if (rc == 0) rc = stream_.connect_pipe(target_->unix_path());
    } else {
        rc = stream_.init_tcp();
        if (rc == 0) rc = stream_.connect_tcp(reinterpret_cast<const sockaddr*>(&target_->address()));
    }
    if (rc != 0) {
        spdlog::warn("cannot connect to forward a cancel request: {}", uv_strerror(rc));
        finish();
    }
}

void CancelForwarder::on_stream_connected(int status) {
    if (status != 0) {
        spdlog::warn("cannot connect to forward a cancel request: {}", uv_strerror(status));
        finish();
        return;
    }
    stream_.write(request_);
    // The postmaster closes the connection once it has signalled the backend.
    stream_.start_reading();
}

void CancelForwarder::on_stream_end(int) { finish(); }

void CancelForwarder::finish() {
    if (finished_) return;
    finished_ = true;
    if (Server* target = target_) {
        target_ = nullptr;
        target->cancel_finished();
    }
    stream_.close();
}

void CancelForwarder::on_stream_closed() { delete this; }

}  // namespace pgtether
