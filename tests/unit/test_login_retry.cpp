// Retrying failed server logins: which failures are worth a quick retry, the backoff, and when
// waiting clients get the error.
#include <doctest/doctest.h>

#include "core/login_retry.hpp"

using namespace pgtether;

TEST_CASE("the server's login errors are classified by SQLSTATE") {
    struct Row {
        const char* sqlstate;
        LoginFailureKind kind;
    };
    const Row rows[] = {
        {"57P03", LoginFailureKind::Unreachable},  // starting up / shutting down
        {"57P01", LoginFailureKind::Unreachable},  // shut down during our login
        {"57P02", LoginFailureKind::Unreachable},
        {"28P01", LoginFailureKind::Refused},      // password authentication failed
        {"28000", LoginFailureKind::Refused},      // no pg_hba.conf entry
        {"3D000", LoginFailureKind::Refused},      // database does not exist
        {"53300", LoginFailureKind::Refused},      // too many connections
        {"08P01", LoginFailureKind::Refused},      // a server that misbehaves
        {"08006", LoginFailureKind::Refused},      // (pgtether's own: classified where noticed)
        {"", LoginFailureKind::Refused},
    };
    for (const auto& row : rows) {
        CAPTURE(row.sqlstate);
        CHECK(classify_login_failure(row.sqlstate) == row.kind);
    }
}

TEST_CASE("an unreachable server is retried soon, then every second at most") {
    const std::uint64_t retry = 15'000;
    const std::uint64_t expected[] = {50, 100, 200, 400, 800, 1000, 1000, 1000};
    for (int i = 0; i < 8; ++i) {
        CAPTURE(i);
        CHECK(login_retry_delay_ms(LoginFailureKind::Unreachable, i + 1, retry) == expected[i]);
    }
    CHECK(login_retry_delay_ms(LoginFailureKind::Unreachable, 1000, retry) == 1000);
    // Never longer than server_login_retry.
    CHECK(login_retry_delay_ms(LoginFailureKind::Unreachable, 5, 300) == 300);
    CHECK(login_retry_delay_ms(LoginFailureKind::Unreachable, 1, 0) == 0);
    // A refused login waits all of server_login_retry, every time.
    CHECK(login_retry_delay_ms(LoginFailureKind::Refused, 1, retry) == retry);
    CHECK(login_retry_delay_ms(LoginFailureKind::Refused, 7, retry) == retry);
}

TEST_CASE("LoginBackoff: attempts and failing clients") {
    const std::uint64_t retry = 15'000;
    LoginBackoff backoff;
    CHECK_FALSE(backoff.failing());
    CHECK(backoff.may_attempt(0));
    CHECK_FALSE(backoff.fail_clients(0, retry));

    SUBCASE("unreachable: clients wait while the outage is shorter than server_login_retry") {
        backoff.on_failure(LoginFailureKind::Unreachable, 1000, retry);
        CHECK(backoff.failing());
        CHECK_FALSE(backoff.may_attempt(1049));
        CHECK(backoff.may_attempt(1050));
        CHECK_FALSE(backoff.fail_clients(1050, retry));
        backoff.on_failure(LoginFailureKind::Unreachable, 1050, retry);
        CHECK_FALSE(backoff.may_attempt(1149));
        CHECK(backoff.may_attempt(1150));
        // Still down after server_login_retry: clients get the error from now on.
        CHECK_FALSE(backoff.fail_clients(15'999, retry));
        CHECK(backoff.fail_clients(16'000, retry));
        backoff.on_success();
        CHECK_FALSE(backoff.failing());
        CHECK(backoff.may_attempt(16'000));
        CHECK_FALSE(backoff.fail_clients(16'000, retry));
    }
    SUBCASE("refused: clients fail at once, the next attempt waits server_login_retry") {
        backoff.on_failure(LoginFailureKind::Refused, 1000, retry);
        CHECK(backoff.fail_clients(1000, retry));
        CHECK_FALSE(backoff.may_attempt(15'999));
        CHECK(backoff.may_attempt(16'000));
        // Once the wait is over, clients wait for the next attempt instead of failing.
        CHECK_FALSE(backoff.fail_clients(16'000, retry));
    }
    SUBCASE("a refusal after an outage") {
        backoff.on_failure(LoginFailureKind::Unreachable, 1000, retry);
        backoff.on_failure(LoginFailureKind::Refused, 1100, retry);
        CHECK(backoff.fail_clients(1100, retry));
        CHECK_FALSE(backoff.may_attempt(16'000));
        CHECK(backoff.may_attempt(16'100));
    }
}

TEST_CASE("LoginBackoff: changed login settings forget the failure") {
    const std::uint64_t retry = 15'000;
    LoginBackoff backoff;
    backoff.on_failure(LoginFailureKind::Refused, 1000, retry);
    CHECK(backoff.fail_clients(1070, retry));
    CHECK_FALSE(backoff.may_attempt(1070));
    backoff.on_login_settings_changed();
    CHECK_FALSE(backoff.failing());
    CHECK_FALSE(backoff.fail_clients(1070, retry));
    CHECK(backoff.may_attempt(1070));
}

TEST_CASE("queued clients are failed with the login error when no server can serve them") {
    struct Row {
        bool login_fails_clients;
        int working_servers;
        bool fail;
    };
    const Row rows[] = {
        {true, 0, true},    // the only server retired (RECONNECT) or gone: fail them now
        {true, 1, false},   // a logged-in server will serve them: they wait
        {true, 3, false},
        {false, 0, false},  // a restarting server is waited for
        {false, 2, false},
    };
    for (const auto& row : rows) {
        CAPTURE(row.login_fails_clients);
        CAPTURE(row.working_servers);
        CHECK(fail_queued_clients(row.login_fails_clients, row.working_servers) == row.fail);
    }
}
