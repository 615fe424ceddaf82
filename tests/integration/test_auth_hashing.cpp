// PBKDF2 off the event loop (issue 27, items 2 and 3; docs/tls-and-auth.md, "Password hashing").
//
// A SCRAM login against a plain-text auth_file password, and a cleartext password checked against
// a stored SCRAM secret, each derive keys with PBKDF2 (4096 iterations, or up to 100,000 for a
// secret a role gave itself). On the event loop that stalled every other client of the worker,
// and it ran for known users only, so the first reply's timing told who exists. Here: a
// bystander's SELECT 1 stays fast while a flood of such logins runs, and known and unknown users
// take the same time to reach the server-first-message.
#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"  // find_row, cell
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string base64(const unsigned char* data, std::size_t size) {
    std::string out(4 * ((size + 2) / 3), '\0');
    const int n =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

// A SCRAM-SHA-256 secret with any iteration count (PostgreSQL 15 has no scram_iterations),
// computed here with OpenSSL directly, RFC 5802 §3.
std::string scram_secret(const std::string& password, int iterations) {
    const std::string salt = "pgtether-test-salt";
    unsigned char salted[32];
    REQUIRE(PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                              reinterpret_cast<const unsigned char*>(salt.data()),
                              static_cast<int>(salt.size()), iterations, EVP_sha256(),
                              sizeof salted, salted) == 1);
    auto hmac = [&](const char* text, unsigned char* out) {
        unsigned int length = 32;
        HMAC(EVP_sha256(), salted, sizeof salted, reinterpret_cast<const unsigned char*>(text),
             std::strlen(text), out, &length);
    };
    unsigned char client_key[32], stored_key[32], server_key[32];
    hmac("Client Key", client_key);
    hmac("Server Key", server_key);
    SHA256(client_key, sizeof client_key, stored_key);
    return "SCRAM-SHA-256$" + std::to_string(iterations) + ":" +
           base64(reinterpret_cast<const unsigned char*>(salt.data()), salt.size()) + "$" +
           base64(stored_key, sizeof stored_key) + ":" + base64(server_key, sizeof server_key);
}

struct Roles {
    std::string bystander = private_role("pgt_hash_bystander");
    std::string plain = private_role("pgt_hash_plain");  // plain-text password in auth_file
    std::string slow = private_role("pgt_hash_slow");    // a SCRAM secret of 100,000 iterations
};

PoolerConfig hashing_config(const std::string& auth_type, const Roles& roles) {
    PoolerConfig config;
    config.settings = {{"auth_type", auth_type}, {"pool_mode", "transaction"}};
    config.userlist = {{TestEnv::get().superuser, ""},
                       {roles.bystander, "pw-bystander"},
                       {roles.plain, "pw-plain"},
                       {roles.slow, scram_secret("pw-slow", 100'000)}};
    return config;
}

std::string startup_packet(const std::string& user) {
    return wire::startup({{"user", user}, {"database", TestEnv::get().database}});
}

// Many clients at once, each in a loop until `stop`: `attempt` is one login attempt.
class Flood {
  public:
    Flood(int threads, std::function<void()> attempt) {
        for (int i = 0; i < threads; ++i) {
            threads_.emplace_back([this, attempt] {
                while (!stop_) {
                    attempt();
                    ++attempts_;
                }
            });
        }
    }
    ~Flood() { stop(); }
    void stop() {
        stop_ = true;
        for (auto& t : threads_) {
            if (t.joinable()) t.join();
        }
    }
    [[nodiscard]] int attempts() const { return attempts_; }

  private:
    std::atomic<bool> stop_{false};
    std::atomic<int> attempts_{0};
    std::vector<std::thread> threads_;
};

std::chrono::microseconds median(std::vector<std::chrono::microseconds> values) {
    REQUIRE(!values.empty());
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// SELECT 1 round trips of an already logged-in client for `how_long`.
std::vector<std::chrono::microseconds> bystander_latencies(Conn& conn, Clock::duration how_long) {
    std::vector<std::chrono::microseconds> latencies;
    const auto end = Clock::now() + how_long;
    while (Clock::now() < end) {
        const auto start = Clock::now();
        auto r = conn.exec("SELECT 1");
        REQUIRE_MESSAGE(r.ok(), r.describe());
        latencies.push_back(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start));
        std::this_thread::sleep_for(5ms);
    }
    return latencies;
}

// A client-first-message SASLInitialResponse (protocol §55.3.1) with a fixed client nonce.
std::string sasl_initial_response() {
    const std::string client_first = "n,,n=,r=pgtetherTestClientNonce";
    return wire::message('p', wire::cstr("SCRAM-SHA-256") +
                                  wire::i32(static_cast<std::int32_t>(client_first.size())) +
                                  client_first);
}

// From connecting to the server-first-message (AuthenticationSASLContinue): what a user-name
// prober measures. Nullopt if the exchange went otherwise.
std::optional<std::chrono::microseconds> time_to_server_first(const PoolerProcess& pooler,
                                                              const std::string& user) {
    const auto start = Clock::now();
    RawConn raw(pooler.host(), pooler.port());
    if (!raw.send(startup_packet(user))) return std::nullopt;
    auto sasl = raw.read_message();  // AuthenticationSASL
    if (!sasl || sasl->type != 'R') return std::nullopt;
    if (!raw.send(sasl_initial_response())) return std::nullopt;
    auto server_first = raw.read_message();  // AuthenticationSASLContinue
    if (!server_first || server_first->type != 'R') return std::nullopt;
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

}  // namespace

TEST_CASE("a bystander stays fast while a flood of logins derives keys") {
    Roles roles;
    SUBCASE("bare SCRAM start-up packets for a user with a plain-text password (item 2)") {
        Pgtether pooler(hashing_config("scram-sha-256", roles));
        Conn bystander = Conn::must(pooler.conninfo(roles.bystander, "", "pw-bystander"));
        PGT_REQUIRE_OK(bystander.exec("SELECT 1"));
        Flood flood(4, [&] {
            RawConn raw(pooler.host(), pooler.port());
            if (raw.send(startup_packet(roles.plain))) (void)raw.read_message();
        });
        auto latencies = bystander_latencies(bystander, 3s);
        flood.stop();
        const auto p50 = median(latencies);
        MESSAGE("start-up flood: ", flood.attempts(), " attempts, bystander p50 ", p50.count(),
                " us over ", latencies.size(), " queries");
        CHECK(flood.attempts() > 50);
        CHECK(p50 < 50ms);
    }
    SUBCASE("wrong cleartext passwords against a 100,000-iteration SCRAM secret (item 3)") {
        Pgtether pooler(hashing_config("plain", roles));
        Conn bystander = Conn::must(pooler.conninfo(roles.bystander, "", "pw-bystander"));
        PGT_REQUIRE_OK(bystander.exec("SELECT 1"));
        Flood flood(4, [&] {
            RawConn raw(pooler.host(), pooler.port(), 10s);
            if (!raw.send(startup_packet(roles.slow))) return;
            auto request = raw.read_message();  // AuthenticationCleartextPassword
            if (!request || request->type != 'R') return;
            if (!raw.send(wire::message('p', wire::cstr("wrong-password")))) return;
            (void)raw.read_message(10s);  // 28P01
        });
        auto latencies = bystander_latencies(bystander, 3s);
        flood.stop();
        const auto p50 = median(latencies);
        MESSAGE("wrong-password flood: ", flood.attempts(), " attempts, bystander p50 ",
                p50.count(), " us over ", latencies.size(), " queries");
        // Each attempt derives 100,000 iterations: a few per second (one per second or two under
        // the sanitizers), 2 at a time.
        CHECK(flood.attempts() >= 2);
        CHECK(p50 < 50ms);
        // The right password still works against that secret.
        Conn slow = Conn::must(pooler.conninfo(roles.slow, "", "pw-slow"));
        PGT_CHECK_OK(slow.exec("SELECT 1"));
    }
}

TEST_CASE("known and unknown users take the same time to the server-first-message") {
    Roles roles;
    Pgtether pooler(hashing_config("scram-sha-256", roles));
    const std::string unknown = "pgt_hash_nobody";
    // Warm up both paths once.
    REQUIRE(time_to_server_first(pooler, roles.plain));
    REQUIRE(time_to_server_first(pooler, unknown));
    constexpr int kPairs = 60;
    // One round: how often the known user was slower, and both medians.
    auto measure = [&](int& known_slower, std::chrono::microseconds& known_median,
                       std::chrono::microseconds& unknown_median) {
        std::vector<std::chrono::microseconds> known_times, unknown_times;
        known_slower = 0;
        for (int i = 0; i < kPairs; ++i) {
            // Alternate which goes first, so drift affects both alike.
            auto a = i % 2 ? time_to_server_first(pooler, roles.plain)
                           : time_to_server_first(pooler, unknown);
            auto b = i % 2 ? time_to_server_first(pooler, unknown)
                           : time_to_server_first(pooler, roles.plain);
            REQUIRE(a);
            REQUIRE(b);
            auto known = i % 2 ? *a : *b;
            auto other = i % 2 ? *b : *a;
            known_times.push_back(known);
            unknown_times.push_back(other);
            if (known > other) ++known_slower;
        }
        known_median = median(known_times);
        unknown_median = median(unknown_times);
        MESSAGE("known median ", known_median.count(), " us, unknown median ",
                unknown_median.count(), " us, known slower in ", known_slower, " of ", kPairs,
                " pairs");
    };
    // Before: the known user derived PBKDF2 on the loop before its first reply and was slower in
    // 95% of pairs, by the derivation (5-9 ms against 1 ms). Now both derive; what is left is
    // noise, and the machine is shared (other tests, builds): loose bounds. Runs here saw the
    // known user slower in 8 to 39 of 60 pairs (the unknown user's mock secret costs a few random
    // bytes more), and once, under ctest -j4 in CI, in 56 of 60 by 0.1 ms of 1.2; the regression
    // guarded against is the known user slower in 57 of 60, every time. So a round outside the
    // bounds is measured again, up to three rounds: noise does not repeat, a leak does.
    int known_slower = 0;
    std::chrono::microseconds known_median{}, unknown_median{};
    auto within_bounds = [&] {
        return known_slower >= kPairs / 10 && known_slower <= kPairs * 4 / 5;
    };
    for (int round = 0; round < 3; ++round) {
        measure(known_slower, known_median, unknown_median);
        if (within_bounds()) break;
    }
    CHECK(known_slower >= kPairs / 10);
    CHECK(known_slower <= kPairs * 4 / 5);
    const auto larger = std::max(known_median, unknown_median);
    const auto smaller = std::min(known_median, unknown_median);
    CHECK(larger < 3 * smaller + 1ms);
}

TEST_CASE("scram_iterations: the secret of a plain-text password has that many iterations") {
    // PgBouncer 1.21's key, acted on: the server-first-message's i= of a user whose auth_file
    // password is plain text, and of an unknown user (whose mock secret must look the same); a
    // stored SCRAM secret keeps its own. libpq logs in with the new count.
    Roles roles;
    PoolerConfig config = hashing_config("scram-sha-256", roles);
    config.settings["scram_iterations"] = "10000";
    config.settings["admin_users"] = roles.plain;
    Pgtether pooler(config);
    auto iterations_offered = [&](const std::string& user) -> std::string {
        RawConn raw(pooler.host(), pooler.port());
        REQUIRE(raw.send(startup_packet(user)));
        auto sasl = raw.read_message();
        REQUIRE((sasl && sasl->type == 'R'));
        REQUIRE(raw.send(sasl_initial_response()));
        auto server_first = raw.read_message();
        REQUIRE((server_first && server_first->type == 'R'));
        const std::string& body = server_first->body;
        const auto at = body.find(",i=");
        REQUIRE(at != std::string::npos);
        return body.substr(at + 3);
    };
    CHECK(iterations_offered(roles.plain) == "10000");
    CHECK(iterations_offered("pgt_hash_nobody") == "10000");
    CHECK(iterations_offered(roles.slow) == "100000");
    Conn conn = Conn::must(pooler.conninfo(roles.plain, "", "pw-plain"));
    CHECK(conn.exec_ok("SELECT current_user").value() == roles.plain);
    Conn admin = Conn::must(pooler.conninfo(roles.plain, "pgbouncer", "pw-plain"));
    auto shown = admin.exec("SHOW CONFIG");
    auto row = find_row(shown, "key", "scram_iterations");
    REQUIRE(row.has_value());
    CHECK(cell(*row, "value") == "10000");
}
