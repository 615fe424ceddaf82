#include "core/server_loss.hpp"

#include "protocol/sqlstate.hpp"

namespace pgtether {

ServerLossAnswer decide_server_loss(const ServerLoss& loss) {
    // Session state first: a tethered client is never retried, even if the backend died before
    // its latest request reached it, and never left with only the backend's generic FATAL.
    if (loss.tethered) return ServerLossAnswer::FailSessionLost;
    if (!loss.server_saw_requests && loss.client_waiting_for_server) return ServerLossAnswer::Retry;
    if (loss.fatal_forwarded) return ServerLossAnswer::CloseAfterFatal;
    return ServerLossAnswer::FailConnectionLost;
}

protocol::ErrorFields session_lost_error(std::string_view cause, std::string_view held_state) {
    std::string message = "server connection lost, and with it this session's state";
    if (!held_state.empty()) {
        message += " (";
        message += held_state;
        message += ")";
    }
    if (!cause.empty()) {
        message += ": ";
        message += cause;
    }
    return protocol::ErrorFields{
        "FATAL",
        protocol::sqlstate::kConnectionFailure,
        std::move(message),
        "pgtether kept this client on one server connection because its session held state "
        "there (session advisory locks, temporary tables, LISTEN, ...). That connection is gone: "
        "the locks are released and the rest is lost; no other connection has them.",
        "Reconnect and set the session up again (take its advisory locks again).",
    };
}

}  // namespace pgtether
