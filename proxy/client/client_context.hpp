// What a client connection needs of the worker that accepted it, beyond what its servers need
// (a ServerContext; docs/architecture.md, "Layer rules"): the auth_file in force, its place
// among the process's clients, the databases and pools it may reach, the services its login
// runs on (password checks, auth_query lookups), its cancel key, the worker's statement
// registry, and where an unknown lock call is reported. A Worker is one (it derives from it);
// client/ reaches the worker through this alone.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/auth_file.hpp"
#include "core/config.hpp"
#include "core/prepared_statements.hpp"
#include "protocol/startup.hpp"
#include "proxy/client/client_counts.hpp"
#include "proxy/server/server_context.hpp"

namespace pgtether {

class ConsoleSession;
class AuthLookups;
class Client;
class LoginWork;
class Pool;

class ClientContext : public ServerContext {
public:
    ClientContext(std::size_t read_buffer, std::shared_ptr<const Config> config,
                  std::shared_ptr<const SecuritySetup> security,
                  std::shared_ptr<const AuthFile> auth_file)
        : ServerContext(read_buffer, std::move(config), std::move(security)),
          auth_file_(std::move(auth_file)) {}

    // The auth_file (userlist.txt) in force.
    [[nodiscard]] const AuthFile& auth_file() const { return *auth_file_; }
    [[nodiscard]] const std::shared_ptr<const AuthFile>& auth_file_ptr() const {
        return auth_file_;
    }

    // The process's clients: this worker's registry (SHOW CLIENTS, the janitor), the count
    // max_client_conn bounds, and the per-database and per-user counts of
    // max_db_client_connections / max_user_client_connections.
    virtual void register_client(Client& client) = 0;
    virtual void unregister_client(Client& client) = 0;
    // A closing client's max_client_conn place is free again (once per client).
    virtual void release_client_slot() = 0;
    [[nodiscard]] virtual bool over_client_limit() const = 0;
    [[nodiscard]] virtual ClientCounts& client_counts() = 0;

    // The [databases] entry clients reach under `name` (its own, or the "*" fallback); nullopt
    // when neither exists.
    [[nodiscard]] virtual std::optional<DatabaseConfig> resolve_database(
        const std::string& name) const = 0;
    // DISABLE on the console: new clients of `database` are refused.
    [[nodiscard]] virtual bool database_disabled(const std::string& database) const = 0;
    // The pool for a database entry and (server) user, created on first use.
    virtual Pool& pool_for(const DatabaseConfig& database, const std::string& user) = 0;
    // An admin console session for a client that logged in to the console database.
    virtual std::unique_ptr<ConsoleSession> open_admin_session(Client& client) = 0;

    // Logins' blocking work (PBKDF2, PAM, LDAP) off the loop, and auth_query lookups.
    [[nodiscard]] virtual LoginWork& login_work() = 0;
    [[nodiscard]] virtual AuthLookups& auth_lookups() = 0;

    // The client's cancel key, unique in the process (and carrying the peer id with peering),
    // given back when it leaves.
    virtual protocol::CancelKey add_cancel_key(Client& client) = 0;
    virtual void remove_cancel_key(const protocol::CancelKey& key) = 0;
    // A CancelRequest for `key` (arrived on connection `from`): the client holding it is
    // cancelled, on whichever worker it lives; an unknown key is ignored.
    virtual void cancel_key_holder(const protocol::CancelKey& key, const std::string& from) = 0;
    // A CancelRequest for another process's key goes on to that peer ([peers]).
    virtual void forward_cancel_to_peer(const PeerConfig& peer, const protocol::CancelKey& key) = 0;

    // Every distinct prepared statement any client of this worker prepared (a plain member: the
    // statement translation asks for it at every named Parse).
    [[nodiscard]] StatementRegistry& statements() { return statements_; }
    // A client called a function the tether's trigger does not know: discovery looks again.
    virtual void on_unknown_lock_call(const std::string& database) = 0;

protected:
    ~ClientContext() = default;
    void set_auth_file(std::shared_ptr<const AuthFile> auth_file) {
        auth_file_ = std::move(auth_file);
    }

private:
    std::shared_ptr<const AuthFile> auth_file_;
    // Declared before the pools and clients that hold its entries (in the derived contexts and
    // the worker), so it outlives them.
    StatementRegistry statements_;
};

}  // namespace pgtether
