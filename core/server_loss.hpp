// What a client is told when the backend it is linked to is lost (killed, crashed, a failover,
// the network), as values (docs/advisory-locks.md, "When the backend is lost"). Pure:
// Client::on_server_lost carries the answer out; Server holds back the backend's FATAL for a
// tethered client so that the client gets this answer instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/backend_messages.hpp"

namespace pgtether {

struct ServerLoss {
    bool client_waiting_for_server = false;  // the client is Active: its request has this server
    bool server_saw_requests = false;        // the client sent this server anything
    bool tethered = false;                   // the session held state on it (Client::tethered)
    bool fatal_forwarded = false;            // the client already has the backend's FATAL
};

enum class ServerLossAnswer {
    // The server failed before it served the client anything (a failed check or parameter
    // sync): the client quietly gets another one.
    Retry,
    // The client has the backend's own FATAL (57P01 after pg_terminate_backend, a shutdown):
    // that one error, then the connection closes, as from PostgreSQL directly.
    CloseAfterFatal,
    // pgtether's 08006 "server connection lost", then the connection closes.
    FailConnectionLost,
    // A tethered client: its session's locks, temp tables and listens died with the backend.
    // It must learn that in so many words and is disconnected; it is never handed another
    // backend as if it still held them (session_lost_error).
    FailSessionLost,
};

[[nodiscard]] ServerLossAnswer decide_server_loss(const ServerLoss& loss);

// The error a tethered client gets (FailSessionLost): SQLSTATE 08006, a message that says its
// session state is gone, naming `cause` (the backend's FATAL message or why pgtether closed the
// connection) and `held_state` (Client::describe_tether: "advisory locks 42; temp tables ...").
[[nodiscard]] protocol::ErrorFields session_lost_error(std::string_view cause,
                                                       std::string_view held_state);

}  // namespace pgtether
