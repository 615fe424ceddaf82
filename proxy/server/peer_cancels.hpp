// Cancel requests on their way to peers ([peers], core/peering.hpp), bounded as PgBouncer bounds
// its peer pools: at most the peer's pool_size requests in flight at once (connecting, or sent
// and awaiting the peer's close), split over the workers; the rest wait in order, and one not
// forwarded within cancel_wait_timeout is dropped (PgBouncer 1.22's semantics: a request already
// sent is never timed out, so a late cancel cannot hit a later query).
//
// Without the bound, a stream of CancelRequests carrying keys of a peer that is down or never
// answers -- anyone who can connect may send them, no login needed -- would make pgtether open
// and hold one connection per request.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "core/report_rate.hpp"
#include "protocol/startup.hpp"

namespace pgtether {

class ServerContext;
struct PeerConfig;

class PeerCancels {
  public:
    explicit PeerCancels(ServerContext& context) : context_(context) {}

    // Forwards `key` to `peer` now, or queues it behind the requests in flight to that peer.
    void forward(const PeerConfig& peer, const protocol::CancelKey& key);
    // A forwarder to `peer_id` is gone (no longer among the worker's): the next queued request
    // may go.
    void on_forwarder_gone(int peer_id);
    // Drops queued requests that have waited cancel_wait_timeout (0: no limit) and starts those
    // that now fit.
    void janitor();
    // Requests waiting for a turn to `peer_id` (SHOW PEER_POOLS' cl_waiting_cancel_req).
    [[nodiscard]] int queued(int peer_id) const;
    // How many requests to `peer` one worker may have in flight: the peer's pool_size (else
    // default_pool_size) split over `workers` workers, at least one.
    [[nodiscard]] static int limit(int pool_size, std::size_t workers);
    // Shutting down: nothing queued goes out any more.
    void clear() { queued_.clear(); }

    // The warnings about cancel requests for peers, rate-limited (core/report_rate.hpp): at most
    // one line of each kind per kReportIntervalMs, with the count of those left out. Anyone who
    // can connect may send CancelRequests, so one line per request would let them flood the log.
    void warn_ttl_exhausted(const std::string& from);
    void warn_unknown_peer(const std::string& from, int peer_id);
    void warn_forward_failed(int peer_id, const std::string& host, int port,
                             const std::string& why);
    static constexpr std::uint64_t kReportIntervalMs = 10'000;

  private:
    struct Queued {
        protocol::CancelKey key;
        std::uint64_t since_ms;
    };

    [[nodiscard]] int limit_for(const PeerConfig& peer) const;
    // Forwarders to `peer_id` alive now (connecting, or sent and awaiting the close).
    [[nodiscard]] int in_flight(int peer_id) const;
    void start(const PeerConfig& peer, const protocol::CancelKey& key, std::uint64_t arrived_ms);
    // Drops (and logs) the queued requests that arrived cancel_wait_timeout ago or earlier.
    void drop_expired(int peer_id, std::deque<Queued>& queued, std::uint64_t now_ms);
    // Starts queued requests to `peer_id` while there is room (the peer may have left the
    // configuration by a reload: then they are dropped).
    void pump(int peer_id);

    [[nodiscard]] std::size_t queued_total() const;

    ServerContext& context_;
    std::map<int, std::deque<Queued>> queued_;  // by peer id
    ReportRate ttl_reports_{kReportIntervalMs};
    ReportRate unknown_peer_reports_{kReportIntervalMs};
    // Per peer (configured ones only): one peer that is down must not hide another's failures.
    std::map<int, ReportRate> failure_reports_;
    ReportRate queue_full_reports_{kReportIntervalMs};
};

}  // namespace pgtether
