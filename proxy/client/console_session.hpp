// What a client of the admin console is served by, as its Client sees it: the session
// (proxy/admin/admin_console.hpp, an AdminSession) is opened by the worker
// (ClientContext::open_admin_session), and the Client hands it its input, its drained output, a
// CancelRequest and its close. PoolControl keeps the sessions that wait for a PAUSE, WAIT_CLOSE
// or KILL_CLIENT and polls them. An interface, so that client/ and pool/ build and link without
// the console (docs/architecture.md, "Layer rules").
#pragma once

#include <cstddef>
#include <string_view>

#include "protocol/bytes.hpp"
#include "protocol/startup.hpp"

namespace pgtether {

// Whether a client asking for database `name` wants the console (PgBouncer's tools ask for
// "pgbouncer").
[[nodiscard]] inline bool is_console_database(std::string_view name) {
    return name == "pgtether" || name == "pgbouncer";
}

class ConsoleSession {
public:
    virtual ~ConsoleSession() = default;

    // Whether the authenticated user may use the console at all (admin_users, stats_users).
    [[nodiscard]] virtual bool may_log_in() const = 0;
    // AuthenticationOk, PgBouncer's console parameters, BackendKeyData and ReadyForQuery.
    virtual void send_welcome(const protocol::CancelKey& key) = 0;
    // Messages from the client; returns bytes consumed.
    virtual std::size_t on_data(protocol::ByteSpan data) = 0;
    // Everything sent so far reached the kernel: read the next commands.
    virtual void on_output_drained() = 0;
    // A CancelRequest for this client: stops waiting for PAUSE / WAIT_CLOSE (psql's ^C).
    virtual void on_cancel_request() = 0;
    // The client is closing.
    virtual void on_close() = 0;
    // While a PAUSE, WAIT_CLOSE or KILL_CLIENT waits: called by PoolControl on every janitor
    // tick, and when another worker reports that a KILL_CLIENT's client is closed.
    virtual void poll() = 0;
    // Waiting for a PAUSE, WAIT_CLOSE or KILL_CLIENT to complete (not idleness).
    [[nodiscard]] virtual bool waiting() const = 0;
};

}  // namespace pgtether
