#include "proxy/server/auth_lookups.hpp"

#include "proxy/net/log.hpp"

#include "proxy/net/server_address.hpp"
#include "proxy/server/server_context.hpp"

namespace pgtether {

namespace {

AuthQuery::Result failed(const std::string& why) {
    AuthQuery::Result result;
    result.outcome = AuthQuery::Result::Outcome::Failed;
    result.error = why;
    return result;
}

}  // namespace

AuthLookups::AuthLookups(ServerContext& context) : context_(context) {}

AuthLookups::~AuthLookups() {
    for (auto& [key, target] : targets_) {
        for (auto& connection : target.connections)
            connection.query->close();
    }
}

std::string AuthLookups::key_of(const AuthQuery::Target& target, const std::string& unix_path) {
    // Everything the connection is made with. The TLS settings are not in it: they change only
    // with a reload, which retires every connection.
    const auto& db = target.database;
    const auto& c = target.credentials;
    std::string key;
    for (const std::string* part :
         {&unix_path, &db.host, &db.dbname, &db.name, &c.user, &c.require_auth.text}) {
        key += *part;
        key += '\0';
    }
    key += std::to_string(db.port);
    key += '\0';
    key += c.password ? "p" + *c.password : "-";
    key += '\0';
    key += c.md5_secret ? "m" + *c.md5_secret : "-";
    return key;
}

std::optional<std::uint64_t> AuthLookups::lookup(AuthQuery::Target target, std::string user,
                                                 AuthQuery::Callback done) {
    // The key names the whole host list; the connection goes to Target::host of it.
    const auto& db = target.database;
    std::string key =
        key_of(target, server_unix_socket_path(host_for_turn(db, 0), db.port, context_.config()));
    auto [it, inserted] = targets_.try_emplace(key);
    Target& entry = it->second;
    if (inserted) {
        entry.key = key;
        entry.target = target;
    }
    if (entry.queue.size() >= kMaxQueued) return std::nullopt;
    Waiting waiting;
    waiting.ticket = ++last_ticket_;
    waiting.user = std::move(user);
    waiting.query = std::move(target.query);
    waiting.done = std::move(done);
    const std::uint64_t ticket = waiting.ticket;
    entry.queue.push_back(std::move(waiting));
    pump(std::move(key));
    return ticket;
}

void AuthLookups::cancel(std::uint64_t ticket) {
    for (auto& [key, target] : targets_) {
        for (auto it = target.queue.begin(); it != target.queue.end(); ++it) {
            if (it->ticket == ticket) {
                target.queue.erase(it);
                return;
            }
        }
        for (auto& connection : target.connections) {
            // The lookup runs on: its connection is reused once it answers.
            if (connection.running && connection.running->ticket == ticket) {
                connection.running->done = nullptr;
                return;
            }
        }
    }
}

void AuthLookups::pump(std::string key) {
    auto it = targets_.find(key);
    if (it == targets_.end()) return;
    Target& target = it->second;
    // Ready connections take the oldest lookups.
    for (std::size_t i = 0; i < target.connections.size() && !target.queue.empty(); ++i) {
        Connection& connection = target.connections[i];
        if (!connection.query->ready() || connection.running) continue;
        connection.running = std::move(target.queue.front());
        target.queue.pop_front();
        connection.query->run(connection.running->user, connection.running->query);
    }
    // More connections while lookups wait that no connection being opened will take.
    std::size_t starting = 0;
    for (const auto& connection : target.connections)
        starting += connection.query->starting();
    // (At most kMaxConnections attempts per call: one that fails at once while another
    // connection is busy must not turn into a loop.)
    for (std::size_t attempts = 0; attempts < kMaxConnections && target.queue.size() > starting &&
                                   target.connections.size() < kMaxConnections;
         ++attempts) {
        AuthQuery* query = AuthQuery::create(context_, *this, target.target, target.host);
        target.connections.push_back(Connection{query, generation_, std::nullopt});
        ++starting;
        query->begin();  // may fail at once: on_connection_lost then removed it
        it = targets_.find(key);
        if (it == targets_.end()) return;
    }
    if (target.connections.empty() && target.queue.empty()) targets_.erase(it);
}

std::pair<AuthLookups::Target*, AuthLookups::Connection*> AuthLookups::find(
    const AuthQuery& query) {
    for (auto& [key, target] : targets_) {
        for (auto& connection : target.connections) {
            if (connection.query == &query) return {&target, &connection};
        }
    }
    return {nullptr, nullptr};
}

void AuthLookups::remove(const AuthQuery& query) {
    for (auto it = targets_.begin(); it != targets_.end(); ++it) {
        auto& connections = it->second.connections;
        for (auto c = connections.begin(); c != connections.end(); ++c) {
            if (c->query != &query) continue;
            connections.erase(c);
            if (connections.empty() && it->second.queue.empty()) targets_.erase(it);
            return;
        }
    }
}

void AuthLookups::on_connection_ready(AuthQuery& query) {
    auto [target, connection] = find(query);
    if (!target) return;
    target->hosts_failed = 0;
    if (connection->generation != generation_) {
        // Made before a reload: nothing of the old configuration stays; a fresh connection
        // takes over what waits.
        std::string key = target->key;
        query.close();
        remove(query);
        pump(std::move(key));
        return;
    }
    pump(target->key);
}

void AuthLookups::on_lookup_done(AuthQuery& query, AuthQuery::Result&& result) {
    auto [target, connection] = find(query);
    if (!target || !connection->running) return;
    Waiting waiting = std::move(*connection->running);
    connection->running.reset();
    if (waiting.done) waiting.done(std::move(result));
}

void AuthLookups::on_connection_lost(AuthQuery& query, const std::string& why) {
    auto [target, connection] = find(query);
    if (!target) return;
    // The lookups waiting for this target fail with the reason when no other connection can
    // serve them: an unreachable server or a refused auth_user login is then one error for each
    // waiting client, not a reconnect loop.
    bool others = target->connections.size() > 1;
    // A connection that never logged in: with a host list, the next host is tried before the
    // lookups fail (the first host may be a primary that went away in a failover).
    const std::size_t hosts = split_host_list(target->target.database.host).size();
    if (!query.logged_in() && hosts > 1) {
        target->host = (target->host + 1) % hosts;
        if (++target->hosts_failed < hosts) {
            std::string key = target->key;
            remove(query);
            pump(std::move(key));
            return;
        }
    }
    target->hosts_failed = 0;
    std::deque<Waiting> orphans;
    if (!others) orphans.swap(target->queue);
    remove(query);
    for (auto& waiting : orphans) {
        if (waiting.done) waiting.done(failed(why));
    }
}

void AuthLookups::on_connection_retired(AuthQuery& query) {
    auto [target, connection] = find(query);
    if (!target) return;
    std::string key = target->key;
    remove(query);
    pump(std::move(key));  // a fresh connection for those still waiting
}

void AuthLookups::fail_queue(Target& target, const std::string& why) {
    std::deque<Waiting> orphans;
    orphans.swap(target.queue);
    for (auto& waiting : orphans) {
        if (waiting.done) waiting.done(failed(why));
    }
}

void AuthLookups::janitor(std::uint64_t now_ms) {
    const auto& config = context_.config();
    const std::uint64_t connect_timeout = duration_ms(config.server_connect_timeout);
    const std::uint64_t idle_timeout = duration_ms(config.server_idle_timeout);
    std::vector<AuthQuery*> late;
    std::vector<AuthQuery*> idle;
    for (auto& [key, target] : targets_) {
        for (auto& connection : target.connections) {
            const std::uint64_t age = now_ms - connection.query->phase_since_ms();
            if (connection.query->ready() && !connection.running) {
                if (idle_timeout > 0 && age >= idle_timeout) idle.push_back(connection.query);
            } else if (connect_timeout > 0 && age >= connect_timeout) {
                late.push_back(connection.query);
            }
        }
    }
    for (AuthQuery* query : idle) {
        query->close();
        remove(*query);
    }
    for (AuthQuery* query : late) {
        auto [target, connection] = find(*query);
        if (!target) continue;
        std::string why = connection->query->starting()
                              ? "auth_user login timed out (server_connect_timeout)"
                              : "auth_query timed out (server_connect_timeout)";
        std::optional<Waiting> running = std::move(connection->running);
        query->close();
        on_connection_lost(*query, why);
        if (running && running->done) running->done(failed(why));
    }
}

void AuthLookups::on_reload() {
    ++generation_;
    std::vector<AuthQuery*> idle;
    for (auto& [key, target] : targets_) {
        for (auto& connection : target.connections) {
            if (connection.query->ready() && !connection.running) idle.push_back(connection.query);
        }
    }
    for (AuthQuery* query : idle) {
        query->close();
        remove(*query);
    }
}

void AuthLookups::close_all() {
    auto targets = std::move(targets_);
    targets_.clear();
    for (auto& [key, target] : targets) {
        for (auto& connection : target.connections) {
            connection.query->close();
            if (connection.running && connection.running->done) {
                connection.running->done(failed("pgtether is shutting down"));
            }
        }
        fail_queue(target, "pgtether is shutting down");
    }
}

}  // namespace pgtether
