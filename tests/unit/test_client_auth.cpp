// ClientAuth (proxy/client/client_auth.hpp) without sockets: the bounds on what a stored secret can make
// pgtether compute.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
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

// A SASLInitialResponse body: the mechanism, its NUL, the length of `client_first` and it.
std::string sasl_initial_response(const std::string& client_first) {
    std::string initial = "SCRAM-SHA-256";
    initial.push_back('\0');
    const auto length = static_cast<std::uint32_t>(client_first.size());
    for (int shift = 24; shift >= 0; shift -= 8) {
        initial.push_back(static_cast<char>((length >> shift) & 0xff));
    }
    return initial + client_first;
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

// What the event loop does with a step that asks for a derivation (proxy/client/login_work):
// derive, hand the result back. `derivations` counts them.
ClientAuth::Step derive_if_asked(ClientAuth& auth, ClientAuth::Step step, int* derivations) {
    while (step.derive) {
        if (derivations) ++*derivations;
        const KeyDerivation what = *step.derive;
        step =
            auth.on_derived(protocol::make_scram_secret(what.password, what.salt, what.iterations));
    }
    return step;
}

Attempt cleartext_login(const UserSecret& secret, const std::string& password,
                        int* derivations = nullptr) {
    ClientAuth auth(AuthType::Plain, secret, true, "alice");
    auto start = auth.start();
    REQUIRE(start.outcome == ClientAuth::Outcome::Continue);
    CHECK_FALSE(start.derive);
    std::string body = password_body(password);
    auto step =
        derive_if_asked(auth, auth.on_password_message(protocol::as_bytes(body)), derivations);
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

TEST_CASE("client_auth: PBKDF2 is asked for, never run, and once for every user alike") {
    // Cleartext: a SCRAM secret's own iterations; plain, md5 and unknown users the default work.
    auto scram = scram_user_secret("pw", 4096);
    UserSecret plain{"alice", "pw", SecretKind::Plain};
    UserSecret md5{"alice", "md5" + std::string(32, '0'), SecretKind::Md5};
    struct Case {
        const char* name;
        std::optional<UserSecret> secret;
        const char* password;
        ClientAuth::Outcome outcome;
    };
    const Case cases[] = {
        {"scram, right", scram, "pw", ClientAuth::Outcome::Success},
        {"scram, wrong", scram, "nope", ClientAuth::Outcome::Failure},
        {"plain, right", plain, "pw", ClientAuth::Outcome::Success},
        {"plain, wrong", plain, "nope", ClientAuth::Outcome::Failure},
        {"md5, wrong", md5, "nope", ClientAuth::Outcome::Failure},
        {"unknown user", std::nullopt, "pw", ClientAuth::Outcome::Failure},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        ClientAuth auth(AuthType::Plain, c.secret, true, "alice");
        REQUIRE(auth.start().outcome == ClientAuth::Outcome::Continue);
        std::string body = password_body(c.password);
        auto step = auth.on_password_message(protocol::as_bytes(body));
        REQUIRE(step.derive);
        CHECK(step.outcome == ClientAuth::Outcome::Continue);
        CHECK(step.derive->iterations == 4096);
        int derivations = 0;
        CHECK(derive_if_asked(auth, step, &derivations).outcome == c.outcome);
        CHECK(derivations == 1);
    }

    // SCRAM: the derivation comes with AuthenticationSASL, for a plain-text password, a SCRAM
    // secret and an unknown user alike; the exchange goes on once it is done.
    for (const std::optional<UserSecret>& secret :
         {std::optional<UserSecret>(plain), std::optional<UserSecret>(scram),
          std::optional<UserSecret>()}) {
        ClientAuth auth(AuthType::ScramSha256, secret, true, "alice");
        auto start = auth.start();
        CHECK(start.outcome == ClientAuth::Outcome::Continue);
        CHECK_FALSE(start.reply.empty());
        REQUIRE(start.derive);
        CHECK(start.derive->iterations == 4096);
        CHECK(start.derive->salt.size() == 16);
        auto after = derive_if_asked(auth, start, nullptr);
        CHECK(after.outcome == ClientAuth::Outcome::Continue);
        CHECK(after.reply.empty());
        // The exchange proceeds: the client-first-message gets a server-first-message.
        const std::string initial = sasl_initial_response("n,,n=,r=abcdefgh");
        auto first = auth.on_password_message(protocol::as_bytes(initial));
        CHECK(first.outcome == ClientAuth::Outcome::Continue);
        CHECK_FALSE(first.reply.empty());
        CHECK_FALSE(first.derive);
    }
}

TEST_CASE("client_auth: scram_iterations sets the iterations of secrets pgtether makes") {
    // A plain-text password and an unknown user get secrets of scram_iterations iterations (the
    // unknown user's mock looks like the plain-text one); a stored SCRAM secret keeps its own.
    const std::string initial = sasl_initial_response("n,,n=,r=abcdefgh");
    struct Case {
        const char* name;
        std::optional<UserSecret> secret;
        int expected;  // the i= of the server-first-message
    };
    const Case cases[] = {
        {"plain-text password", UserSecret{"alice", "pw", SecretKind::Plain}, 10'000},
        {"unknown user", std::nullopt, 10'000},
        {"stored SCRAM secret", scram_user_secret("pw", 4096), 4096},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        ClientAuth auth(AuthType::ScramSha256, c.secret, true, "alice", 10'000);
        auto start = auth.start();
        REQUIRE(start.derive);
        // The same work whatever the user: timing tells none from another.
        CHECK(start.derive->iterations == 10'000);
        REQUIRE(derive_if_asked(auth, start, nullptr).outcome == ClientAuth::Outcome::Continue);
        auto first = auth.on_password_message(protocol::as_bytes(initial));
        REQUIRE(first.outcome == ClientAuth::Outcome::Continue);
        CHECK(first.reply.find(",i=" + std::to_string(c.expected)) != std::string::npos);
    }
    // Cleartext against a plain or md5 secret: the dummy derivation does as much work.
    ClientAuth cleartext(AuthType::Plain, UserSecret{"alice", "pw", SecretKind::Plain}, true,
                         "alice", 10'000);
    REQUIRE(cleartext.start().outcome == ClientAuth::Outcome::Continue);
    std::string body = password_body("pw");
    auto step = cleartext.on_password_message(protocol::as_bytes(body));
    REQUIRE(step.derive);
    CHECK(step.derive->iterations == 10'000);
}

TEST_CASE("trust with a user auth_query looked up: found logs in, not found fails") {
    // PgBouncer: auth_type = trust with auth_user looks up users missing from auth_file.
    CHECK(ClientAuth(AuthType::Trust, std::nullopt, true, "bob").start().outcome ==
          ClientAuth::Outcome::Success);
    UserSecret secret;
    secret.user = "bob";
    secret.secret = "md5" + std::string(32, '0');
    secret.kind = SecretKind::Md5;
    ClientAuth found(AuthType::Trust, secret, true, "bob");
    CHECK(found.start().outcome == ClientAuth::Outcome::Success);
    REQUIRE(found.secret().has_value());  // the server login uses it
    auto missing = ClientAuth(AuthType::Trust, std::nullopt, false, "nobody").start();
    CHECK(missing.outcome == ClientAuth::Outcome::Failure);
    CHECK(missing.sqlstate == "28P01");
}

TEST_CASE("client_auth: pam asks for the password and leaves the verdict to PAM") {
    // The user's auth_file line does not matter: PAM decides (PgBouncer ignores auth_file).
    AuthFile file;
    file["alice"] = UserSecret{"alice", "from-auth-file", SecretKind::Plain};
    struct Case {
        const char* password;
        std::optional<bool> pam_says;  // nullopt: PAM is never asked
        ClientAuth::Outcome outcome;
    };
    const Case cases[] = {
        {"right", true, ClientAuth::Outcome::Success},
        {"from-auth-file", false, ClientAuth::Outcome::Failure},
        {"", std::nullopt, ClientAuth::Outcome::Failure},  // empty: refused without asking
    };
    for (const Case& c : cases) {
        CAPTURE(c.password);
        ClientAuth auth(AuthType::Pam, file, true, "alice");
        auto start = auth.start();
        CHECK(start.outcome == ClientAuth::Outcome::Continue);
        CHECK(start.reply[0] == 'R');  // AuthenticationCleartextPassword
        CHECK(start.reply.back() == '\3');
        auto step = auth.on_password_message(protocol::as_bytes(password_body(c.password)));
        CHECK_FALSE(step.derive);
        if (!c.pam_says) {
            CHECK_FALSE(step.external_check);
            CHECK(step.outcome == c.outcome);
            continue;
        }
        REQUIRE(step.external_check);
        CHECK(*step.external_check == c.password);
        CHECK(step.outcome == ClientAuth::Outcome::Continue);
        auto verdict = auth.on_external_check(*c.pam_says);
        CHECK(verdict.outcome == c.outcome);
        if (c.outcome == ClientAuth::Outcome::Success) {
            // The password PAM accepted is what the pool's servers log in with.
            REQUIRE(auth.secret());
            CHECK(auth.secret()->secret == c.password);
            CHECK(auth.secret()->kind == SecretKind::Plain);
        } else {
            CHECK(verdict.sqlstate == protocol::sqlstate::kInvalidPassword);
            CHECK(std::string(auth.failure_reason()) == "PAM authentication failed");
        }
    }
    // A verdict nobody asked for is an internal error, not a login.
    ClientAuth unasked(AuthType::Pam, file, true, "alice");
    (void)unasked.start();
    CHECK(unasked.on_external_check(true).outcome == ClientAuth::Outcome::Failure);
}
