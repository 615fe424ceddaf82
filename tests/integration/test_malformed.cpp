// Malformed input over raw sockets: bad lengths, packets larger than allowed, unknown start-up
// codes, protocol 2.0, unknown message types, garbage after start-up, broken message bodies.
// Each offender gets one ErrorResponse (08P01, or 0A000 where PostgreSQL itself answers
// "unsupported frontend protocol") and is disconnected; a bystander client in the middle of a
// transaction keeps working on its backend throughout, and pgtether keeps running.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

struct Case {
    std::string name;
    bool log_in_first;   // send a valid start-up (trust) before the bad bytes
    std::string bytes;   // what the offender sends
    std::string sqlstate;
};

std::vector<Case> cases() {
    using namespace wire;
    const TestEnv& env = TestEnv::get();
    const std::string user = env.superuser;
    return {
        {"start-up length below the minimum", false, i32(3) + "xxxx", "08P01"},
        {"start-up length zero", false, i32(0) + i32(196608), "08P01"},
        {"start-up length above PostgreSQL's 10000", false, i32(100'000) + i32(196608), "08P01"},
        {"HTTP instead of a start-up packet", false, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "08P01"},
        // PostgreSQL treats any code it does not know as a protocol version: 0A000.
        {"unknown start-up code", false, i32(8) + i32((1234 << 16) | 5681), "0A000"},
        {"protocol 2.0", false, startup({{"user", user}}, 2 << 16), "0A000"},
        {"protocol 4.0", false, startup({{"user", user}}, 4 << 16), "0A000"},
        {"start-up parameter without a value", false,
         i32(4 + 4 + 5) + i32(196608) + "user" + std::string(1, '\0'), "08P01"},
        {"start-up packet without its final terminator", false,
         i32(4 + 4 + 15) + i32(196608) + cstr("user") + cstr("postgres") + "x", "08P01"},
        {"unknown message type after start-up", true, message('z', "junk"), "08P01"},
        {"message type NUL after start-up", true, std::string(1, '\0') + i32(8) + "abcd", "08P01"},
        {"garbage after start-up", true, "\x01\x02\x03\x04garbage garbage garbage", "08P01"},
        {"message length below 4", true, std::string("Q") + i32(2) + "xx", "08P01"},
        {"message larger than max_packet_size", true,
         std::string("Q") + i32(300'000) + std::string(1000, 'x'), "08P01"},
        {"Query without its terminating NUL", true, std::string("Q") + i32(4 + 8) + "SELECT 1",
         "08P01"},
        {"Parse with a truncated body", true, message('P', cstr("stmt")), "08P01"},
        {"a second StartupMessage after start-up", true,
         startup({{"user", user}, {"database", env.database}}), "08P01"},
    };
}

// The first ErrorResponse the offender gets, then the pooler must hang up.
std::optional<std::string> offend(const Pgtether& pooler, const Case& c) {
    const TestEnv& env = TestEnv::get();
    RawConn raw(pooler.host(), pooler.port());
    if (c.log_in_first) {
        auto hello = raw.startup(env.superuser, env.database);
        if (hello.empty() || hello.back().type != 'Z') {
            FAIL("login failed: " << wire::describe(hello));
        }
    }
    raw.send(c.bytes);
    auto reply = raw.read_until_ready_or_error(5s);
    INFO(wire::describe(reply));
    auto sqlstate = wire::first_error_sqlstate(reply);
    if (sqlstate) {
        CHECK(wire::error_fields(reply.back())['S'] == "FATAL");
    }
    CHECK(raw.wait_closed(5s));
    return sqlstate;
}

}  // namespace

TEST_CASE("malformed packets: one ErrorResponse each, only the offender is closed") {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "2"},
                       {"max_packet_size", "100000"}};
    config.extra_args = {"-v"};
    Pgtether pooler(config);

    // A bystander in the middle of a transaction, holding a backend the whole time.
    Conn bystander = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(bystander.exec("BEGIN"));
    PGT_REQUIRE_OK(bystander.exec("CREATE TEMP TABLE bystander (n int)"));
    const std::string pid = scalar(bystander, "SELECT pg_backend_pid()");

    int n = 0;
    for (const auto& c : cases()) {
        CAPTURE(c.name);
        auto sqlstate = offend(pooler, c);
        CHECK_MESSAGE(sqlstate == c.sqlstate, "got " << sqlstate.value_or("no error"));
        REQUIRE(pooler.running());
        PGT_CHECK_OK(bystander.exec("INSERT INTO bystander VALUES (" + std::to_string(++n) + ")"));
        CHECK(scalar(bystander, "SELECT pg_backend_pid()") == pid);
        // A new client can still log in and work.
        Conn fresh = Conn::must(pooler.conninfo());
        CHECK(scalar(fresh, "SELECT 'fresh'") == "fresh");
    }
    CHECK(scalar(bystander, "SELECT count(*) FROM bystander") == std::to_string(n));
    PGT_CHECK_OK(bystander.exec("COMMIT"));
}

TEST_CASE("malformed packets compared with PostgreSQL where it answers at all") {
    // PostgreSQL closes silently on a bad start-up length (a COMMERROR is only logged); where it
    // does answer, pgtether must answer with the same SQLSTATE.
    const TestEnv& env = TestEnv::get();
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"max_packet_size", "100000"}};
    Pgtether pooler(config);
    for (const auto& c : cases()) {
        if (c.name.find("max_packet_size") != std::string::npos) continue;  // pooler-only limit
        if (c.name.find("second StartupMessage") != std::string::npos) continue;  // see below
        CAPTURE(c.name);
        RawConn raw(env.pg_host, env.pg_port);
        if (c.log_in_first) {
            auto hello = raw.startup(env.superuser, env.database);
            REQUIRE((!hello.empty() && hello.back().type == 'Z'));
        }
        raw.send(c.bytes);
        auto reply = raw.read_until_ready_or_error(5s);
        auto pg_state = wire::first_error_sqlstate(reply);
        if (!pg_state || pg_state->empty()) continue;  // silent close, or a v2-style error
        CHECK_MESSAGE(*pg_state == c.sqlstate, "PostgreSQL says " << *pg_state);
    }
}

TEST_CASE("a malformed message in the middle of a transaction: the backend is cleaned") {
    const TestEnv& env = TestEnv::get();
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "1"},
                       {"query_wait_timeout", "5"}};
    Pgtether pooler(config);
    {
        Conn setup = Conn::must(direct_conninfo());
        setup.exec_ok("DROP TABLE IF EXISTS malformed_tx");
        setup.exec_ok("CREATE TABLE malformed_tx (n int)");
    }
    {
        RawConn raw(pooler.host(), pooler.port());
        auto hello = raw.startup(env.superuser, env.database);
        REQUIRE((!hello.empty() && hello.back().type == 'Z'));
        REQUIRE(raw.send(wire::query("BEGIN; INSERT INTO malformed_tx VALUES (1)")));
        auto reply = raw.read_until_ready_or_error();
        REQUIRE((!reply.empty() && reply.back().type == 'Z'));
        CHECK(reply.back().body == "T");
        raw.send(wire::message('z', "boom"));
        auto err = raw.read_until_ready_or_error();
        CHECK(wire::first_error_sqlstate(err) == "08P01");
    }
    Conn next = Conn::must(pooler.conninfo());
    auto r = next.exec("SELECT count(*), now() = statement_timestamp() FROM malformed_tx");
    PGT_REQUIRE_OK(r);
    CHECK(r.value(0, 0) == "0");  // the INSERT was rolled back
    CHECK(r.value(0, 1) == "t");  // in a fresh transaction
    Conn(direct_conninfo()).exec("DROP TABLE malformed_tx");
}

TEST_CASE("byte-at-a-time start-up and queries are fine (not malformed, just slow)") {
    const TestEnv& env = TestEnv::get();
    Pgtether pooler;
    RawConn raw(pooler.host(), pooler.port());
    std::string bytes = wire::startup({{"user", env.superuser}, {"database", env.database}}) +
                        wire::query("SELECT 'one byte at a time'");
    for (char c : bytes) {
        REQUIRE(raw.send(std::string_view(&c, 1)));
        std::this_thread::sleep_for(1ms);
    }
    auto hello = raw.read_until_ready_or_error();
    REQUIRE((!hello.empty() && hello.back().type == 'Z'));
    auto reply = raw.read_until_ready_or_error();
    INFO(wire::describe(reply));
    REQUIRE(reply.size() == 4);
    CHECK(reply[1].type == 'D');
    CHECK(reply[1].body.find("one byte at a time") != std::string::npos);
}
