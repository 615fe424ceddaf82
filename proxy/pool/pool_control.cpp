#include "proxy/pool/pool_control.hpp"

#include <algorithm>

#include "protocol/message_types.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/console_session.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_context.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

bool PoolControl::in_scope(const Pool& pool, const std::optional<std::string>& database) const {
    return !database || pool.database_name() == *database;
}

void PoolControl::for_each_pool(const std::optional<std::string>& database,
                                const std::function<void(Pool&)>& fn) const {
    for (const auto& [key, pool] : context_.pools()) {
        if (in_scope(*pool, database)) fn(*pool);
    }
}

void PoolControl::pause(const std::optional<std::string>& database) {
    if (database) {
        paused_.insert(*database);
    } else {
        paused_all_ = true;
    }
    for_each_pool(database, [](Pool& pool) { pool.close_idle_servers("pause mode"); });
}

bool PoolControl::resume(const std::optional<std::string>& database) {
    if (database) {
        if (paused_.erase(*database) == 0) return false;
    } else {
        if (!paused_all_) return false;
        paused_all_ = false;
    }
    // Pools still paused by the other kind of PAUSE stay put (Pool::resume checks paused()).
    for_each_pool(database, [](Pool& pool) { pool.resume(); });
    return true;
}

void PoolControl::kill(const std::optional<std::string>& database) {
    if (database) {
        paused_.insert(*database);
    } else {
        paused_all_ = true;
    }
    // Collect first: closing changes the lists being walked.
    std::vector<Client*> clients;
    context_.for_each_client([&](Client& client) {
        if (client.pool() && in_scope(*client.pool(), database) &&
            client.state() != Client::State::Closing) {
            clients.push_back(&client);
        }
    });
    for (Client* client : clients) {
        client->fail(protocol::sqlstate::kAdminShutdown,
                     "terminating connection: database \"" + client->pool()->database_name() +
                         "\" was killed by an administrator (KILL)");
    }
    std::vector<Server*> servers;
    context_.for_each_server([&](Server& server) {
        if (in_scope(server.pool(), database) && server.state() != Server::State::Closing) {
            servers.push_back(&server);
        }
    });
    for (Server* server : servers)
        server->close("KILL on the admin console");
}

void PoolControl::reconnect(const std::optional<std::string>& database) {
    for_each_pool(database, [](Pool& pool) { pool.close_all_servers("RECONNECT"); });
}

int PoolControl::open_servers(const std::optional<std::string>& database) const {
    const auto& budget = context_.budget();
    return database ? budget.database_servers(*database) : budget.total_servers();
}

int PoolControl::servers_to_close(const std::optional<std::string>& database) const {
    int count = 0;
    context_.for_each_server([&](Server& server) {
        if (in_scope(server.pool(), database) && server.retired() &&
            server.state() != Server::State::Closing) {
            ++count;
        }
    });
    return count;
}

std::vector<Client*> PoolControl::tethered_clients(
    const std::optional<std::string>& database) const {
    std::vector<Client*> out;
    context_.for_each_client([&](Client& client) {
        if (client.tethered() && client.server() && client.pool() &&
            in_scope(*client.pool(), database) && client.state() != Client::State::Closing) {
            out.push_back(&client);
        }
    });
    return out;
}

void PoolControl::close_retired_linked_servers() {
    // PgBouncer's janitor: a server marked for closing (RECONNECT, a changed database entry)
    // that is linked but between transactions -- a session-pooled client's -- is closed now
    // rather than at the client's end; its client is disconnected with it.
    std::vector<Server*> servers;
    context_.for_each_server([&](Server& server) {
        if (server.retired() && server.state() == Server::State::Linked && server.client() &&
            server.link().tracker().quiet() &&
            server.link().tracker().tx_status() == protocol::kTxIdle) {
            servers.push_back(&server);
        }
    });
    for (Server* server : servers)
        server->close("database configuration changed (server_fast_close)");
}

void PoolControl::add_waiter(ConsoleSession& session) {
    if (std::find(waiters_.begin(), waiters_.end(), &session) == waiters_.end()) {
        waiters_.push_back(&session);
    }
}

void PoolControl::remove_waiter(ConsoleSession& session) {
    waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), &session), waiters_.end());
}

void PoolControl::tick() {
    for (const auto& [key, pool] : context_.pools()) {
        if (pool->paused() && pool->idle_count() > 0) pool->close_idle_servers("pause mode");
    }
    if (context_.config().server_fast_close) close_retired_linked_servers();
    poll_waiters();
}

void PoolControl::poll_waiters() {
    // A session may finish (and remove itself) while being polled.
    auto waiters = waiters_;
    for (ConsoleSession* session : waiters) {
        if (std::find(waiters_.begin(), waiters_.end(), session) != waiters_.end()) {
            session->poll();
        }
    }
}

}  // namespace pgtether
