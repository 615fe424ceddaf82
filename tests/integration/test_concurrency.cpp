// Many clients through few backends: 100 clients share a transaction pool of 4, each running 200
// transactions whose results can be verified exactly (every client increments its own row and
// reads it back; all increment one shared row). The pool never opens more than 4 backends.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/scratch_database.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

constexpr int kClients = 100;
constexpr int kTransactions = 200;
constexpr int kPoolSize = 4;

}  // namespace

TEST_CASE("100 clients x 200 transactions through a transaction pool of 4") {
    const TestEnv& env = TestEnv::get();
    const std::string role = private_role("pgt_concurrency");
    REQUIRE(settled(role));
    // A database of its own: another test's DDL in the shared one makes pgtether discover lock
    // functions again, and calls made meanwhile count as unknown and tether their clients (safe,
    // but then the tether's allowance opens backends beyond the pool, which this test counts).
    ScratchDatabase db("pgt_concurrency");
    db.exec_ok("CREATE TABLE concurrency_counters (id int PRIMARY KEY, n int NOT NULL)");
    db.exec_ok("INSERT INTO concurrency_counters SELECT g, 0 FROM generate_series(0, " +
               std::to_string(kClients) + ") g");
    db.exec_ok("GRANT ALL ON concurrency_counters TO " + role);

    PoolerConfig config;
    config.databases = {env.database + " = host=" + env.pg_host +
                        " port=" + std::to_string(env.pg_port) + " dbname=" + db.name()};
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", std::to_string(kPoolSize)},
                       {"max_client_conn", "200"},
                       {"query_wait_timeout", "120"}};
    config.userlist = {{env.superuser, ""}, {role, ""}};
    Pgtether pooler(config);

    Failures failures;
    std::atomic<int> committed{0};
    std::atomic<bool> done{false};
    std::atomic<int> max_backends{0};

    // Watches the server side while the clients run.
    std::thread watcher([&] {
        while (!done) {
            try {
                int n = backends_of(role);
                int seen = max_backends.load();
                while (n > seen && !max_backends.compare_exchange_weak(seen, n)) {
                }
            } catch (const std::exception& e) {
                failures.add(std::string("watcher: ") + e.what());
            }
            std::this_thread::sleep_for(100ms);
        }
    });

    std::vector<std::thread> clients;
    for (int c = 1; c <= kClients; ++c) {
        clients.emplace_back([&, c] {
            const std::string me = std::to_string(c);
            Conn conn(pooler.conninfo(role, "", "", "application_name=client_" + me));
            if (!conn.ok()) {
                failures.add("client " + me + " cannot connect: " + conn.error());
                return;
            }
            for (int t = 1; t <= kTransactions; ++t) {
                const std::string expected = std::to_string(t);
                std::string where = "client " + me + " transaction " + expected + ": ";
                // Alternate protocols and shapes: a simple-query transaction block, an
                // extended-protocol one, and a single implicit transaction.
                if (t % 3 == 0) {
                    auto r = conn.exec_all(
                        "BEGIN; UPDATE concurrency_counters SET n = n + 1 WHERE id = " + me +
                        " RETURNING n; UPDATE concurrency_counters SET n = n + 1 WHERE id = 0; "
                        "SELECT n, current_setting('application_name') FROM "
                        "concurrency_counters WHERE id = " + me + "; COMMIT");
                    if (r.size() != 5 || !r[4].ok() || r[1].value() != expected ||
                        r[3].value(0, 0) != expected || r[3].value(0, 1) != "client_" + me) {
                        failures.add(where + (r.empty() ? "no result" : r.back().describe()));
                        return;
                    }
                } else if (t % 3 == 1) {
                    bool ok = conn.exec("BEGIN").ok();
                    auto upd = conn.exec_params(
                        "UPDATE concurrency_counters SET n = n + 1 WHERE id = $1 RETURNING n",
                        {me});
                    auto shared = conn.exec_params(
                        "UPDATE concurrency_counters SET n = n + 1 WHERE id = $1", {"0"});
                    auto read = conn.exec_params(
                        "SELECT n FROM concurrency_counters WHERE id = $1", {me});
                    auto commit = conn.exec("COMMIT");
                    if (!ok || !upd.ok() || upd.value() != expected || !shared.ok() ||
                        !read.ok() || read.value() != expected || commit.command_tag != "COMMIT") {
                        failures.add(where + upd.describe() + " / " + read.describe() + " / " +
                                     commit.describe());
                        return;
                    }
                } else {
                    auto r = conn.exec_params(
                        "WITH a AS (UPDATE concurrency_counters SET n = n + 1 WHERE id = $1 "
                        "RETURNING n), b AS (UPDATE concurrency_counters SET n = n + 1 WHERE id = "
                        "0) SELECT n FROM a",
                        {me});
                    if (!r.ok() || r.value() != expected) {
                        failures.add(where + r.describe());
                        return;
                    }
                }
                if (conn.transaction_status() != PQTRANS_IDLE) {
                    failures.add(where + "not idle after the transaction");
                    return;
                }
                ++committed;
            }
        });
    }
    for (auto& t : clients) t.join();
    done = true;
    watcher.join();

    CHECK_MESSAGE(failures.count() == 0, failures.text());
    CHECK(committed == kClients * kTransactions);
    // Exact final values, read directly.
    Conn direct = Conn::must(direct_conninfo("", db.name()));
    auto r = direct.exec("SELECT count(*) FILTER (WHERE n = " + std::to_string(kTransactions) +
                         "), max(n) FILTER (WHERE id = 0) FROM concurrency_counters");
    PGT_REQUIRE_OK(r);
    CHECK(r.value(0, 0) == std::to_string(kClients));
    CHECK(r.value(0, 1) == std::to_string(kClients * kTransactions));
    // The pool never went past its size (and it was used).
    CHECK(max_backends <= kPoolSize);
    CHECK(max_backends >= 1);
    CHECK(backends_of(role) <= kPoolSize);
}

TEST_CASE("clients connecting and leaving in a storm while others work") {
    Pgtether pooler([] {
        PoolerConfig config;
        config.settings = {{"pool_mode", "transaction"},
                           {"default_pool_size", "3"},
                           {"max_client_conn", "200"},
                           {"query_wait_timeout", "60"}};
        return config;
    }());
    Failures failures;
    std::vector<std::thread> threads;
    for (int w = 0; w < 20; ++w) {
        threads.emplace_back([&, w] {
            for (int i = 0; i < 15; ++i) {
                Conn conn(pooler.conninfo());
                if (!conn.ok()) {
                    failures.add("connect: " + conn.error());
                    return;
                }
                const std::string token = std::to_string(w) + ":" + std::to_string(i);
                auto r = conn.exec_params("SELECT $1::text", {token});
                if (!r.ok() || r.value() != token) failures.add("echo: " + r.describe());
                if (i % 3 == 0) {
                    // Leave in the middle of a transaction: the backend is rolled back.
                    conn.exec("BEGIN");
                    conn.exec("SELECT 1");
                } else if (i % 3 == 1) {
                    // Leave with a query still running.
                    PQsendQuery(conn.raw(), "SELECT pg_sleep(0.2)");
                }
                conn.close();
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK_MESSAGE(failures.count() == 0, failures.text());
    // Whatever the storm left behind, the pool still serves clean backends.
    for (int i = 0; i < 6; ++i) {
        Conn conn = Conn::must(pooler.conninfo());
        auto r = conn.exec("SELECT now() = statement_timestamp()");
        PGT_REQUIRE_OK(r);
        CHECK(r.value() == "t");  // not inside a transaction someone left open
    }
    CHECK(pooler.running());
}
