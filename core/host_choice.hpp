// Which host of a [databases] host list a new server connection goes to, and whether the server
// it reached is the kind the database asks for (docs/deployment.md, "Primaries and standbys"):
// libpq's target_session_attrs and load_balance_hosts, with a back-off for hosts that failed.
// Pure: Pool keeps a HostStatus per host and Server carries the choice out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/query_result.hpp"

namespace pgtether {

// libpq's target_session_attrs, with libpq's meaning.
enum class SessionAttrs { Any, ReadWrite, ReadOnly, Primary, Standby, PreferStandby };

[[nodiscard]] std::optional<SessionAttrs> parse_session_attrs(std::string_view text);
[[nodiscard]] const char* session_attrs_name(SessionAttrs attrs);

// What a server said about itself: the in_hot_standby and default_transaction_read_only it
// reports (ParameterStatus, PostgreSQL 14+).
struct ServerRole {
    bool in_hot_standby = false;
    bool read_only = false;  // default_transaction_read_only
};

// A server that does not report its role (PostgreSQL 13 and older send no in_hot_standby) is asked,
// as libpq asks such a server: whether it is in recovery, and whether its transactions are
// read-only (on for a standby too). One row of two values; decode_role_check reads it.
inline constexpr std::string_view kRoleCheckQuery =
    "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('transaction_read_only')";
// The role kRoleCheckQuery's answer gives, or nullopt when the rows are not its answer.
[[nodiscard]] std::optional<ServerRole> decode_role_check(const std::vector<Row>& rows);

// Whether a server with `role` serves a database asking for `attrs`. PreferStandby is served by
// a standby, and by anything once no standby can be had (`fallback`), as libpq does.
[[nodiscard]] bool role_fits(SessionAttrs attrs, const ServerRole& role, bool fallback);

// What pgtether knows of one host.
struct HostStatus {
    enum class Known { Nothing, Primary, Standby };
    Known known = Known::Nothing;   // its role at the last login there
    bool read_only = false;         // its default_transaction_read_only then
    std::uint64_t backoff_until_ms = 0;  // skipped until then (a failure or the wrong role)
    std::uint64_t last_check_ms = 0;     // the last login there, whatever came of it
    int failures = 0;                    // in a row
    bool wrong_role = false;             // the last failure was the wrong role, not a refusal
};

// The host for the next server connection of a pool, by index into `hosts`. Hosts out of their
// back-off come first: those whose known role fits (or, for PreferStandby, known standbys) and
// those not tried yet, then (PreferStandby) known primaries, then those that failed last time
// or are known not to fit (to see whether
// they changed: a promotion), the least recently tried (last_check_ms) first; when every host is
// backing off, the one whose back-off ends first. Otherwise among equals the order is the
// list's, starting at `turn` when `round_robin` (load_balance_hosts = round-robin, PgBouncer's
// behaviour for host lists) or at the first host (disable: the first that works, as libpq).
// Never empty for a non-empty list: the pool's own login back-off paces the attempts. The caller
// stamps the chosen host's last_check_ms (note_host_attempt), so that attempts launched together
// spread over the candidates.
[[nodiscard]] std::size_t choose_host(const std::vector<HostStatus>& hosts, SessionAttrs attrs,
                                      bool round_robin, std::uint64_t turn, std::uint64_t now_ms);

// Whether a login that reached `role` on hosts[index] serves the database. As role_fits, except
// that a primary serves prefer-standby only when no standby can be had: every other host is
// backing off or known to be a primary (one not tried yet may be a standby).
[[nodiscard]] bool login_serves(const std::vector<HostStatus>& hosts, std::size_t index,
                                SessionAttrs attrs, const ServerRole& role, std::uint64_t now_ms);

// A connection to the host is being made.
inline void note_host_attempt(HostStatus& host, std::uint64_t now_ms) { host.last_check_ms = now_ms; }
// A login on the host failed (refused, timed out, broke) or reached a server of the wrong role:
// skip it for `backoff_ms`.
void note_host_failure(HostStatus& host, bool wrong_role, std::uint64_t now_ms,
                       std::uint64_t backoff_ms);
// A login on the host succeeded (whatever the role fit): remember its role.
void note_host_login(HostStatus& host, const ServerRole& role, std::uint64_t now_ms);

// Whether a pooled server connected to `host` should be asked its role again (the periodic
// check of servers that do not report it): nothing was learnt of the host -- a login there, or
// the last check -- for `interval_ms` (server_check_delay; 0: at every janitor tick).
[[nodiscard]] inline bool role_check_due(const HostStatus& host, std::uint64_t now_ms,
                                         std::uint64_t interval_ms) {
    return now_ms >= host.last_check_ms && now_ms - host.last_check_ms >= interval_ms;
}

// What one pool learnt of a host that holds for every pool using the same host and port: it
// refused or timed out, or a login there found its role. A pool's wrong-role back-off is not
// such news: it depends on that pool's target_session_attrs.
struct HostNews {
    enum class Kind : std::uint8_t { Unreachable, LoggedIn };
    Kind kind = Kind::Unreachable;
    std::string host;  // as the [databases] host list names it
    int port = 0;
    std::uint64_t backoff_ms = 0;  // Unreachable: server_host_backoff
    ServerRole role;               // LoggedIn
};

// Applies `news` from another pool (of this worker, or of another, or the worker's memory for a
// new pool) to this pool's record of the same host. Unreachable: skipped as if this pool had
// failed there (a back-off already longer stays). LoggedIn: the role is known; a back-off ends
// unless it is this pool's own wrong-role one and the role has not changed.
void apply_host_news(HostStatus& host, const HostNews& news, std::uint64_t now_ms);

// The host's state for SHOW HOSTS: "up", "backoff" (with the reason) or "unknown".
[[nodiscard]] std::string host_state_name(const HostStatus& host, std::uint64_t now_ms);
[[nodiscard]] const char* host_role_name(const HostStatus& host);

}  // namespace pgtether
