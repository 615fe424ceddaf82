// The auth_query lookups of one worker: a few pooled connections as auth_user per database, with
// the lookups queued behind them, as PgBouncer runs its auth query over the auth_user's pool.
//
// Before pgtether pooled them, every login of a user not in auth_file opened a PostgreSQL
// connection of its own, before the client had proved anything: a flood of logins with made-up
// user names became a flood of PostgreSQL logins and used up max_connections for everyone. Now
//   - at most kMaxConnections connections per target (server, database, auth_user) and worker
//     run lookups, one lookup at a time each, and are kept for the next lookups while idle (up to
//     server_idle_timeout);
//   - further lookups wait in a queue of at most kMaxQueued per target; beyond it a login is
//     refused at once (53300, as pgtether refuses max_client_conn) rather than held;
//   - a connection that cannot log in fails the lookups waiting for it, so an unreachable server
//     does not turn into a reconnect loop;
//   - a reload closes the idle connections and retires the busy ones after their lookup, so
//     nothing made with the old auth_user, password, server or TLS settings outlives it. Secrets
//     are never cached: every lookup asks the server again.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proxy/server/auth_query.hpp"

namespace pgtether {

class ServerContext;

class AuthLookups {
  public:
    // Connections per target and worker that run lookups at the same time.
    static constexpr std::size_t kMaxConnections = 2;
    // Lookups per target and worker that may wait for one of those connections.
    static constexpr std::size_t kMaxQueued = 1000;

    explicit AuthLookups(ServerContext& context);
    ~AuthLookups();
    AuthLookups(const AuthLookups&) = delete;
    AuthLookups& operator=(const AuthLookups&) = delete;

    // Looks up `user`'s secret with `target.query` as `target.credentials` on
    // `target.database`. `done` runs exactly once unless cancel() comes first -- possibly from
    // inside this call, when no connection can even be attempted. nullopt: the queue is full and
    // nothing was started (`done` never runs).
    [[nodiscard]] std::optional<std::uint64_t> lookup(AuthQuery::Target target, std::string user,
                                                      AuthQuery::Callback done);
    // The client went away: its `done` will not run.
    void cancel(std::uint64_t ticket);

    // Timeouts: connections that do not log in or answer within server_connect_timeout fail,
    // idle ones close after server_idle_timeout.
    void janitor(std::uint64_t now_ms);
    // A reload: close idle connections, retire busy ones once their lookup is done.
    void on_reload();
    // Shutdown: close everything; waiting lookups fail.
    void close_all();

    // ---- from AuthQuery ----
    void on_connection_ready(AuthQuery& connection);
    void on_lookup_done(AuthQuery& connection, AuthQuery::Result&& result);
    void on_connection_lost(AuthQuery& connection, const std::string& why);
    // The connection works but must not serve again (its query left a transaction open).
    void on_connection_retired(AuthQuery& connection);

  private:
    struct Waiting {
        std::uint64_t ticket = 0;
        std::string user;
        std::string query;
        AuthQuery::Callback done;
    };
    struct Connection {
        AuthQuery* query = nullptr;
        std::uint64_t generation = 0;
        std::optional<Waiting> running;
    };
    struct Target {
        std::string key;           // in targets_
        AuthQuery::Target target;  // how to connect (the first lookup's; equal for all by key)
        std::deque<Waiting> queue;
        std::vector<Connection> connections;
        // A host list: the host new connections go to, and how many hosts in a row have failed
        // before a login (lookups fail only once every host has; libpq's way with host lists).
        std::size_t host = 0;
        std::size_t hosts_failed = 0;
    };

    static std::string key_of(const AuthQuery::Target& target, const std::string& unix_path);
    // Starts queued lookups on ready connections and opens connections while allowed.
    void pump(std::string key);
    void fail_queue(Target& target, const std::string& why);
    // Finds the entry and connection record of `connection`.
    std::pair<Target*, Connection*> find(const AuthQuery& connection);
    void remove(const AuthQuery& connection);

    ServerContext& context_;
    std::map<std::string, Target> targets_;
    std::uint64_t last_ticket_ = 0;
    std::uint64_t generation_ = 0;
};

}  // namespace pgtether
