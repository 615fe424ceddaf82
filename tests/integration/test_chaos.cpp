// Chaos: for a while (PGT_CHAOS_SECONDS, default 40) many clients move money between accounts
// through pgtether -- plain transfers (UPDATE balance = balance - x) on one half of the accounts,
// read-modify-write transfers under session advisory locks (read both balances, write the
// computed values) on the other half -- while backends are terminated (pg_terminate_backend),
// client sockets are cut in the middle of transactions, and PostgreSQL is restarted once.
//
// Afterwards: the total balance of each half is conserved; every account's balance is what the
// committed transfers say (a lost update of the read-modify-write clients would break this);
// every COMMIT a client saw acknowledged is there; no transaction whose client was cut off before
// its COMMIT is; 3 s after the clients leave no advisory lock is held and nothing is idle in a
// transaction; and a new client is served.
//
// A private PostgreSQL (it is restarted). Client threads record what they saw; only the main
// thread asserts.
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/private_postgres.hpp"

using namespace pgtether::itest;

namespace {

constexpr int kAccountsPerHalf = 8;  // plain transfers: 1..8; locked: 9..16
constexpr long kInitialBalance = 1000;
constexpr int kPlainClients = 8;
constexpr int kLockedClients = 8;
const char* const kRole = "chaos";

std::chrono::seconds chaos_duration() {
    const char* value = std::getenv("PGT_CHAOS_SECONDS");
    int seconds = value ? std::atoi(value) : 0;
    return std::chrono::seconds(seconds > 0 ? seconds : 40);
}

using TransferId = std::pair<int, int>;  // (client, sequence number)

// What the clients saw, merged.
struct Observations {
    std::mutex mutex;
    std::set<TransferId> acknowledged;  // COMMIT answered "COMMIT"
    std::set<TransferId> abandoned;     // the socket was cut before COMMIT was sent
    int commits = 0;
    int failures = 0;  // errors, lost connections, deadlocks: expected under chaos
};

// One client's life: transfers until `deadline`, reconnecting whenever its connection fails.
void run_client(int client, bool locked, const std::string& conninfo,
                std::chrono::steady_clock::time_point deadline, Observations& seen) {
    std::mt19937 rng(static_cast<unsigned>(client) * 7919u + 17u);
    const int first = locked ? kAccountsPerHalf + 1 : 1;
    std::uniform_int_distribution<int> account(first, first + kAccountsPerHalf - 1);
    std::uniform_int_distribution<int> amount(1, 50);
    std::uniform_int_distribution<int> percent(0, 99);
    std::optional<Conn> conn;
    int seq = 0;
    auto failed = [&] {
        conn.reset();  // a fresh connection next time: whatever the old one held is gone
        std::lock_guard lock(seen.mutex);
        seen.failures++;
    };
    while (std::chrono::steady_clock::now() < deadline) {
        if (!conn || !conn->ok()) {
            conn.emplace(conninfo);
            if (!conn->ok()) {
                conn.reset();
                std::this_thread::sleep_for(50ms);
                continue;
            }
        }
        int from = account(rng);
        int to = account(rng);
        if (from == to) continue;
        const int x = amount(rng);
        const int id = ++seq;
        const int low = std::min(from, to);
        const int high = std::max(from, to);
        if (locked && !conn->exec("SELECT pg_advisory_lock(4242, " + std::to_string(low) +
                                  "), pg_advisory_lock(4242, " + std::to_string(high) + ")")
                           .ok()) {
            failed();
            continue;
        }
        std::vector<std::string> body = {"BEGIN"};
        if (locked) {
            // Read, compute, write (the read in a transaction of its own, which transaction
            // pooling may run on any backend were it not for the tether): correct only while
            // the advisory locks keep the other locked clients away from these two accounts.
            Result read = conn->exec("SELECT id, balance FROM accounts WHERE id IN (" +
                                     std::to_string(from) + ", " + std::to_string(to) +
                                     ") ORDER BY id");
            if (!read.ok() || read.rows.size() != 2) {
                failed();
                continue;
            }
            long balance[2] = {std::stol(read.value(0, 1)), std::stol(read.value(1, 1))};
            long from_balance = balance[from == low ? 0 : 1] - x;
            long to_balance = balance[to == low ? 0 : 1] + x;
            body.push_back("UPDATE accounts SET balance = " + std::to_string(from_balance) +
                           " WHERE id = " + std::to_string(from));
            body.push_back("UPDATE accounts SET balance = " + std::to_string(to_balance) +
                           " WHERE id = " + std::to_string(to));
        } else {
            // Row locks in id order: fewer deadlocks between plain transfers.
            const int sign_low = from == low ? -1 : 1;
            body.push_back("UPDATE accounts SET balance = balance + " +
                           std::to_string(sign_low * x) + " WHERE id = " + std::to_string(low));
            body.push_back("UPDATE accounts SET balance = balance + " +
                           std::to_string(-sign_low * x) + " WHERE id = " + std::to_string(high));
        }
        body.push_back("INSERT INTO transfers (client, seq, from_id, to_id, amount) VALUES (" +
                       std::to_string(client) + ", " + std::to_string(id) + ", " +
                       std::to_string(from) + ", " + std::to_string(to) + ", " +
                       std::to_string(x) + ")");
        bool ok = true;
        for (std::size_t i = 0; i < body.size() && ok; ++i) ok = conn->exec(body[i]).ok();
        if (!ok) {
            failed();
            continue;
        }
        if (percent(rng) < 5) {
            // Cut the socket in the middle of the transaction, as a crashed client would.
            shutdown(PQsocket(conn->raw()), SHUT_RDWR);
            conn.reset();
            std::lock_guard lock(seen.mutex);
            seen.abandoned.insert({client, id});
            continue;
        }
        Result commit = conn->exec("COMMIT");
        if (commit.ok() && commit.command_tag == "COMMIT") {
            std::lock_guard lock(seen.mutex);
            seen.acknowledged.insert({client, id});
            seen.commits++;
        } else if (!commit.ok() || !conn->ok()) {
            failed();  // the outcome is unknown if the connection broke: not recorded
            continue;
        }
        if (locked && !conn->exec("SELECT pg_advisory_unlock(4242, " + std::to_string(low) +
                                  "), pg_advisory_unlock(4242, " + std::to_string(high) + ")")
                           .ok()) {
            failed();
        }
    }
    if (conn) conn->close();
}

}  // namespace

TEST_CASE("chaos: transfers stay correct through killed backends, cut clients and a restart") {
    PrivatePostgres pg;
    const TestEnv& env = pg.env();
    const std::string admin = make_conninfo(env.pg_host, env.pg_port, env.superuser, "postgres");
    {
        Conn setup = Conn::must(admin);
        setup.exec_ok(std::string("CREATE ROLE ") + kRole + " LOGIN");
        setup.exec_ok("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)");
        setup.exec_ok("INSERT INTO accounts SELECT g, " + std::to_string(kInitialBalance) +
                      " FROM generate_series(1, " + std::to_string(2 * kAccountsPerHalf) + ") g");
        setup.exec_ok("CREATE TABLE transfers (client int, seq int, from_id int, to_id int, "
                      "amount int, PRIMARY KEY (client, seq))");
        setup.exec_ok(std::string("GRANT ALL ON accounts, transfers TO ") + kRole);
    }
    PoolerConfig config = pool_config("transaction", 12,
                                      {{"query_wait_timeout", "30"}, {"max_client_conn", "200"}});
    config.databases = {"* = host=" + env.pg_host + " port=" + std::to_string(env.pg_port)};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{env.superuser, ""},
                                                                        {kRole, ""}};
    Pgtether pooler(config, 10s, env);
    // statement_timeout: no client waits for ever on a lock, whatever happens.
    const std::string conninfo =
        pooler.conninfo(kRole, "postgres", "", "options='-c statement_timeout=20s'");

    const auto duration = chaos_duration();
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + duration;
    Observations seen;
    std::vector<std::thread> clients;
    for (int i = 0; i < kPlainClients + kLockedClients; ++i) {
        clients.emplace_back(run_client, i, i >= kPlainClients, conninfo, deadline,
                             std::ref(seen));
    }
    // The killer: a backend of the clients' role every 700 ms, from a direct connection.
    std::atomic<int> killed{0};
    std::thread killer([&] {
        std::optional<Conn> direct;
        while (std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(700ms);
            if (!direct || !direct->ok()) direct.emplace(admin);
            Result r = direct->exec(std::string("SELECT count(pg_terminate_backend(pid)) FROM ("
                                                "SELECT pid FROM pg_stat_activity WHERE "
                                                "usename = '") +
                                    kRole + "' ORDER BY random() LIMIT 1) victim");
            if (r.ok() && !r.rows.empty() && r.value() == "1") killed++;
        }
    });
    // PostgreSQL restarts once, halfway.
    std::this_thread::sleep_until(started + duration / 2);
    pg.stop();
    pg.start();
    for (auto& t : clients) t.join();
    killer.join();
    const auto left = std::chrono::steady_clock::now();

    MESSAGE("chaos: " << seen.commits << " commits, " << seen.failures << " failures, "
                      << seen.abandoned.size() << " transactions cut off, " << killed.load()
                      << " backends terminated");
    CHECK(seen.commits > 0);
    CHECK(killed > 0);
    CHECK_FALSE(seen.abandoned.empty());

    Conn check = Conn::must(admin);
    // Total balance of each half conserved.
    for (int half = 0; half < 2; ++half) {
        const int first = 1 + half * kAccountsPerHalf;
        CHECK(scalar(check, "SELECT sum(balance) FROM accounts WHERE id BETWEEN " +
                                std::to_string(first) + " AND " +
                                std::to_string(first + kAccountsPerHalf - 1)) ==
              std::to_string(kAccountsPerHalf * kInitialBalance));
    }
    // No lost update: every balance is what the committed transfers make it.
    CHECK(scalar(check, "SELECT count(*) FROM accounts a WHERE balance <> " +
                            std::to_string(kInitialBalance) +
                            " + coalesce((SELECT sum(amount) FROM transfers WHERE to_id = a.id), 0)"
                            " - coalesce((SELECT sum(amount) FROM transfers WHERE from_id = "
                            "a.id), 0)") == "0");
    // Every acknowledged commit is there; no transaction cut off before its COMMIT is.
    std::set<TransferId> committed;
    Result rows = check.exec("SELECT client, seq FROM transfers");
    PGT_REQUIRE_OK(rows);
    for (std::size_t i = 0; i < rows.rows.size(); ++i) {
        committed.insert({std::stoi(rows.value(i, 0)), std::stoi(rows.value(i, 1))});
    }
    int missing = 0;
    for (const auto& id : seen.acknowledged) missing += committed.count(id) == 0 ? 1 : 0;
    CHECK(missing == 0);
    std::size_t resurrected = 0;
    for (const auto& id : seen.abandoned) resurrected += committed.count(id);
    CHECK(resurrected == 0);
    // 3 s after the clients leave: no advisory lock held, nothing idle in a transaction.
    const std::string locks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'";
    const std::string idle_in_transaction =
        std::string("SELECT count(*) FROM pg_stat_activity WHERE usename = '") + kRole +
        "' AND state LIKE 'idle in transaction%'";
    const auto settle_until = left + 3s;
    eventually(
        [&] { return scalar(check, locks) == "0" && scalar(check, idle_in_transaction) == "0"; },
        std::chrono::duration_cast<std::chrono::milliseconds>(settle_until -
                                                              std::chrono::steady_clock::now()));
    CHECK_MESSAGE(scalar(check, locks) == "0",
                  scalar(check, "SELECT string_agg(pid || ' ' || objid, ', ') FROM pg_locks "
                                "WHERE locktype = 'advisory'"));
    CHECK(scalar(check, idle_in_transaction) == "0");
    // A new client is served.
    Conn fresh = Conn::must(pooler.conninfo(kRole, "postgres"));
    CHECK(scalar(fresh, "SELECT count(*) FROM accounts") ==
          std::to_string(2 * kAccountsPerHalf));
    CHECK(pooler.running());
}
