// CancelRequest through pgtether: the client's own cancel key (pgtether's, not a backend's)
// cancels exactly that client's running query, on whichever backend serves it right now, and
// never another client's query. A wrong key does nothing.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

PoolerConfig pool_of(const std::string& mode, int size) {
    return pool_config(mode, size, {{"query_wait_timeout", "30"}});
}

// libpq's own cancel path: PQgetCancel + PQcancel (a CancelRequest on a new connection).
void libpq_cancel(Conn& conn) {
    PGcancel* cancel = PQgetCancel(conn.raw());
    REQUIRE(cancel != nullptr);
    char errbuf[256] = {};
    CHECK_MESSAGE(PQcancel(cancel, errbuf, sizeof errbuf) == 1, errbuf);
    PQfreeCancel(cancel);
}

// Is a backend running this exact query right now (seen directly)?
bool running(const std::string& query) {
    Conn conn = Conn::must(direct_conninfo());
    Result r = conn.exec_params(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1", {query});
    return r.ok() && r.value() != "0";
}

using wire::KeyData;

KeyData key_data(const std::vector<BackendMessage>& hello) {
    auto key = wire::backend_key_data(hello);
    if (!key) FAIL("no BackendKeyData in the greeting: " << wire::describe(hello));
    return key.value_or(KeyData{});
}

void send_cancel(const Pgtether& pooler, KeyData key) {
    RawConn raw(pooler.host(), pooler.port());
    REQUIRE(raw.send(wire::cancel_request(key.pid, key.key)));
    // A CancelRequest gets no reply; the pooler closes the connection.
    CHECK(raw.wait_closed());
}

}  // namespace

TEST_CASE("a cancel stops that client's pg_sleep and not another client's") {
    for (const char* mode : {"transaction", "session"}) {
        CAPTURE(mode);
        Pgtether pooler(pool_of(mode, 2));
        Conn a = Conn::must(pooler.conninfo());
        Conn b = Conn::must(pooler.conninfo());
        CHECK(a.backend_pid() != b.backend_pid());  // pgtether's own keys, one per client

        const std::string a_sql = std::string("SELECT pg_sleep(60) /* a ") + mode + " */";
        const std::string b_sql = std::string("SELECT pg_sleep(3), 'b done' /* b ") + mode + " */";
        send_query(b, b_sql);
        send_query(a, a_sql);
        REQUIRE(eventually([&] { return running(a_sql) && running(b_sql); }));

        auto started = std::chrono::steady_clock::now();
        libpq_cancel(a);
        auto ra = wait_result(a, 20s);
        REQUIRE(ra.has_value());
        PGT_CHECK_SQLSTATE(*ra, "57014");
        CHECK(ra->message.find("canceling statement due to user request") != std::string::npos);

        // b's query on the other backend was not touched: it is still running, then succeeds.
        bool b_still_running = running(b_sql);
        auto rb = wait_result(b, 20s);
        REQUIRE(rb.has_value());
        PGT_CHECK_OK(*rb);
        if (rb->ok()) CHECK(rb->value(0, 1) == "b done");
        // Only meaningful if the cancel came back well before b's sleep could have ended.
        if (std::chrono::steady_clock::now() - started < 2s) CHECK(b_still_running);

        // Both clients carry on.
        CHECK(scalar(a, "SELECT 'a again'") == "a again");
        CHECK(scalar(b, "SELECT 'b again'") == "b again");
    }
}

TEST_CASE("a cancel for an idle client does not hit the query now running on its old backend") {
    // One backend: a used it, went idle (transaction pooling gave the backend back), and b is now
    // running a query on it. A cancel with a's key must not stop b's query.
    Pgtether pooler(pool_of("transaction", 1));
    Conn a = Conn::must(pooler.conninfo());
    Conn b = Conn::must(pooler.conninfo());
    CHECK(scalar(a, "SELECT 1") == "1");
    const std::string b_sql = "SELECT pg_sleep(1.5), 'b survived'";
    send_query(b, b_sql);
    REQUIRE(eventually([&] { return running(b_sql); }));
    libpq_cancel(a);
    auto rb = wait_result(b, 20s);
    REQUIRE(rb.has_value());
    PGT_REQUIRE_OK(*rb);
    CHECK(rb->value(0, 1) == "b survived");
    CHECK(scalar(a, "SELECT 'a fine'") == "a fine");
}

TEST_CASE("a cancel with a wrong key does nothing; the right key over a raw socket works") {
    Pgtether pooler(pool_of("transaction", 2));
    const TestEnv& env = TestEnv::get();
    RawConn a(pooler.host(), pooler.port());
    auto hello = a.startup(env.superuser, env.database);
    REQUIRE_MESSAGE((!hello.empty() && hello.back().type == 'Z'), wire::describe(hello));
    KeyData key = key_data(hello);

    const std::string sql = "SELECT pg_sleep(1.5), 'not cancelled' /* raw */";
    REQUIRE(a.send(wire::query(sql)));
    REQUIRE(eventually([&] { return running(sql); }));
    send_cancel(pooler, {key.pid, key.key ^ 0x5a5a5a5a});  // right pid, wrong secret
    send_cancel(pooler, {key.pid + 1, key.key});           // wrong pid, right secret
    send_cancel(pooler, {0, 0});
    auto reply = a.read_until_ready_or_error(20s);
    INFO(wire::describe(reply));
    CHECK_FALSE(wire::first_error_sqlstate(reply).has_value());
    REQUIRE_FALSE(reply.empty());
    CHECK(reply.back().type == 'Z');

    const std::string long_sql = "SELECT pg_sleep(60) /* raw, to be cancelled */";
    REQUIRE(a.send(wire::query(long_sql)));
    REQUIRE(eventually([&] { return running(long_sql); }));
    send_cancel(pooler, key);
    auto cancelled = a.read_until_ready_or_error(20s);
    INFO(wire::describe(cancelled));
    CHECK(wire::first_error_sqlstate(cancelled) == "57014");
    auto ready = a.read_until_ready_or_error(5s);
    REQUIRE_FALSE(ready.empty());
    CHECK(ready.back().type == 'Z');
    // The client's session goes on after the cancel.
    REQUIRE(a.send(wire::query("SELECT 1")));
    auto after = a.read_until_ready_or_error();
    INFO(wire::describe(after));
    CHECK_FALSE(wire::first_error_sqlstate(after).has_value());
}

TEST_CASE("a cancel inside a transaction block, and of a client that then leaves") {
    Pgtether pooler(pool_of("transaction", 1));
    Conn a = Conn::must(pooler.conninfo());
    PGT_REQUIRE_OK(a.exec("BEGIN"));
    const std::string sql = "SELECT pg_sleep(60) /* in a block */";
    send_query(a, sql);
    REQUIRE(eventually([&] { return running(sql); }));
    libpq_cancel(a);
    auto r = wait_result(a, 20s);
    REQUIRE(r.has_value());
    PGT_CHECK_SQLSTATE(*r, "57014");
    CHECK(a.transaction_status() == PQTRANS_INERROR);
    PGT_CHECK_OK(a.exec("ROLLBACK"));

    // A client cancels and leaves at once: the backend is still usable by the next client.
    const std::string sql2 = "SELECT pg_sleep(60) /* then leave */";
    send_query(a, sql2);
    REQUIRE(eventually([&] { return running(sql2); }));
    libpq_cancel(a);
    a.close();
    Conn b = Conn::must(pooler.conninfo());
    CHECK(scalar(b, "SELECT 'b on the same backend'") == "b on the same backend");
    CHECK(b.transaction_status() == PQTRANS_IDLE);
}
