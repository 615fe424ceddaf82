// When a pool tries again after a failed server login, and whether its clients wait meanwhile.
//
// PgBouncer waits server_login_retry (15 s) after any failed login, so a PostgreSQL restart that
// takes a third of a second stalls every client for 15 s. pgtether tells two kinds of failure
// apart: a server that cannot be reached or is starting up or shutting down comes back on its own,
// so it is retried soon and then less often (at most every second, never less often than
// server_login_retry allows), and clients keep waiting for it; a server that refuses the login
// (authentication, unknown database, ...) needs an operator, so it gets the full
// server_login_retry and the waiting clients get its error at once (PgBouncer's fast fail).
// Pure: times are passed in, nothing here does I/O.
#pragma once

#include <cstdint>
#include <string_view>

namespace pgtether {

enum class LoginFailureKind {
    Unreachable,  // no connection, a connection that broke or timed out during login, or
                  // 57P01/57P02/57P03 from the server: PostgreSQL is (re)starting
    Refused,      // anything else: authentication, unknown database, limits, TLS to the
                  // server, a failed connect_query, a server that breaks the protocol
    WrongRole,    // a server of the wrong role for target_session_attrs (a standby where a
                  // primary is wanted): retried like Unreachable, and while a streak has seen
                  // one, clients keep waiting (query_wait_timeout): a failover may be under way
};

// An ErrorResponse the server sent during login, by its SQLSTATE. (Failures pgtether notices
// itself are classified where they happen, in proxy/server/server.cpp.)
[[nodiscard]] LoginFailureKind classify_login_failure(std::string_view sqlstate);

// The wait before the next attempt after `failures` (1, 2, ...) failures in a row of this kind:
// Unreachable doubles from 50 ms up to min(1 s, server_login_retry); Refused waits
// server_login_retry.
[[nodiscard]] std::uint64_t login_retry_delay_ms(LoginFailureKind kind, int failures,
                                                 std::uint64_t server_login_retry_ms);

// After a failed login that fails the clients waiting for the pool's first greeting
// (LoginBackoff::fail_clients): whether the clients queued for a server are failed too, with the
// login error. They are when no server of the pool can serve them any more -- none logged in
// that is not retired (RECONNECT, changed settings) -- as PgBouncer does since 1.22 (its fast
// fail covers "no working connection exists and none can be established"); while one can, they
// keep waiting for it.
[[nodiscard]] bool fail_queued_clients(bool login_fails_clients, int working_servers);

// A pool's record of failed logins since the last successful one.
class LoginBackoff {
public:
    void on_failure(LoginFailureKind kind, std::uint64_t now_ms,
                    std::uint64_t server_login_retry_ms);
    void on_success() { *this = LoginBackoff(); }
    // Something a login is made from changed (a RELOAD or a console SET of the server's address,
    // credentials or TLS settings): the change may be the fix, so the failure is forgotten and
    // the next client gets a new attempt at once instead of the old error for the rest of
    // server_login_retry (PgBouncer connects with the new settings at once too).
    void on_login_settings_changed() { *this = LoginBackoff(); }

    [[nodiscard]] bool failing() const { return failures_ > 0; }
    // The streak's kind (its last failure's), when it began and its last failure (readiness).
    [[nodiscard]] LoginFailureKind kind() const { return kind_; }
    [[nodiscard]] std::uint64_t failing_since_ms() const { return failing_since_ms_; }
    [[nodiscard]] std::uint64_t last_failure_ms() const { return last_failure_ms_; }
    // Whether a new login may be attempted now.
    [[nodiscard]] bool may_attempt(std::uint64_t now_ms) const {
        return now_ms >= next_attempt_ms_;
    }
    // Whether clients without a server should get the login error now instead of waiting: the
    // server refused, or it has been unreachable for longer than server_login_retry.
    [[nodiscard]] bool fail_clients(std::uint64_t now_ms,
                                    std::uint64_t server_login_retry_ms) const;

private:
    int failures_ = 0;
    bool wrong_role_seen_ = false;  // a WrongRole failure in this streak
    LoginFailureKind kind_ = LoginFailureKind::Unreachable;
    std::uint64_t failing_since_ms_ = 0;
    std::uint64_t last_failure_ms_ = 0;
    std::uint64_t next_attempt_ms_ = 0;
};

}  // namespace pgtether
