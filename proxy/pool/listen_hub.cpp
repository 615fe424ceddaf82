#include "proxy/pool/listen_hub.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>

#include "protocol/backend_messages.hpp"
#include "protocol/bytes.hpp"
#include "protocol/listen_statement.hpp"
#include "protocol/message_types.hpp"
#include "proxy/client/client.hpp"
#include "proxy/daemon/worker.hpp"
#include "proxy/pool/listen_connection.hpp"
#include "proxy/pool/pool.hpp"

namespace pgtether {

namespace {

// How long a failed listening connection waits before it is opened again.
constexpr std::uint64_t kRetryMs = 1000;

void remove_client(std::vector<Client*>& clients, const Client& client) {
    clients.erase(std::remove(clients.begin(), clients.end(), &client), clients.end());
}

}  // namespace

ListenHub::ListenHub(Worker& worker, Pool& pool) : worker_(worker), pool_(pool) {}

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
        if (it->second.listeners.empty()) {
            const bool was_listening = it->second.listening;
            channels_.erase(it);
            // Only what the connection listens on needs an UNLISTEN; a LISTEN still queued is
            // dropped instead.
            auto queued = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
                return p.listen && p.channel == name;
            });
            if (queued != pending_.end()) {
                pending_.erase(queued);
            } else if (was_listening || (query_running_ && running_.channel == name)) {
                pending_.push_back({false, name});
            }
        }
    }
    for (const auto& name : change.added) {
        auto [it, fresh] = channels_.try_emplace(name);
        it->second.listeners.push_back(&client);
        if (fresh) {
            // An UNLISTEN of it still queued is undone by this LISTEN.
            auto queued = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
                return !p.listen && p.channel == name;
            });
            if (queued != pending_.end()) {
                pending_.erase(queued);
                it->second.listening = true;
            } else {
                pending_.push_back({true, name});
            }
        }
    }
    if (!listening(change.added)) {
        if (std::find(waiting_.begin(), waiting_.end(), &client) == waiting_.end()) {
            waiting_.push_back(&client);
        }
    }
    if (!connection_) {
        if (retry_at_ms_ == 0 || worker_.now_ms() >= retry_at_ms_) open();
    } else {
        pump();
    }
}

bool ListenHub::listening(const std::vector<std::string>& channels) const {
    return std::all_of(channels.begin(), channels.end(), [&](const std::string& name) {
        auto it = channels_.find(name);
        return it != channels_.end() && it->second.listening;
    });
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
    opened_at_ms_ = worker_.now_ms();
    // What the connection listened on is gone with it: everything is LISTENed again, in order.
    pending_.clear();
    for (auto& [name, channel] : channels_) {
        channel.listening = false;
        pending_.push_back({true, name});
    }
    // The connection may fail inside begin(): the pointer is set first and cleared there.
    connection_ = ListenConnection::create(worker_, std::move(setup), *this);
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
    connection_->run_statement(std::string(running_.listen ? "LISTEN " : "UNLISTEN ") +
                               protocol::quote_identifier(running_.channel));
}

void ListenHub::on_answer(bool ok, const std::string& error) {
    query_running_ = false;
    if (!ok) {
        // PostgreSQL refuses a LISTEN only when something is badly wrong (out of memory, the
        // queue full): start over on a new connection.
        spdlog::warn("listening connection of {}/{}: {} \"{}\" failed: {}", pool_.database_name(),
                     pool_.user_name(), running_.listen ? "LISTEN" : "UNLISTEN", running_.channel,
                     error);
        if (connection_) connection_->stop();
        on_failed("LISTEN failed: " + error);
        return;
    }
    if (running_.listen) {
        auto it = channels_.find(running_.channel);
        if (it != channels_.end()) it->second.listening = true;
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
    retry_at_ms_ = worker_.now_ms() + kRetryMs;
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
    if (was_connected && !channels_.empty() && worker_.now_ms() >= opened_at_ms_ + kRetryMs) {
        open();
    }
}

std::vector<ListenHub::ChannelView> ListenHub::channels() const {
    std::vector<ChannelView> out;
    for (const auto& [name, channel] : channels_) {
        out.push_back({name, static_cast<int>(channel.listeners.size()), channel.delivered,
                       channel.dropped, channel.listening});
    }
    return out;
}

const char* ListenHub::connection_state() const {
    if (connection_) return connected_ ? "listening" : "connecting";
    return channels_.empty() ? "none" : "reconnecting";
}

}  // namespace pgtether
