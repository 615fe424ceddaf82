#include "core/login_retry.hpp"

#include <algorithm>
#include <initializer_list>

namespace pgtether {

namespace {
constexpr std::uint64_t kFirstRetryMs = 50;
// A server that comes back is found within this long.
constexpr std::uint64_t kMaxUnreachableRetryMs = 1000;
}  // namespace

LoginFailureKind classify_login_failure(std::string_view sqlstate) {
    // 57P01 admin_shutdown and 57P02 crash_shutdown reach a login that raced a shutdown; 57P03
    // cannot_connect_now is "the database system is starting up / shutting down / not yet
    // accepting connections".
    for (std::string_view transient : {"57P01", "57P02", "57P03"}) {
        if (sqlstate == transient) return LoginFailureKind::Unreachable;
    }
    return LoginFailureKind::Refused;
}

std::uint64_t login_retry_delay_ms(LoginFailureKind kind, int failures,
                                   std::uint64_t server_login_retry_ms) {
    if (kind == LoginFailureKind::Refused) return server_login_retry_ms;
    const std::uint64_t cap = std::min(kMaxUnreachableRetryMs, server_login_retry_ms);
    std::uint64_t delay = kFirstRetryMs;
    for (int i = 1; i < failures && delay < cap; ++i) delay *= 2;
    return std::min(delay, cap);
}

bool fail_queued_clients(bool login_fails_clients, int working_servers) {
    return login_fails_clients && working_servers == 0;
}

void LoginBackoff::on_failure(LoginFailureKind kind, std::uint64_t now_ms,
                              std::uint64_t server_login_retry_ms) {
    if (failures_ == 0) failing_since_ms_ = now_ms;
    ++failures_;
    kind_ = kind;
    if (kind == LoginFailureKind::WrongRole) wrong_role_seen_ = true;
    last_failure_ms_ = now_ms;
    next_attempt_ms_ = now_ms + login_retry_delay_ms(kind, failures_, server_login_retry_ms);
}

bool LoginBackoff::fail_clients(std::uint64_t now_ms, std::uint64_t server_login_retry_ms) const {
    if (failures_ == 0) return false;
    if (kind_ == LoginFailureKind::Refused) {
        return now_ms - last_failure_ms_ < server_login_retry_ms;
    }
    // A host answered, with the wrong role: the clients wait for the promotion (or for
    // query_wait_timeout), not for server_login_retry.
    if (wrong_role_seen_) return false;
    return now_ms - failing_since_ms_ >= server_login_retry_ms;
}

}  // namespace pgtether
