// What the admin console's process-control commands change: which databases are paused or
// disabled, and who is waiting for a PAUSE or WAIT_CLOSE to complete. Semantics are PgBouncer's
// (man pgbouncer, "Process controlling commands"):
//
//   PAUSE [db]      new requests wait; idle servers close; servers close as their clients release
//                   them. Done when the database (or every database) has no server left. A
//                   tethered client keeps its server, so PAUSE waits for it to release its locks
//                   or leave; the waiting console is told which clients it waits for.
//   RESUME [db]     ends a PAUSE or KILL.
//   KILL db         closes every client and server of the database at once and leaves it paused.
//   DISABLE db      new logins to the database are refused; ENABLE undoes it.
//   RECONNECT [db]  servers are closed when next released instead of being reused.
//   WAIT_CLOSE [db] done when no server of the database is still marked for closing.
//
// The state belongs to a worker; with several, the admin console and the signals apply each
// command to every worker (docs/admin.md, "Several workers"), so their states are the same. Database names are the names
// clients use ([databases] entries, or names served through the "*" fallback).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pgtether {

class ConsoleSession;
class Client;
class Pool;
class Server;
class PoolContext;

class PoolControl {
  public:
    explicit PoolControl(PoolContext& context) : context_(context) {}
    PoolControl(const PoolControl&) = delete;
    PoolControl& operator=(const PoolControl&) = delete;

    // ---- state queried by pools and clients ----
    [[nodiscard]] bool paused(const std::string& database) const {
        // Asked for every transaction: no lookup while nothing is paused.
        return paused_all_ || (!paused_.empty() && paused_.count(database) != 0);
    }
    [[nodiscard]] bool paused_all() const { return paused_all_; }
    [[nodiscard]] bool database_paused(const std::string& database) const {
        return paused_.count(database) != 0;
    }
    [[nodiscard]] bool disabled(const std::string& database) const {
        return disabled_.count(database) != 0;
    }
    // The databases paused on their own (PAUSE db, KILL db) and disabled (GET /readyz).
    [[nodiscard]] const std::set<std::string>& paused_databases() const { return paused_; }
    [[nodiscard]] const std::set<std::string>& disabled_databases() const { return disabled_; }

    // ---- commands; `database` nullopt means every database ----
    void pause(const std::optional<std::string>& database);
    // False when the scope was not paused.
    [[nodiscard]] bool resume(const std::optional<std::string>& database);
    void kill(const std::optional<std::string>& database);
    void reconnect(const std::optional<std::string>& database);
    void disable(const std::string& database) { disabled_.insert(database); }
    void enable(const std::string& database) { disabled_.erase(database); }

    // ---- what PAUSE and WAIT_CLOSE wait for ----
    // Servers of the database (every database) that are still open, on every worker.
    [[nodiscard]] int open_servers(const std::optional<std::string>& database) const;
    // Servers of the database still marked to close after their client releases them.
    [[nodiscard]] int servers_to_close(const std::optional<std::string>& database) const;
    // Clients that keep a server of the scope because they are tethered (PAUSE reports them).
    [[nodiscard]] std::vector<Client*> tethered_clients(
        const std::optional<std::string>& database) const;

    // An admin session waiting for PAUSE or WAIT_CLOSE is polled on every janitor tick.
    void add_waiter(ConsoleSession& session);
    void remove_waiter(ConsoleSession& session);
    // Janitor tick: closes idle servers of paused pools and lets waiting sessions check.
    void tick();
    // Lets waiting sessions check now: what one waits for may have happened (KILL_CLIENT of
    // another worker's client: that worker says so once it has closed the client).
    void poll_waiters();

  private:
    [[nodiscard]] bool in_scope(const Pool& pool, const std::optional<std::string>& database) const;
    void for_each_pool(const std::optional<std::string>& database,
                       const std::function<void(Pool&)>& fn) const;
    // server_fast_close: closes retired servers whose client is between transactions.
    void close_retired_linked_servers();

    PoolContext& context_;
    bool paused_all_ = false;
    std::set<std::string> paused_;
    std::set<std::string> disabled_;
    std::vector<ConsoleSession*> waiters_;
};

}  // namespace pgtether
