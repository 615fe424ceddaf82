// The metrics endpoint: a minimal HTTP/1.1 server on the worker's loop that answers
// GET /metrics (and HEAD) with the numbers of proxy/admin/metrics.hpp, in Prometheus text format or,
// when the scraper's Accept header asks for it, OpenMetrics; and GET /healthz and /readyz, the
// health checks of proxy/admin/health.hpp. Each connection serves one request
// and is closed (Connection: close), which every Prometheus scraper handles. Enabled by
// metrics_listen_port (docs/admin.md).
#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "core/report_rate.hpp"
#include "proxy/net/intrusive_list.hpp"
#include "proxy/net/listener.hpp"
#include "proxy/net/stream.hpp"

namespace pgtether {

class MetricsServer;
class AdminContext;

class MetricsConnection final : public Stream::Handler {
  public:
    MetricsConnection(AdminContext& worker, MetricsServer& server);
    ~MetricsConnection();
    // Takes the accepted socket `fd`; false (and the object frees itself) when it cannot.
    bool accept(int fd);
    // Drops a connection whose request head is late, or that has been open too long (slow or
    // idle scrapers, slowloris).
    void expire(std::uint64_t now_ms);
    void close();
    // Still waiting for (the rest of) its request head: what makes room for a new connection.
    [[nodiscard]] bool waiting_for_request() const { return !done_; }
    [[nodiscard]] bool closing() const { return stream_.closing(); }
    [[nodiscard]] std::uint64_t opened_ms() const { return opened_ms_; }
    // The peer's IP address ("" when unknown), for the per-peer limit.
    [[nodiscard]] const std::string& peer() const { return peer_; }

    ListHook hook_;

  private:
    std::size_t on_stream_data(protocol::ByteSpan data) override;
    void on_stream_end(int status) override;
    void on_stream_drained() override {}
    void on_stream_connected(int) override {}
    void on_stream_closed() override;

    void respond(int status, const char* reason, const std::string& content_type,
                 const std::string& body, bool head_only, const char* extra_headers = "");

    AdminContext& worker_;
    MetricsServer& server_;
    Stream stream_;
    std::uint64_t opened_ms_;
    std::string peer_;
    bool done_ = false;
};

// The listening sockets are net/'s Listener (accept4 on pgtether's own descriptor): at EMFILE
// libuv's own accept path would close the queued scrapes without a word.
class MetricsServer final : public Acceptor {
  public:
    explicit MetricsServer(AdminContext& worker);
    ~MetricsServer() override;
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    // Listens on each address ("*" = every IPv4 and IPv6 address). Throws std::runtime_error
    // naming the address when it cannot.
    void listen(const std::vector<std::string>& addresses, int port, int backlog);
    // Stops listening and closes open connections (shutdown).
    void close();

    void add(MetricsConnection& connection) { connections_.push_back(connection); }
    void remove(MetricsConnection& connection) { connections_.remove(connection); }

    // Acceptor: a scrape connection; accept() out of descriptors (logged at most once per
    // kAcceptFailureReportMs, counted with the client listeners'; the listener pauses and the
    // scrapes stay queued).
    void accept_client(int fd, bool tcp, bool drained) override;
    void on_accept_out_of_descriptors(const std::string& error) override;

  private:
    // Makes room for `incoming` when its peer, or the endpoint, has as many connections as it may:
    // closes the oldest connection still waiting for its request (of that peer when the peer is
    // at its limit). False when there is none to close and `incoming` must go instead.
    bool make_room(const MetricsConnection& incoming);
    static void on_timer(uv_timer_t* timer);

    AdminContext& worker_;
    std::vector<std::unique_ptr<Listener>> listeners_;
    IntrusiveList<MetricsConnection, &MetricsConnection::hook_> connections_;
    uv_timer_t timer_{};
    bool timer_open_ = false;
    ReportRate accept_failures_;
};

}  // namespace pgtether
