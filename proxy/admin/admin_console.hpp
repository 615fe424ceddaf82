// The admin console: a client that connects to the virtual database "pgtether" (or "pgbouncer",
// so that PgBouncer's tools work unchanged) is authenticated like any client and then served by
// pgtether itself instead of a pool. Only the simple query protocol is spoken, one command per
// Query (protocol/admin_command.hpp); admin_users may run every command, stats_users only SHOW.
// docs/admin.md describes every command.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/admin_command.hpp"
#include "protocol/bytes.hpp"
#include "protocol/startup.hpp"
#include "proxy/client/console_session.hpp"

namespace pgtether {

class Client;
class AdminContext;

class AdminSession final : public ConsoleSession {
  public:
    AdminSession(AdminContext& worker, Client& client);
    ~AdminSession() override;
    AdminSession(const AdminSession&) = delete;
    AdminSession& operator=(const AdminSession&) = delete;

    // The console's side of ConsoleSession (proxy/client/console_session.hpp).
    [[nodiscard]] bool may_log_in() const override;
    void send_welcome(const protocol::CancelKey& key) override;
    std::size_t on_data(protocol::ByteSpan data) override;
    void on_output_drained() override;
    void on_cancel_request() override;
    void on_close() override;
    void poll() override;
    [[nodiscard]] bool waiting() const override { return wait_ != Wait::None; }

  private:
    enum class Role { None, Stats, Admin };
    // KillClient: KILL_CLIENT of another worker's client, answered once that worker closed it.
    enum class Wait { None, Pause, WaitClose, KillClient };

    // Looked up in the running configuration for every command, so a reload or SET that removes
    // a user from admin_users takes effect at once.
    [[nodiscard]] Role role() const;
    void execute(std::string_view query);
    void run(const protocol::AdminCommand& command, std::string_view query);
    // `query` is the command as typed, which an error for an unknown subject quotes.
    void show(const std::string& what, std::string_view query);
    void set(const protocol::AdminCommand& command);
    // Optional database argument: nullopt for "all", after checking the named one exists and is
    // not the console itself (then an error was sent and `ok` is false).
    std::optional<std::string> database_argument(const protocol::AdminCommand& command,
                                                 const char* verb, bool& ok);
    void start_wait(Wait wait, std::optional<std::string> database);
    // Applies a command to every worker (the admin console's process control is the process's).
    void on_every_worker(const std::function<void(AdminContext&)>& fn);
    void finish_wait(const char* tag);

    void send_error(const char* sqlstate, const std::string& message);
    // PgBouncer's answer to anything it does not know, quoting the whole query as typed
    // (spacing, quotes and semicolon included) so the operator sees exactly what was refused.
    void send_invalid_command(std::string_view query);
    void send_notice(const std::string& message, const std::string& detail = {});
    void complete(const std::string& tag);  // CommandComplete + ReadyForQuery

    AdminContext& worker_;
    Client& client_;
    Wait wait_ = Wait::None;
    std::optional<std::string> wait_database_;
    std::uint64_t kill_client_id_ = 0;  // Wait::KillClient: the client's id
    std::string last_wait_report_;
    std::string pending_;  // output built by the current command
};

}  // namespace pgtether
