// Host choice for host lists (core/host_choice.hpp), table by table: libpq's target_session_attrs,
// load_balance_hosts, and the back-off of hosts that failed or had the wrong role.
#include <doctest/doctest.h>

#include <vector>

#include "core/host_choice.hpp"

using namespace pgtether;
using Known = HostStatus::Known;

TEST_CASE("host choice: target_session_attrs against what the server reports") {
    struct Case {
        SessionAttrs attrs;
        ServerRole role;  // in_hot_standby, default_transaction_read_only
        bool fallback;
        bool fits;
    };
    const ServerRole primary{false, false}, read_only_primary{false, true}, standby{true, true};
    const Case cases[] = {
        {SessionAttrs::Any, standby, false, true},
        {SessionAttrs::Any, primary, false, true},
        {SessionAttrs::ReadWrite, primary, false, true},
        {SessionAttrs::ReadWrite, read_only_primary, false, false},
        {SessionAttrs::ReadWrite, standby, false, false},
        {SessionAttrs::ReadOnly, standby, false, true},
        {SessionAttrs::ReadOnly, read_only_primary, false, true},
        {SessionAttrs::ReadOnly, primary, false, false},
        {SessionAttrs::Primary, read_only_primary, false, true},
        {SessionAttrs::Primary, standby, false, false},
        {SessionAttrs::Standby, standby, false, true},
        {SessionAttrs::Standby, read_only_primary, false, false},
        {SessionAttrs::PreferStandby, standby, false, true},
        {SessionAttrs::PreferStandby, primary, false, false},
        {SessionAttrs::PreferStandby, primary, true, true},
    };
    for (const Case& c : cases) {
        CAPTURE(session_attrs_name(c.attrs));
        CAPTURE(c.role.in_hot_standby);
        CAPTURE(c.role.read_only);
        CHECK(role_fits(c.attrs, c.role, c.fallback) == c.fits);
    }
    for (const char* name :
         {"any", "read-write", "read-only", "primary", "standby", "prefer-standby"}) {
        auto attrs = parse_session_attrs(name);
        REQUIRE(attrs.has_value());
        CHECK(std::string(session_attrs_name(*attrs)) == name);
    }
    CHECK(!parse_session_attrs("READ-WRITE").has_value());
    CHECK(!parse_session_attrs("master").has_value());
}

TEST_CASE("host choice: which host the next connection goes to") {
    const std::uint64_t now = 10'000;
    HostStatus unknown;
    HostStatus primary;
    primary.known = Known::Primary;
    HostStatus standby;
    standby.known = Known::Standby;
    standby.read_only = true;
    HostStatus down;  // refused a moment ago
    note_host_failure(down, false, now - 100, 1000);
    HostStatus down_longer;  // backing off for longer
    note_host_failure(down_longer, false, now - 100, 5000);

    // A failover in progress: the old primary refused 600 ms ago, the standby was found still
    // in recovery 900 ms ago; both back-offs are over.
    HostStatus old_primary = primary;
    note_host_failure(old_primary, false, now - 600, 500);
    HostStatus waiting_standby = standby;
    note_host_failure(waiting_standby, true, now - 900, 500);
    HostStatus just_refused = old_primary;
    just_refused.last_check_ms = now - 50;  // refused again since; its back-off is over too
    just_refused.backoff_until_ms = now - 1;

    struct Case {
        const char* name;
        std::vector<HostStatus> hosts;
        SessionAttrs attrs;
        bool round_robin;
        std::uint64_t turn;
        std::size_t want;
    };
    const Case cases[] = {
        {"one host", {down}, SessionAttrs::ReadWrite, true, 7, 0},
        {"round robin over equals", {unknown, unknown, unknown}, SessionAttrs::Any, true, 4, 1},
        {"disable: the first that works", {unknown, unknown}, SessionAttrs::Any, false, 1, 0},
        {"disable: skips one backing off", {down, unknown}, SessionAttrs::Any, false, 0, 1},
        {"round robin skips one backing off", {unknown, down}, SessionAttrs::Any, true, 1, 0},
        {"read-write: the known primary", {standby, primary}, SessionAttrs::ReadWrite, true, 0, 1},
        {"read-write: unknown before a known standby", {standby, unknown},
         SessionAttrs::ReadWrite, true, 0, 1},
        {"round robin: a host not tried yet is as good as a known one", {primary, unknown},
         SessionAttrs::ReadWrite, true, 1, 1},
        {"round robin: and the other way round", {primary, unknown}, SessionAttrs::Any, true, 2,
         0},
        {"read-write: a known standby is rechecked when nothing else is left",
         {down, standby}, SessionAttrs::ReadWrite, true, 0, 1},
        {"standby: the known standby", {primary, standby}, SessionAttrs::Standby, false, 0, 1},
        {"prefer-standby: the standby first", {primary, standby}, SessionAttrs::PreferStandby,
         false, 0, 1},
        {"prefer-standby: unknown before a primary", {primary, unknown},
         SessionAttrs::PreferStandby, false, 0, 1},
        {"prefer-standby: the primary when the standby is down", {primary, down},
         SessionAttrs::PreferStandby, true, 1, 0},
        {"any: a standby is as good as a primary", {standby, primary}, SessionAttrs::Any, false,
         0, 0},
        {"all backing off: the first to come out", {down_longer, down}, SessionAttrs::ReadWrite,
         false, 0, 1},
        {"failover: the least recently tried, not the primary that failed", {old_primary,
         waiting_standby}, SessionAttrs::ReadWrite, false, 0, 1},
        {"failover: and then the other again", {waiting_standby, just_refused},
         SessionAttrs::ReadWrite, false, 0, 0},
        {"a host that failed comes after one not yet tried", {old_primary, unknown},
         SessionAttrs::ReadWrite, false, 0, 1},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        CHECK(choose_host(c.hosts, c.attrs, c.round_robin, c.turn, now) == c.want);
    }
}

TEST_CASE("host choice: failures, logins and what SHOW HOSTS says") {
    HostStatus host;
    CHECK(host_state_name(host, 0) == "unknown");
    CHECK(std::string(host_role_name(host)) == "unknown");
    note_host_failure(host, false, 1000, 500);
    CHECK(host.failures == 1);
    CHECK(host_state_name(host, 1200) == "backoff (unreachable)");
    CHECK(host_state_name(host, 1500) == "retry");
    note_host_login(host, ServerRole{true, true}, 2000);
    CHECK(host.failures == 0);
    CHECK(host_state_name(host, 2000) == "up");
    CHECK(std::string(host_role_name(host)) == "standby");
    note_host_failure(host, true, 2000, 500);  // a standby where a primary was wanted
    CHECK(host_state_name(host, 2100) == "backoff (wrong role)");
    CHECK(host.last_check_ms == 2000);
    note_host_login(host, ServerRole{false, false}, 3000);  // promoted
    CHECK(std::string(host_role_name(host)) == "primary");
    CHECK(host.backoff_until_ms == 0);
}

TEST_CASE("host choice: asking a server that does not report its role (PostgreSQL 13-)") {
    auto row = [](std::optional<std::string> a, std::optional<std::string> b) {
        return std::vector<Row>{Row{std::move(a), std::move(b)}};
    };
    struct Case {
        std::vector<Row> rows;
        std::optional<ServerRole> role;
    };
    const std::vector<Case> cases = {
        {row("f", "off"), ServerRole{false, false}},  // a writable primary
        {row("f", "on"), ServerRole{false, true}},    // a primary with read-only transactions
        {row("t", "on"), ServerRole{true, true}},     // a standby
        {row("t", "off"), ServerRole{true, false}},   // not seen in practice; taken as it is
        {row(std::nullopt, "off"), std::nullopt},     // NULL: not the query's answer
        {row("f", "maybe"), std::nullopt},
        {row("yes", "off"), std::nullopt},
        {{}, std::nullopt},                                  // no row
        {{Row{"f"}}, std::nullopt},                          // one column
        {{Row{"f", "off"}, Row{"f", "off"}}, std::nullopt},  // two rows
    };
    for (const auto& c : cases) {
        const auto role = decode_role_check(c.rows);
        REQUIRE(role.has_value() == c.role.has_value());
        if (!role) continue;
        CHECK(role->in_hot_standby == c.role->in_hot_standby);
        CHECK(role->read_only == c.role->read_only);
    }

    // Due when nothing was learnt of the host (a login, the last check) for the interval.
    HostStatus host;
    note_host_login(host, ServerRole{true, true}, 5000);
    CHECK_FALSE(role_check_due(host, 5000, 1000));
    CHECK_FALSE(role_check_due(host, 5999, 1000));
    CHECK(role_check_due(host, 6000, 1000));
    CHECK(role_check_due(host, 5000, 0));  // server_check_delay = 0: every tick
    note_host_attempt(host, 7000);         // a new connection there learns the role at its login
    CHECK_FALSE(role_check_due(host, 7500, 1000));
    CHECK_FALSE(role_check_due(host, 6000, 0));  // a clock behind the stamp: not yet
}

TEST_CASE("host choice: whether a login serves the database (prefer-standby's fallback)") {
    const std::uint64_t now = 10'000;
    const ServerRole primary_role{false, false}, standby_role{true, true};
    HostStatus primary;
    primary.known = Known::Primary;
    HostStatus standby;
    standby.known = Known::Standby;
    HostStatus unknown;
    HostStatus standby_down = standby;
    note_host_failure(standby_down, false, now - 100, 1000);
    struct Case {
        const char* name;
        std::vector<HostStatus> hosts;  // the login reached hosts[0]
        SessionAttrs attrs;
        ServerRole role;
        bool serves;
    };
    const Case cases[] = {
        {"read-write on a primary", {primary, standby}, SessionAttrs::ReadWrite, primary_role,
         true},
        {"read-write on a standby", {standby, primary}, SessionAttrs::ReadWrite, standby_role,
         false},
        {"prefer-standby on a standby", {standby, primary}, SessionAttrs::PreferStandby,
         standby_role, true},
        {"prefer-standby on a primary, a standby up", {primary, standby},
         SessionAttrs::PreferStandby, primary_role, false},
        {"prefer-standby on a primary, another host not tried yet", {primary, unknown},
         SessionAttrs::PreferStandby, primary_role, false},
        {"prefer-standby on a primary, the standby down", {primary, standby_down},
         SessionAttrs::PreferStandby, primary_role, true},
        {"prefer-standby on the only host, a primary", {primary}, SessionAttrs::PreferStandby,
         primary_role, true},
        {"standby on a primary, no standby anywhere", {primary, standby_down},
         SessionAttrs::Standby, primary_role, false},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        CHECK(login_serves(c.hosts, 0, c.attrs, c.role, now) == c.serves);
    }
}

TEST_CASE("host choice: what another pool learnt of the same host") {
    const ServerRole primary{false, false}, standby{true, true};
    auto unreachable = [](std::uint64_t backoff_ms) {
        HostNews news;
        news.kind = HostNews::Kind::Unreachable;
        news.backoff_ms = backoff_ms;
        return news;
    };
    auto logged_in = [](const ServerRole& role) {
        HostNews news;
        news.kind = HostNews::Kind::LoggedIn;
        news.role = role;
        return news;
    };
    struct Row {
        const char* what;
        HostStatus before;
        HostNews news;
        std::string state_after;  // host_state_name at 1000 ms
        std::string role_after;
    };
    HostStatus fresh;
    HostStatus backing_off;  // this pool found it unreachable until 5000
    backing_off.failures = 1;
    backing_off.backoff_until_ms = 5000;
    HostStatus wrong_role;  // this pool found a standby where it wants a primary, until 5000
    wrong_role.known = HostStatus::Known::Standby;
    wrong_role.read_only = true;
    wrong_role.failures = 1;
    wrong_role.wrong_role = true;
    wrong_role.backoff_until_ms = 5000;
    const Row rows[] = {
        {"unreachable elsewhere: skipped here too", fresh, unreachable(500),
         "backoff (unreachable)", "unknown"},
        {"a longer back-off here stays", backing_off, unreachable(10), "backoff (unreachable)",
         "unknown"},
        {"logged in elsewhere: its role is known", fresh, logged_in(standby), "up", "standby"},
        {"logged in elsewhere: it is reachable again", backing_off, logged_in(primary), "up",
         "primary"},
        {"the same role elsewhere: this pool's wrong-role back-off stays", wrong_role,
         logged_in(standby), "backoff (wrong role)", "standby"},
        {"another role elsewhere (a promotion): the wrong-role back-off ends", wrong_role,
         logged_in(primary), "up", "primary"},
    };
    for (const auto& row : rows) {
        CAPTURE(row.what);
        HostStatus host = row.before;
        apply_host_news(host, row.news, 1000);
        CHECK(host_state_name(host, 1000) == row.state_after);
        CHECK(std::string(host_role_name(host)) == row.role_after);
        CHECK(host.last_check_ms == 1000);
    }
}
