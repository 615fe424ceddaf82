// Delivers one CancelRequest to a backend's postmaster on a connection of its own
// (protocol §55.2.8) and tells the server object when it is done, so the backend is not handed to
// another client while a cancel meant for the previous one may still arrive.
#pragma once

#include <string>

#include "proxy/intrusive_list.hpp"
#include "proxy/stream.hpp"

namespace pgtether {

class Server;
class Worker;

class CancelForwarder final : public Stream::Handler {
public:
    CancelForwarder(Worker& worker, Server& target);
    ~CancelForwarder();
    void start();
    // The target server is going away: stop reporting to it.
    void forget_target() { target_ = nullptr; }
    [[nodiscard]] Server* target() { return target_; }

    ListHook worker_hook_;

private:
    std::size_t on_stream_data(protocol::ByteSpan data) override { return data.size(); }
    void on_stream_end(int status) override;
    void on_stream_drained() override {}
    void on_stream_connected(int status) override;
    void on_stream_closed() override;
    void finish();

    Worker& worker_;
    Server* target_;
    Stream stream_;
    std::string request_;
    bool finished_ = false;
};

}  // namespace pgtether
