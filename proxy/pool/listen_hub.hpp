// LISTEN multiplexed (docs/session-state.md, "LISTEN and NOTIFY"): one listening connection per
// pool LISTENs on the union of the channels its clients listen on, and hands each notification
// to every client listening on its channel. Clients' lone LISTEN/UNLISTEN are answered by
// pgtether (proxy/client/client_listen.cpp) and never tether them.
//
// The connection (ListenConnection, a SideConnection: application_name "pgtether listen") is
// opened at the first channel, LISTENs when a channel gets its first listener and UNLISTENs when
// it loses its last. After a failure it is opened again (at once, then every second while it
// fails) and LISTENs on every channel again; the listeners of the pool are then told, with a
// NOTICE, that notifications sent meanwhile were lost.
//
// A client joining a channel the connection already listens on is not handed its notifications
// at once: the connection may not have read all of those committed before the client's LISTEN,
// which PostgreSQL would never deliver to it. The connection runs an empty statement first (its
// backend sends every notification it has been told of before it answers), and the client joins
// the channel's listeners, and gets its answer, when that statement is answered.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/listen_channels.hpp"
#include "protocol/bytes.hpp"

namespace pgtether {

class Client;
class ListenConnection;
class Pool;
class PoolContext;

class ListenHub {
  public:
    ListenHub(PoolContext& context, Pool& pool);
    ~ListenHub();
    ListenHub(const ListenHub&) = delete;
    ListenHub& operator=(const ListenHub&) = delete;

    // The client's channels changed by `change` (apply_listen_ops). The connection starts
    // listening on the added channels that have no listener yet; the client is told through
    // Client::on_listen_ready when it gets the notifications of all of them.
    void change(Client& client, const ChannelChange& change);
    // Whether `client` gets the notifications of every one of `channels` now: the connection
    // listens on them and the client has joined their listeners.
    [[nodiscard]] bool listening_for(const Client& client,
                                     const std::vector<std::string>& channels) const;
    // The client leaves (or its channels move to its backend): all its channels are dropped.
    void leave(Client& client, const ChannelSet& channels);

    // Back-pressure: a listener's socket is backed up past half its listen_client_buffer. The
    // listening connection stops reading until every such listener has drained (what waits stays
    // in PostgreSQL's notification queue), so a slow reader loses nothing; one that takes
    // nothing for listen_stall_timeout is disconnected (Client::janitor).
    void listener_backed_up(Client& client);
    void listener_drained(Client& client);
    [[nodiscard]] bool paused() const { return !backed_up_.empty(); }
    // A listener has notifications queued to write (Client::deliver_to_listener): they go out
    // with one write per listener once the connection's read has been handled, not one per
    // notification.
    void queue_delivery(Client& client);
    void send_deliveries();

    // Periodic: reopens a failed connection.
    void tick(std::uint64_t now_ms);
    // Closes the connection (shutdown, the pool goes).
    void stop();

    // SHOW LISTENS and metrics.
    struct ChannelView {
        std::string channel;
        int listeners = 0;
        std::uint64_t delivered = 0;
        std::uint64_t dropped = 0;
        bool listening = false;
    };
    [[nodiscard]] std::vector<ChannelView> channels() const;
    // Channels whose last listener left, with what they delivered and dropped until then (no
    // listeners, not listening): SHOW LISTENS keeps their counters, for the kMaxRetiredChannels
    // that left last. A channel listened on again takes its counters back.
    [[nodiscard]] std::vector<ChannelView> retired_channels() const;
    static constexpr std::size_t kMaxRetiredChannels = 1000;
    // "listening", "connecting", "reconnecting" (failed, retried on the next tick), or "none".
    [[nodiscard]] const char* connection_state() const;
    [[nodiscard]] std::uint64_t delivered() const { return delivered_; }
    [[nodiscard]] std::uint64_t dropped() const { return dropped_; }
    [[nodiscard]] std::uint64_t reconnects() const { return reconnects_; }

  private:
    friend class ListenConnection;
    struct Channel {
        std::vector<Client*> listeners;
        // Clients that joined while the connection listened, with the sync (an empty statement,
        // counted by syncs_sent_) whose answer lets them in: every notification committed
        // before their LISTEN has been read by then.
        std::vector<std::pair<Client*, std::uint64_t>> joining;
        bool listening = false;  // the connection's LISTEN of it has been answered
        std::uint64_t delivered = 0;
        std::uint64_t dropped = 0;
    };

    // ListenConnection's events.
    void on_connected();
    void on_answer(bool ok, const std::string& error);
    void on_notification(protocol::ByteSpan body);
    void on_failed(const std::string& why);

    void open();
    // Sends the next queued LISTEN/UNLISTEN when the connection is idle.
    void pump();
    void tell_waiting_clients();

    PoolContext& context_;
    Pool& pool_;
    std::map<std::string, Channel> channels_;
    // See retired_channels(). `order_` holds (name, sequence) in the order channels left; an
    // entry whose sequence is no longer its channel's (listened on again since) is stale.
    struct Retired {
        std::uint64_t delivered = 0;
        std::uint64_t dropped = 0;
        std::uint64_t sequence = 0;
    };
    void retire(const std::string& name, const Channel& channel);
    std::map<std::string, Retired> retired_;
    std::deque<std::pair<std::string, std::uint64_t>> retired_order_;
    std::uint64_t retired_sequence_ = 0;
    ListenConnection* connection_ = nullptr;
    bool connected_ = false;      // logged in
    bool query_running_ = false;  // a LISTEN/UNLISTEN is on its way
    bool lost_since_ = false;     // failed while channels had listeners: say so once back
    std::uint64_t retry_at_ms_ = 0;
    std::uint64_t opened_at_ms_ = 0;
    std::uint64_t syncs_sent_ = 0;
    // Statements to run, in order ("LISTEN \"a\"", "UNLISTEN \"b\"", the empty sync) with their
    // channel.
    enum class Step : std::uint8_t { Listen, Unlisten, Sync };
    struct Pending {
        Step step = Step::Listen;
        std::string channel;
    };
    // Lets in the joining clients whose sync has been answered (all of them: `up_to` max).
    void admit_joining(std::uint64_t up_to);
    std::deque<Pending> pending_;
    Pending running_;
    // Clients whose LISTEN waits for the connection.
    std::vector<Client*> waiting_;
    // Listeners the connection waits for (back-pressure).
    std::vector<Client*> backed_up_;
    // Listeners with notifications to write (queue_delivery).
    std::vector<Client*> to_send_;
    std::uint64_t delivered_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t reconnects_ = 0;
};

}  // namespace pgtether
