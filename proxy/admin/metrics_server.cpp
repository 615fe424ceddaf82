#include "proxy/admin/metrics_server.hpp"

#include <netdb.h>
#include <unistd.h>

#include <stdexcept>

#include "proxy/net/log.hpp"

#include "core/fd_budget.hpp"
#include "core/metrics_text.hpp"
#include "protocol/http_request.hpp"
#include "proxy/admin/admin_context.hpp"
#include "proxy/admin/health.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/net/listener.hpp"

namespace pgtether {

namespace {

// A scrape takes milliseconds; a connection open longer is idle or stuck.
constexpr std::uint64_t kConnectionTimeoutMs = 10'000;
// A scraper sends its request head at once. One that has not arrived whole within this time is a
// slow or idle client (slowloris): closed, so it does not hold a place.
constexpr std::uint64_t kRequestHeadTimeoutMs = 2'000;
constexpr std::uint64_t kTimerIntervalMs = 500;
constexpr const char* kPlainText = "text/plain; charset=utf-8";
// Scrapers open one connection at a time; more than this at once is a flood, not monitoring.
constexpr std::size_t kMaxConnections = 64;
// Connections from one IP address at once. Beyond it (and beyond kMaxConnections) a new
// connection pushes out the oldest one still waiting for its request instead of being refused:
// a flood of idle connections then only ever displaces itself, and a scraper, which sends its
// request right away, gets in.
constexpr std::size_t kMaxConnectionsPerPeer = 8;

bool wants_openmetrics(const std::string& accept) {
    return accept.find("application/openmetrics-text") != std::string::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One HTTP connection

MetricsConnection::MetricsConnection(AdminContext& worker, MetricsServer& server)
    : worker_(worker), server_(server), stream_(worker, *this), opened_ms_(worker.now_ms()) {
    server_.add(*this);
}

MetricsConnection::~MetricsConnection() {
    server_.remove(*this);
}

bool MetricsConnection::accept(int fd) {
    // On failure close() frees this object (in on_stream_closed), initialised or not.
    if (stream_.init_tcp() != 0) {
        ::close(fd);
        close();
        return false;
    }
    if (stream_.adopt(fd) != 0) {
        close();
        return false;
    }
    peer_ = stream_.peer_host();
    stream_.start_reading();
    return true;
}

void MetricsConnection::expire(std::uint64_t now_ms) {
    const std::uint64_t age = now_ms - opened_ms_;
    if (age >= kConnectionTimeoutMs || (!done_ && age >= kRequestHeadTimeoutMs)) close();
}

void MetricsConnection::close() {
    done_ = true;
    stream_.close();
}

std::size_t MetricsConnection::on_stream_data(protocol::ByteSpan data) {
    if (done_) return data.size();
    auto parsed = parse_http_request(protocol::as_chars(data));
    switch (parsed.status) {
        case HttpParseStatus::NeedMore:
            return 0;  // kept by the stream until the rest of the head arrives
        case HttpParseStatus::TooLarge:
            respond(431, "Request Header Fields Too Large", kPlainText,
                    "request head too large\n", false);
            return data.size();
        case HttpParseStatus::Invalid:
            respond(400, "Bad Request", kPlainText, "bad request\n", false);
            return data.size();
        case HttpParseStatus::Complete:
            break;
    }
    const HttpRequest& request = *parsed.request;
    bool head = request.method == "HEAD";
    if (request.method != "GET" && !head) {
        respond(405, "Method Not Allowed", kPlainText, "use GET\n", false,
                "Allow: GET, HEAD\r\n");
    } else if (request.path == "/healthz") {
        // The loop answered: the process serves (docs/admin.md, "Health endpoints").
        respond(200, "OK", kPlainText, "ok\n", head);
    } else if (request.path == "/readyz") {
        const Readiness readiness = check_readiness(worker_);
        if (readiness.ready) {
            respond(200, "OK", kPlainText, "ready\n", head);
        } else {
            std::string body;
            for (const auto& problem : readiness.problems) body += problem + "\n";
            respond(503, "Service Unavailable", kPlainText, body, head);
        }
    } else if (request.path != "/metrics") {
        respond(404, "Not Found", kPlainText,
                "metrics are at /metrics, health at /healthz and /readyz\n", head);
    } else {
        auto format = wants_openmetrics(request.accept) ? MetricsFormat::OpenMetrics
                                                        : MetricsFormat::Prometheus;
        respond(
            200, "OK",
            format == MetricsFormat::OpenMetrics ? kOpenMetricsContentType : kPrometheusContentType,
            collect_metrics(worker_, format), head);
    }
    return data.size();
}

void MetricsConnection::respond(int status, const char* reason, const std::string& content_type,
                                const std::string& body, bool head_only,
                                const char* extra_headers) {
    done_ = true;
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
    out += "Content-Type: " + content_type + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    out += extra_headers;
    out += "Connection: close\r\n\r\n";
    if (!head_only) out += body;
    stream_.write(out);
    stream_.close_after_flush();
}

void MetricsConnection::on_stream_end(int) {
    close();
}

void MetricsConnection::on_stream_closed() {
    delete this;
}

// ---------------------------------------------------------------------------------------------
// The listening sockets

MetricsServer::MetricsServer(AdminContext& worker)
    : worker_(worker), accept_failures_(kAcceptFailureReportMs) {}

MetricsServer::~MetricsServer() = default;

void MetricsServer::listen(const std::vector<std::string>& addresses, int port, int backlog) {
    const std::string service = std::to_string(port);
    for (const auto& spec : addresses) {
        for (const auto& host : listen_hosts(spec)) {
            const AddrinfoList result =
                resolve_listen_address(host, service, "metrics_listen_addr");
            // The first address of a name is enough (as for listen_addr).
            auto listener = std::make_unique<Listener>(worker_, *this);
            try {
                listener->listen_tcp(result->ai_addr, host + ":" + service, backlog, false);
            } catch (const std::exception& e) {
                listener->close();
                listeners_.push_back(std::move(listener));
                // e.what(): "cannot <step> <address>: <reason>"; the reason is what to add.
                const std::string what = e.what();
                const auto colon = what.rfind(": ");
                const std::string reason =
                    colon == std::string::npos ? what : what.substr(colon + 2);
                throw std::runtime_error("cannot listen for metrics on " + host + ":" + service +
                                         ": " + reason);
            }
            listeners_.push_back(std::move(listener));
            spdlog::info("metrics on http://{}:{}/metrics", host, port);
        }
    }
    uv_timer_init(worker_.loop(), &timer_);
    timer_.data = this;
    timer_open_ = true;
    uv_timer_start(&timer_, on_timer, kTimerIntervalMs, kTimerIntervalMs);
}

void MetricsServer::accept_client(int fd, bool tcp, bool drained) {
    (void)tcp;
    (void)drained;
    auto* connection = new MetricsConnection(worker_, *this);
    // Accepted even when there is no room, so that the connection does not stay queued: it is
    // closed at once.
    if (connection->accept(fd) && !make_room(*connection)) connection->close();
}

void MetricsServer::on_accept_out_of_descriptors(const std::string& error) {
    worker_.stats().accept_fd_exhausted++;
    if (auto left_out = accept_failures_.occurrence(worker_.now_ms())) {
        spdlog::error(
            "metrics endpoint: accept() failed: {}{}; not accepting new scrapes for {} ms", error,
            ReportRate::left_out_note(*left_out), kAcceptPauseMs);
    }
}

bool MetricsServer::make_room(const MetricsConnection& incoming) {
    std::size_t open = 0;
    std::size_t same_peer = 0;
    MetricsConnection* oldest_waiting = nullptr;
    MetricsConnection* oldest_waiting_same_peer = nullptr;
    connections_.for_each([&](MetricsConnection& c) {
        // Closed or answered ones are on their way out and hold no place.
        if (&c == &incoming || c.closing()) return;
        ++open;
        const bool same = c.peer() == incoming.peer();
        if (same) ++same_peer;
        if (!c.waiting_for_request()) return;
        if (!oldest_waiting || c.opened_ms() < oldest_waiting->opened_ms()) oldest_waiting = &c;
        if (same &&
            (!oldest_waiting_same_peer || c.opened_ms() < oldest_waiting_same_peer->opened_ms())) {
            oldest_waiting_same_peer = &c;
        }
    });
    MetricsConnection* victim = nullptr;
    if (same_peer >= kMaxConnectionsPerPeer) {
        victim = oldest_waiting_same_peer;
        if (!victim) return false;
    } else if (open >= kMaxConnections) {
        victim = oldest_waiting;
        if (!victim) return false;
    } else {
        return true;
    }
    spdlog::debug("metrics: too many connections{}: closing the oldest idle one",
                  same_peer >= kMaxConnectionsPerPeer ? " from " + incoming.peer() : "");
    victim->close();
    return true;
}

void MetricsServer::on_timer(uv_timer_t* timer) {
    auto* self = static_cast<MetricsServer*>(timer->data);
    std::uint64_t now = self->worker_.now_ms();
    std::vector<MetricsConnection*> open;
    self->connections_.for_each([&](MetricsConnection& c) { open.push_back(&c); });
    for (auto* c : open)
        c->expire(now);
}

void MetricsServer::close() {
    for (auto& listener : listeners_) listener->close();
    if (timer_open_) {
        timer_open_ = false;
        uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    }
    std::vector<MetricsConnection*> open;
    connections_.for_each([&](MetricsConnection& c) { open.push_back(&c); });
    for (auto* c : open)
        c->close();
}

}  // namespace pgtether
