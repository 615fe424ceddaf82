#include "proxy/pool/listen_hub.hpp"

#include <algorithm>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/listen_statement.hpp"
#include "protocol/message_types.hpp"
#include "proxy/client/client.hpp"
#include "proxy/net/log.hpp"
#include "proxy/pool/listen_connection.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_context.hpp"

namespace pgtether {

namespace {

// How long a failed listening connection waits before it is opened again.
constexpr std::uint64_t kRetryMs = 1000;

void remove_client(std::vector<Client*>& clients, const Client& client) {
    clients.erase(std::remove(clients.begin(), clients.end(), &client), clients.end());
}

void remove_client(std::vector<std::pair<Client*, std::uint64_t>>& clients, const Client& client) {
    std::erase_if(clients, [&](const auto& entry) { return entry.first == &client; });
}

bool is_joining(const std::vector<std::pair<Client*, std::uint64_t>>& clients,
                const Client& client) {
    return std::any_of(clients.begin(), clients.end(),
                       [&](const auto& entry) { return entry.first == &client; });
}

}  // namespace

ListenHub::ListenHub(PoolContext& context, Pool& pool) : context_(context), pool_(pool) {}

ListenHub::~ListenHub() {
    stop();
}

void ListenHub::stop() {
    if (connection_) connection_->stop();
    connection_ = nullptr;
    connected_ = false;
    query_running_ = false;
}

void ListenHub::change(Client& client, const ChannelChange& change) {
    for (const auto& name : change.removed) {
        auto it = channels_.find(name);
        if (it == channels_.end()) continue;
        remove_client(it->second.listeners, client);
        remove_client(it->second.joining, client);
        if (it->second.listeners.empty() && it->second.joining.empty()) {
            const bool was_listening = it->second.listening;
            retire(name, it->second);
            channels_.erase(it);
            // Only what the connection listens on needs an UNLISTEN; a LISTEN still queued is
            // dropped instead.
            auto queued = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
                return p.step == Step::Listen && p.channel == name;
            });
            if (queued != pending_.end()) {
                pending_.erase(queued);
            } else if (was_listening || (query_running_ && running_.step == Step::Listen &&
                                         running_.channel == name)) {
                pending_.push_back({Step::Unlisten, name});
            }
        }
    }
    bool needs_sync = false;
    for (const auto& name : change.added) {
        auto [it, fresh] = channels_.try_emplace(name);
        Channel& channel = it->second;
        if (auto retired = retired_.find(name); fresh && retired != retired_.end()) {
            channel.delivered = retired->second.delivered;
            channel.dropped = retired->second.dropped;
            retired_.erase(retired);  // its entry in retired_order_ is stale now
        }
        // An UNLISTEN of a channel still queued is undone by this LISTEN: the connection
        // listens on it still.
        auto unlisten = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
            return p.step == Step::Unlisten && p.channel == name;
        });
        if (fresh && unlisten != pending_.end()) {
            pending_.erase(unlisten);
            channel.listening = true;
        } else if (fresh) {
            pending_.push_back({Step::Listen, name});
        }
        const bool unlisten_running = query_running_ && running_.step == Step::Unlisten &&
                                      running_.channel == name;
        if (channel.listening || unlisten_running) {
            // Notifications the connection has not read yet may have been committed before
            // this LISTEN: the client joins once a sync sent from now on is answered.
            channel.joining.emplace_back(&client, syncs_sent_ + 1);
            needs_sync = true;
        } else {
            // The connection's LISTEN is on its way: nothing of the channel has been read.
            channel.listeners.push_back(&client);
        }
    }
    if (needs_sync && std::none_of(pending_.begin(), pending_.end(),
                                   [](const Pending& p) { return p.step == Step::Sync; })) {
        pending_.push_back({Step::Sync, {}});
    }
    if (!listening_for(client, change.added)) {
        if (std::find(waiting_.begin(), waiting_.end(), &client) == waiting_.end()) {
            waiting_.push_back(&client);
        }
    }
    if (!connection_) {
        if (retry_at_ms_ == 0 || context_.now_ms() >= retry_at_ms_) open();
    } else {
        pump();
    }
}

bool ListenHub::listening_for(const Client& client,
                              const std::vector<std::string>& channels) const {
    return std::all_of(channels.begin(), channels.end(), [&](const std::string& name) {
        auto it = channels_.find(name);
        return it != channels_.end() && it->second.listening &&
               !is_joining(it->second.joining, client);
    });
}

void ListenHub::admit_joining(std::uint64_t up_to) {
    for (auto& named : channels_) {
        auto& channel = named.second;  // clang before 16 captures no structured binding
        std::erase_if(channel.joining, [&](const auto& entry) {
            if (entry.second > up_to) return false;
            channel.listeners.push_back(entry.first);
            return true;
        });
    }
}

void ListenHub::listener_backed_up(Client& client) {
    if (std::find(backed_up_.begin(), backed_up_.end(), &client) != backed_up_.end()) return;
    backed_up_.push_back(&client);
    if (connection_) connection_->pause_reading();
}

void ListenHub::listener_drained(Client& client) {
    remove_client(backed_up_, client);
    if (backed_up_.empty() && connection_) connection_->resume_reading();
}

void ListenHub::queue_delivery(Client& client) {
    to_send_.push_back(&client);
}

void ListenHub::send_deliveries() {
    // A write may find a client backed up and pause the connection; nothing here closes one.
    const std::vector<Client*> clients = std::exchange(to_send_, {});
    for (Client* client : clients)
        client->send_queued_notifications();
}

void ListenHub::leave(Client& client, const ChannelSet& channels) {
    remove_client(waiting_, client);
    remove_client(to_send_, client);
    listener_drained(client);
    ChannelChange change;
    change.removed.assign(channels.begin(), channels.end());
    this->change(client, change);
}

void ListenHub::tick(std::uint64_t now_ms) {
    if (!connection_ && !channels_.empty() && now_ms >= retry_at_ms_) open();
}

void ListenHub::open() {
    SideConnection::Setup setup;
    setup.database = pool_.database();
    setup.credentials = pool_.server_credentials();
    setup.application_name = "pgtether listen";
    setup.host_index = pool_.side_host();
    // A NotificationResponse carries at most PostgreSQL's 8000-byte payload and a channel name.
    setup.max_message = 64 * 1024;
    setup.limits = ResultLimits{0, 0};
    connected_ = false;
    query_running_ = false;
    opened_at_ms_ = context_.now_ms();
    // What the connection listened on is gone with it: everything is LISTENed again, in order.
    // A new connection has read nothing yet: joining clients need no sync.
    admit_joining(UINT64_MAX);
    pending_.clear();
    for (auto& [name, channel] : channels_) {
        channel.listening = false;
        pending_.push_back({Step::Listen, name});
    }
    // The connection may fail inside begin(): the pointer is set first and cleared there.
    connection_ = ListenConnection::create(context_, std::move(setup), *this);
    connection_->begin();
    if (connection_ && paused()) connection_->pause_reading();
}

void ListenHub::on_connected() {
    connected_ = true;
    pump();
}

void ListenHub::pump() {
    if (!connection_ || !connected_ || query_running_ || !connection_->ready()) return;
    if (pending_.empty()) {
        if (lost_since_) {
            lost_since_ = false;
            // Listening again on everything: the gap is over, and its notifications are lost.
            std::string notice;
            protocol::append_notice_response(
                notice,
                {"WARNING",
                 "01000",
                 "pgtether: the listening connection of database \"" + pool_.database_name() +
                     "\" was lost and is back; notifications sent meanwhile were lost",
                 {},
                 {}});
            std::vector<Client*> told;
            for (auto& [name, channel] : channels_) {
                for (Client* client : channel.listeners) {
                    if (std::find(told.begin(), told.end(), client) != told.end()) continue;
                    told.push_back(client);
                }
            }
            for (Client* client : told)
                client->deliver_to_listener(notice);
            send_deliveries();
        }
        return;
    }
    running_ = pending_.front();
    pending_.pop_front();
    query_running_ = true;
    switch (running_.step) {
        case Step::Listen:
            connection_->run_statement("LISTEN " + protocol::quote_identifier(running_.channel));
            break;
        case Step::Unlisten:
            connection_->run_statement("UNLISTEN " +
                                       protocol::quote_identifier(running_.channel));
            break;
        case Step::Sync:
            // An empty statement: its backend sends the notifications it has been told of
            // before its ReadyForQuery (PostgresMain), so they are all read when it is answered.
            ++syncs_sent_;
            connection_->run_statement("");
            break;
    }
}

void ListenHub::on_answer(bool ok, const std::string& error) {
    query_running_ = false;
    if (!ok) {
        // PostgreSQL refuses a LISTEN only when something is badly wrong (out of memory, the
        // queue full): start over on a new connection.
        spdlog::warn("listening connection of {}/{}: {} \"{}\" failed: {}", pool_.database_name(),
                     pool_.user_name(),
                     running_.step == Step::Listen     ? "LISTEN"
                     : running_.step == Step::Unlisten ? "UNLISTEN"
                                                       : "an empty statement",
                     running_.channel, error);
        if (connection_) connection_->stop();
        on_failed("LISTEN failed: " + error);
        return;
    }
    if (running_.step == Step::Listen) {
        auto it = channels_.find(running_.channel);
        if (it != channels_.end()) it->second.listening = true;
        tell_waiting_clients();
    } else if (running_.step == Step::Sync) {
        admit_joining(syncs_sent_);
        tell_waiting_clients();
    }
    pump();
}

void ListenHub::tell_waiting_clients() {
    // A client may run its next request from on_listen_ready: work on a copy.
    const std::vector<Client*> waiting = waiting_;
    for (Client* client : waiting) {
        if (client->listen_channels_ready()) {
            remove_client(waiting_, *client);
            client->on_listen_ready();
        }
    }
}

void ListenHub::on_notification(protocol::ByteSpan body) {
    protocol::ByteReader reader(body);
    reader.i32();
    const std::string_view name = reader.cstring();
    if (!reader.ok()) return;
    auto it = channels_.find(std::string(name));
    if (it == channels_.end()) return;  // a channel just left: its UNLISTEN is on its way
    std::string message;
    protocol::MessageWriter(message).begin(protocol::be::kNotificationResponse).bytes(body).end();
    // A client past its budget is closed and leaves the channel meanwhile: work on a copy.
    const std::vector<Client*> listeners = it->second.listeners;
    for (Client* client : listeners) {
        if (client->deliver_to_listener(message)) {
            ++delivered_;
            if (auto again = channels_.find(std::string(name)); again != channels_.end()) {
                again->second.delivered++;
            }
        } else {
            ++dropped_;
            if (auto again = channels_.find(std::string(name)); again != channels_.end()) {
                again->second.dropped++;
            }
        }
    }
}

void ListenHub::on_failed(const std::string& why) {
    send_deliveries();  // what the connection's last read brought
    const bool was_connected = connected_;
    connection_ = nullptr;
    connected_ = false;
    query_running_ = false;
    retry_at_ms_ = context_.now_ms() + kRetryMs;
    for (auto& [name, channel] : channels_)
        channel.listening = false;
    if (channels_.empty()) return;
    reconnects_++;
    lost_since_ = true;
    spdlog::warn("listening connection of {}/{} failed: {}; reconnecting", pool_.database_name(),
                 pool_.user_name(), why);
    // A client whose LISTEN waits gets the error: its LISTEN did not happen.
    const std::vector<Client*> waiting = std::exchange(waiting_, {});
    for (Client* client : waiting)
        client->on_listen_failed(why);
    // Opened again at once when a working connection went (usually that one backend was
    // terminated), at most once a second; otherwise on the janitor's tick after kRetryMs.
    if (was_connected && !channels_.empty() && context_.now_ms() >= opened_at_ms_ + kRetryMs) {
        open();
    }
}

std::vector<ListenHub::ChannelView> ListenHub::channels() const {
    std::vector<ChannelView> out;
    for (const auto& [name, channel] : channels_) {
        out.push_back({name, static_cast<int>(channel.listeners.size() + channel.joining.size()),
                       channel.delivered, channel.dropped, channel.listening});
    }
    return out;
}

void ListenHub::retire(const std::string& name, const Channel& channel) {
    const std::uint64_t sequence = ++retired_sequence_;
    retired_[name] = {channel.delivered, channel.dropped, sequence};
    retired_order_.emplace_back(name, sequence);
    // Bounded, whatever names clients make up: the channels that left first go first (stale
    // entries on the way are dropped with them).
    while (retired_.size() > kMaxRetiredChannels ||
           retired_order_.size() > 2 * kMaxRetiredChannels) {
        const auto [oldest, oldest_sequence] = retired_order_.front();
        retired_order_.pop_front();
        auto it = retired_.find(oldest);
        if (it != retired_.end() && it->second.sequence == oldest_sequence) retired_.erase(it);
    }
}

std::vector<ListenHub::ChannelView> ListenHub::retired_channels() const {
    std::vector<ChannelView> out;
    out.reserve(retired_.size());
    for (const auto& [name, counts] : retired_)
        out.push_back({name, 0, counts.delivered, counts.dropped, false});
    return out;
}

const char* ListenHub::connection_state() const {
    if (connection_) return connected_ ? "listening" : "connecting";
    return channels_.empty() ? "none" : "reconnecting";
}

}  // namespace pgtether
