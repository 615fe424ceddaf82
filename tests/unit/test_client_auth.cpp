// ClientAuth (proxy/client/client_auth.hpp) without sockets: the bounds on what a stored secret can make
// pgtether compute.
#include <doctest/doctest.h>

#include <string>

#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/scram.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client_auth.hpp"

using namespace pgtether;

namespace {

// A PasswordMessage body: the password and its NUL.
std::string password_body(const std::string& password) {
    return password + '\0';
}

UserSecret scram_user_secret(const std::string& password, int iterations) {
    UserSecret secret;
    secret.user = "alice";
    secret.secret = protocol::format_scram_secret(
        protocol::make_scram_secret(password, "0123456789abcdef", iterations));
    secret.kind = SecretKind::Scram;
    return secret;
}

struct Attempt {
    ClientAuth::Step step;
    std::string log;
};

Attempt cleartext_login(const UserSecret& secret, const std::string& password) {
    ClientAuth auth(AuthType::Plain, secret, "alice");
    auto start = auth.start();
    REQUIRE(start.outcome == ClientAuth::Outcome::Continue);
    std::string body = password_body(password);
    auto step = auth.on_password_message(protocol::as_bytes(body));
    return {step, auth.failure_log()};
}

}  // namespace

TEST_CASE("client_auth: cleartext against a SCRAM secret up to the iteration cap") {
    auto at_cap = scram_user_secret("pw", protocol::kScramMaxIterations);
    CHECK(cleartext_login(at_cap, "pw").step.outcome == ClientAuth::Outcome::Success);
    auto wrong = cleartext_login(at_cap, "nope");
    CHECK(wrong.step.outcome == ClientAuth::Outcome::Failure);
    CHECK(wrong.step.sqlstate == protocol::sqlstate::kInvalidPassword);
    CHECK(wrong.log.empty());
}

TEST_CASE("client_auth: a SCRAM secret beyond the cap fails like a wrong password, unhashed") {
    // The secret's keys do not matter: beyond the cap nothing is computed. Written by hand, since
    // making it would run PBKDF2 for two billion iterations.
    auto base = scram_user_secret("pw", 4096);
    const std::string prefix = "SCRAM-SHA-256$4096:";
    REQUIRE(base.secret.rfind(prefix, 0) == 0);
    for (const char* iterations : {"100001", "2000000000", "2147483647"}) {
        CAPTURE(iterations);
        UserSecret huge = base;
        huge.secret =
            std::string("SCRAM-SHA-256$") + iterations + ":" + base.secret.substr(prefix.size());
        REQUIRE(protocol::parse_scram_secret(huge.secret));
        auto [step, log] = cleartext_login(huge, "pw");
        CHECK(step.outcome == ClientAuth::Outcome::Failure);
        CHECK(step.sqlstate == protocol::sqlstate::kInvalidPassword);
        CHECK(step.message == "password authentication failed for user \"alice\"");
        CHECK(log.find(std::string(iterations) + " iterations") != std::string::npos);
    }
}
