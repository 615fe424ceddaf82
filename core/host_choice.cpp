#include "core/host_choice.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace pgtether {

namespace {

constexpr std::array<std::pair<std::string_view, SessionAttrs>, 6> kNames = {{
    {"any", SessionAttrs::Any},
    {"read-write", SessionAttrs::ReadWrite},
    {"read-only", SessionAttrs::ReadOnly},
    {"primary", SessionAttrs::Primary},
    {"standby", SessionAttrs::Standby},
    {"prefer-standby", SessionAttrs::PreferStandby},
}};

// How well a host suits `attrs`: lower is better.
int preference(const HostStatus& host, SessionAttrs attrs) {
    // A host whose last attempt failed (down, or the wrong role) may have changed since: tried
    // after every host that did not fail, the least recently tried first.
    if (host.failures > 0) return 3;
    // A host not tried yet may well qualify: as good as one that does, so that round robin
    // spreads over both (and a standby in a read-write list is found out at its first login).
    if (host.known == HostStatus::Known::Nothing) return 0;
    const ServerRole role{host.known == HostStatus::Known::Standby, host.read_only};
    if (role_fits(attrs, role, false)) return 0;
    if (attrs == SessionAttrs::PreferStandby) return 2;  // serves once no standby can be had
    return 3;  // known not to fit: tried last, to see whether it changed (a promotion)
}

}  // namespace

std::optional<SessionAttrs> parse_session_attrs(std::string_view text) {
    for (const auto& [name, attrs] : kNames) {
        if (name == text) return attrs;
    }
    return std::nullopt;
}

const char* session_attrs_name(SessionAttrs attrs) {
    for (const auto& [name, value] : kNames) {
        if (value == attrs) return name.data();
    }
    return "any";
}

bool role_fits(SessionAttrs attrs, const ServerRole& role, bool fallback) {
    switch (attrs) {
        case SessionAttrs::Any:
            return true;
        case SessionAttrs::ReadWrite:
            return !role.in_hot_standby && !role.read_only;
        case SessionAttrs::ReadOnly:
            return role.in_hot_standby || role.read_only;
        case SessionAttrs::Primary:
            return !role.in_hot_standby;
        case SessionAttrs::Standby:
            return role.in_hot_standby;
        case SessionAttrs::PreferStandby:
            return role.in_hot_standby || fallback;
    }
    return false;
}

std::size_t choose_host(const std::vector<HostStatus>& hosts, SessionAttrs attrs,
                        bool round_robin, std::uint64_t turn, std::uint64_t now_ms) {
    const std::size_t n = hosts.size();
    if (n <= 1) return 0;
    const std::size_t start = round_robin ? static_cast<std::size_t>(turn % n) : 0;
    std::optional<std::size_t> best;
    int best_preference = 0;
    std::optional<std::size_t> soonest;  // every host backing off: the first to come out
    for (std::size_t step = 0; step < n; ++step) {
        const std::size_t i = (start + step) % n;
        const HostStatus& host = hosts[i];
        if (host.backoff_until_ms > now_ms) {
            if (!soonest || host.backoff_until_ms < hosts[*soonest].backoff_until_ms) soonest = i;
            continue;
        }
        const int p = preference(host, attrs);
        // Among the hosts tried last, the least recently tried: a failover's candidates in turn.
        const bool older = best && p == 3 && p == best_preference &&
                           host.last_check_ms < hosts[*best].last_check_ms;
        if (!best || p < best_preference || older) {
            best = i;
            best_preference = p;
        }
    }
    return best ? *best : *soonest;
}

bool login_serves(const std::vector<HostStatus>& hosts, std::size_t index, SessionAttrs attrs,
                  const ServerRole& role, std::uint64_t now_ms) {
    if (role_fits(attrs, role, false)) return true;
    if (attrs != SessionAttrs::PreferStandby) return false;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        const HostStatus& other = hosts[i];
        const bool may_be_standby =
            other.backoff_until_ms <= now_ms && other.known != HostStatus::Known::Primary;
        if (i != index && may_be_standby) return false;
    }
    return true;
}

std::optional<ServerRole> decode_role_check(const std::vector<Row>& rows) {
    if (rows.size() != 1 || rows[0].size() != 2 || !rows[0][0] || !rows[0][1]) return std::nullopt;
    auto flag = [](const std::string& text) -> std::optional<bool> {
        // pg_is_in_recovery() answers t/f, current_setting on/off.
        if (text == "t" || text == "on") return true;
        if (text == "f" || text == "off") return false;
        return std::nullopt;
    };
    const auto in_recovery = flag(*rows[0][0]);
    const auto read_only = flag(*rows[0][1]);
    if (!in_recovery || !read_only) return std::nullopt;
    return ServerRole{*in_recovery, *read_only};
}

void note_host_failure(HostStatus& host, bool wrong_role, std::uint64_t now_ms,
                       std::uint64_t backoff_ms) {
    ++host.failures;
    host.wrong_role = wrong_role;
    host.last_check_ms = now_ms;
    host.backoff_until_ms = now_ms + backoff_ms;
}

void note_host_login(HostStatus& host, const ServerRole& role, std::uint64_t now_ms) {
    host.known = role.in_hot_standby ? HostStatus::Known::Standby : HostStatus::Known::Primary;
    host.read_only = role.read_only;
    host.last_check_ms = now_ms;
    host.failures = 0;
    host.wrong_role = false;
    host.backoff_until_ms = 0;
}

void apply_host_news(HostStatus& host, const HostNews& news, std::uint64_t now_ms) {
    // The pool's own notes, with two differences: a back-off learnt from elsewhere never
    // shortens one this pool has, and a login elsewhere in the role this pool found wrong does
    // not lift this pool's wrong-role back-off (it depends on its own target_session_attrs).
    switch (news.kind) {
        case HostNews::Kind::Unreachable: {
            const std::uint64_t until = host.backoff_until_ms;
            note_host_failure(host, false, now_ms, news.backoff_ms);
            host.backoff_until_ms = std::max(until, host.backoff_until_ms);
            return;
        }
        case HostNews::Kind::LoggedIn: {
            const HostStatus::Known known = news.role.in_hot_standby ? HostStatus::Known::Standby
                                                                     : HostStatus::Known::Primary;
            if (host.wrong_role && known == host.known && news.role.read_only == host.read_only) {
                host.last_check_ms = now_ms;
                return;
            }
            note_host_login(host, news.role, now_ms);
            return;
        }
    }
}

std::string host_state_name(const HostStatus& host, std::uint64_t now_ms) {
    if (host.backoff_until_ms > now_ms) {
        return host.wrong_role ? "backoff (wrong role)" : "backoff (unreachable)";
    }
    if (host.known == HostStatus::Known::Nothing) return host.failures > 0 ? "retry" : "unknown";
    return "up";
}

const char* host_role_name(const HostStatus& host) {
    switch (host.known) {
        case HostStatus::Known::Primary:
            return host.read_only ? "primary (read-only)" : "primary";
        case HostStatus::Known::Standby:
            return "standby";
        case HostStatus::Known::Nothing:
            break;
    }
    return "unknown";
}

}  // namespace pgtether
