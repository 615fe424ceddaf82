// PgBouncer 1.24's client limits per database and per user, and the per-user keys of [users]
// (issue 28): max_db_client_connections and max_user_client_connections, globally and per
// entry, counted for the whole process (several workers too); the admin console stays open to
// admin_users; pool_size, reserve_pool_size and the timeouts of a [users] entry, and
// query_wait_timeout of a [databases] entry (1.26); transaction_timeout (1.25); query_wait_notify
// (1.23); and the start-up log no longer lists these keys as "not supported".
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

const std::string kDbText = "client connections exceeded (max_db_client_connections)";
const std::string kUserText = "client connections exceeded (max_user_client_connections)";

std::string server_of(const TestEnv& env) {
    return "host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
           " dbname=" + env.database;
}

// Two users of this file's own, both in the userlist (auth_type = trust).
PoolerConfig limits_config(const std::vector<std::string>& users,
                           std::map<std::string, std::string> settings,
                           std::vector<std::string> databases, std::vector<std::string> user_lines) {
    const auto& env = TestEnv::get();
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "2"}};
    for (auto& [k, v] : settings) config.settings[k] = v;
    config.databases = std::move(databases);
    config.users = std::move(user_lines);
    std::vector<std::pair<std::string, std::string>> userlist = {{env.superuser, ""}};
    for (const auto& u : users) userlist.emplace_back(u, "");
    config.userlist = userlist;
    config.extra_args = {"-v"};
    return config;
}

// The full error of a refused login, SQLSTATE included (libpq's verbose form).
std::string refusal(const std::string& conninfo) {
    PGconn* raw = PQconnectStart(conninfo.c_str());
    PQsetErrorVerbosity(raw, PQERRORS_VERBOSE);
    while (PQconnectPoll(raw) != PGRES_POLLING_FAILED && PQstatus(raw) != CONNECTION_OK) {
        std::this_thread::sleep_for(5ms);
    }
    std::string error = PQstatus(raw) == CONNECTION_OK ? "(connected)" : PQerrorMessage(raw);
    PQfinish(raw);
    return error;
}

bool refused_with(const std::string& conninfo, const std::string& text) {
    std::string error = refusal(conninfo);
    bool ok = error.find(text) != std::string::npos && error.find("53300") != std::string::npos;
    if (!ok) MESSAGE("got: " << error);
    return ok;
}

}  // namespace

TEST_CASE("max_db_client_connections: global and per database; other databases unaffected") {
    const auto& env = TestEnv::get();
    const std::string role = private_role("pgt_climit_db");
    Pgtether pooler(limits_config(
        {role}, {{"max_db_client_connections", "3"}},
        {"capped = " + server_of(env), "tight = " + server_of(env) + " max_db_client_connections=1",
         // 0 in an entry means "the global limit", as in PgBouncer.
         "zero = " + server_of(env) + " max_db_client_connections=0"},
        {}));
    std::vector<Conn> capped;
    for (int i = 0; i < 3; ++i) capped.push_back(Conn::must(pooler.conninfo(role, "capped")));
    for (int attempt = 0; attempt < 3; ++attempt) {
        CHECK(refused_with(pooler.conninfo(role, "capped"), kDbText));
    }
    // The clients inside are served; another database has its own count.
    for (auto& c : capped) CHECK(scalar(c, "SELECT 1") == "1");
    Conn tight = Conn::must(pooler.conninfo(role, "tight"));
    CHECK(refused_with(pooler.conninfo(role, "tight"), kDbText));
    std::vector<Conn> zero;
    for (int i = 0; i < 3; ++i) zero.push_back(Conn::must(pooler.conninfo(env.superuser, "zero")));
    CHECK(refused_with(pooler.conninfo(env.superuser, "zero"), kDbText));
    CHECK(pooler.wait_for_log("pooler error: " + kDbText));

    // A client that leaves frees its place; refused ones took none.
    capped.pop_back();
    CHECK(eventually([&] { return Conn(pooler.conninfo(role, "capped")).ok(); }));
    tight.close();
    CHECK(eventually([&] { return Conn(pooler.conninfo(role, "tight")).ok(); }));

    // admin_users still reach the console of a full pooler.
    Conn admin = console(pooler);
    CHECK(admin.ok());
}

TEST_CASE("max_user_client_connections: global and per user in [users], across databases") {
    const auto& env = TestEnv::get();
    const std::string limited = private_role("pgt_climit_user1");
    const std::string other = private_role("pgt_climit_user2");
    Pgtether pooler(limits_config({limited, other}, {{"max_user_client_connections", "2"}},
                                  {"a = " + server_of(env), "b = " + server_of(env)},
                                  {limited + " = max_user_client_connections=1"}));

    Conn first = Conn::must(pooler.conninfo(limited, "a"));
    // The user's own limit counts its clients of every database.
    CHECK(refused_with(pooler.conninfo(limited, "b"), kUserText));
    CHECK(refused_with(pooler.conninfo(limited, "a"), kUserText));
    // Another user has the global limit.
    Conn o1 = Conn::must(pooler.conninfo(other, "a"));
    Conn o2 = Conn::must(pooler.conninfo(other, "b"));
    CHECK(refused_with(pooler.conninfo(other, "a"), kUserText));
    CHECK(scalar(first, "SELECT current_user") == limited);
    CHECK(scalar(o2, "SELECT current_user") == other);
    first.close();
    CHECK(eventually([&] { return Conn(pooler.conninfo(limited, "b")).ok(); }));
}

TEST_CASE("client limits count every worker's clients") {
    const auto& env = TestEnv::get();
    const std::string role = private_role("pgt_climit_workers");
    Pgtether pooler(limits_config({role},
                                  {{"workers", "2"}, {"max_db_client_connections", "4"},
                                   {"max_user_client_connections", "6"}},
                                  {"w = " + server_of(env), "v = " + server_of(env)}, {}));
    // Clients spread over both workers (SO_REUSEPORT listeners); the fifth is refused by
    // whichever worker takes it, many times over.
    std::vector<Conn> clients;
    for (int i = 0; i < 4; ++i) clients.push_back(Conn::must(pooler.conninfo(role, "w")));
    for (int attempt = 0; attempt < 8; ++attempt) {
        CHECK(refused_with(pooler.conninfo(role, "w"), kDbText));
    }
    clients.push_back(Conn::must(pooler.conninfo(role, "v")));
    clients.push_back(Conn::must(pooler.conninfo(role, "v")));
    for (int attempt = 0; attempt < 8; ++attempt) {
        CHECK(refused_with(pooler.conninfo(role, "v"), kUserText));
    }
    for (auto& c : clients) CHECK(scalar(c, "SELECT 1") == "1");
}

namespace {

// The first error of `sql`, else its last result (libpq's PQexec would lose a FATAL's text
// when the connection closes after it).
Result run(Conn& conn, const std::string& sql) {
    auto results = conn.exec_all(sql);
    for (auto& r : results) {
        if (r.is_error()) return r;
    }
    return results.empty() ? Result::client_error("no result") : results.back();
}

// Holds an open transaction (and so a server connection) until destroyed.
struct Holder {
    explicit Holder(const std::string& conninfo) : conn(Conn::must(conninfo)) {
        conn.exec_ok("BEGIN");
        pid = scalar(conn, "SELECT pg_backend_pid()");
    }
    ~Holder() {
        if (conn.ok()) conn.exec("ROLLBACK");
    }
    Conn conn;
    std::string pid;
};

// One server for `role`'s pool, query_wait_notify as given.
PoolerConfig for_notify(const std::string& role, const std::string& notify) {
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"},
                       {"default_pool_size", "1"},
                       {"tether_reserve_size", "0"},
                       {"query_wait_notify", notify}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {role, ""}};
    config.extra_args = {"-v"};
    return config;
}

// Whether a client of `conninfo` waits for a server until query_wait_timeout throws it out.
bool waits_for_a_server(const std::string& conninfo) {
    Conn waiter = Conn::must(conninfo);
    Result r = run(waiter, "SELECT 'served'");
    if (!r.is_error()) return false;
    if (r.message.find("query_wait_timeout") == std::string::npos) MESSAGE(r.describe());
    return r.message.find("query_wait_timeout") != std::string::npos;
}

}  // namespace

TEST_CASE("[users] pool_size and reserve_pool_size override the database's and the defaults") {
    const auto& env = TestEnv::get();
    const std::string small = private_role("pgt_cuser_small");
    const std::string reserved = private_role("pgt_cuser_reserved");
    const std::string plain = private_role("pgt_cuser_plain");
    for (const auto& role : {small, reserved, plain}) REQUIRE(settled(role));
    Pgtether pooler(limits_config(
        {small, reserved, plain},
        {{"default_pool_size", "5"}, {"query_wait_timeout", "1"}, {"reserve_pool_timeout", "0.3"}},
        // The database's pool_size=2 reserve_pool=0 is what a user without an entry gets.
        {"d = " + server_of(env) + " pool_size=2 reserve_pool=0 tether_reserve_size=0"},
        {small + " = pool_size=1", reserved + " = pool_size=1 reserve_pool_size=1"}));

    {  // pool_size=1 for this user, though the database says 2.
        Holder first(pooler.conninfo(small, "d"));
        CHECK(waits_for_a_server(pooler.conninfo(small, "d")));
        CHECK(backends_of(small) == 1);
    }
    {  // One more after reserve_pool_timeout, then no more.
        Holder first(pooler.conninfo(reserved, "d"));
        Holder second(pooler.conninfo(reserved, "d"));
        CHECK(first.pid != second.pid);
        CHECK(pooler.wait_for_log("taking connection from reserve_pool"));
        CHECK(waits_for_a_server(pooler.conninfo(reserved, "d")));
        CHECK(backends_of(reserved) == 2);
    }
    {  // A user without an entry: the database's pool_size=2, its reserve 0.
        Holder first(pooler.conninfo(plain, "d"));
        Holder second(pooler.conninfo(plain, "d"));
        CHECK(waits_for_a_server(pooler.conninfo(plain, "d")));
        CHECK(backends_of(plain) == 2);
    }
}

namespace {

// How long `sql` (one statement) took on `conn`, and its result.
std::pair<std::chrono::milliseconds, Result> timed(Conn& conn, const std::string& sql) {
    auto started = std::chrono::steady_clock::now();
    Result r = run(conn, sql);
    return {std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - started),
            r};
}

}  // namespace

TEST_CASE("[users] query_timeout, idle_transaction_timeout, client_idle_timeout override") {
    const auto& env = TestEnv::get();
    const std::string strict = private_role("pgt_ctime_strict");
    const std::string relaxed = private_role("pgt_ctime_relaxed");
    Pgtether pooler(limits_config(
        {strict, relaxed},
        {{"pool_mode", "session"}, {"query_timeout", "0"}, {"client_idle_timeout", "0"},
         {"idle_transaction_timeout", "0"}},
        {"d = " + server_of(env)},
        {strict + " = query_timeout=1 idle_transaction_timeout=1 client_idle_timeout=2"}));
    {  // query_timeout: the user's 1 s, where the global one is off.
        Conn c = Conn::must(pooler.conninfo(strict, "d"));
        auto [took, r] = timed(c, "SELECT pg_sleep(4)");
        CHECK(r.is_error());
        CHECK_MESSAGE(r.message.find("query_timeout") != std::string::npos, r.describe());
        CHECK(r.sqlstate == "57014");
        CHECK(took < 3000ms);
        Conn other = Conn::must(pooler.conninfo(relaxed, "d"));
        auto [other_took, other_r] = timed(other, "SELECT pg_sleep(1.5)");
        CHECK_MESSAGE(other_r.ok(), other_r.describe());
    }
    {  // idle_transaction_timeout: the user's 1 s.
        Conn c = Conn::must(pooler.conninfo(strict, "d"));
        c.exec_ok("BEGIN");
        c.exec_ok("SELECT 1");
        std::this_thread::sleep_for(1800ms);
        Result r = first_error(c.exec_all("SELECT 2"));
        CHECK(r.is_error());
        // The error (25P03) may reach the client, or only the closed connection.
        const bool timed_out = r.message.find("idle transaction timeout") != std::string::npos ||
                               !c.ok();
        CHECK_MESSAGE(timed_out, r.describe());
        CHECK(pooler.wait_for_log("idle transaction timeout"));
        Conn other = Conn::must(pooler.conninfo(relaxed, "d"));
        other.exec_ok("BEGIN");
        std::this_thread::sleep_for(1800ms);
        CHECK(scalar(other, "SELECT 'still here'") == "still here");
        other.exec_ok("COMMIT");
    }
    {  // client_idle_timeout: the user's 2 s.
        Conn c = Conn::must(pooler.conninfo(strict, "d"));
        Conn other = Conn::must(pooler.conninfo(relaxed, "d"));
        CHECK(scalar(c, "SELECT 1") == "1");
        CHECK(scalar(other, "SELECT 1") == "1");
        std::this_thread::sleep_for(3000ms);
        CHECK(first_error(c.exec_all("SELECT 1")).is_error());
        CHECK(pooler.wait_for_log("client_idle_timeout"));
        CHECK(scalar(other, "SELECT 'idle is fine'") == "idle is fine");
    }
}

TEST_CASE("query_wait_timeout per database and per user (1.26)") {
    const auto& env = TestEnv::get();
    const std::string role = private_role("pgt_cwait_db");
    const std::string patient = private_role("pgt_cwait_user");
    for (const auto& r : {role, patient}) REQUIRE(settled(r));
    Pgtether pooler(limits_config(
        {role, patient}, {{"query_wait_timeout", "30"}, {"default_pool_size", "1"}},
        {"quick = " + server_of(env) + " query_wait_timeout=1 tether_reserve_size=0"},
        {patient + " = query_wait_timeout=3"}));
    {  // The database's 1 s, not the global 30 s.
        Holder holder(pooler.conninfo(role, "quick"));
        Conn waiter = Conn::must(pooler.conninfo(role, "quick"));
        auto [took, r] = timed(waiter, "SELECT 'never'");
        CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
        CHECK(took >= 900ms);
        CHECK(took < 5000ms);
    }
    {  // A user's value wins over the database's.
        Holder holder(pooler.conninfo(patient, "quick"));
        Conn waiter = Conn::must(pooler.conninfo(patient, "quick"));
        auto [took, r] = timed(waiter, "SELECT 'never'");
        CHECK_MESSAGE(r.message.find("query_wait_timeout") != std::string::npos, r.describe());
        CHECK(took >= 2800ms);
        CHECK(took < 10000ms);
    }
}

TEST_CASE("transaction_timeout (1.25): globally and per user, a transaction or a lone statement") {
    const auto& env = TestEnv::get();
    const std::string limited = private_role("pgt_ctx_limited");
    const std::string other = private_role("pgt_ctx_other");
    Pgtether pooler(limits_config({limited, other},
                                  {{"pool_mode", "transaction"}, {"transaction_timeout", "0"}},
                                  {"d = " + server_of(env)},
                                  {limited + " = transaction_timeout=1"}));
    {  // A transaction kept busy (never idle long) still ends after 1 s.
        Conn c = Conn::must(pooler.conninfo(limited, "d"));
        c.exec_ok("BEGIN");
        Result last;
        for (int i = 0; i < 10 && c.ok(); ++i) {
            std::this_thread::sleep_for(300ms);
            last = run(c, "SELECT 1");
            if (last.is_error()) break;
        }
        const bool ended = last.is_error() || !c.ok();
        CHECK_MESSAGE(ended, last.describe());
        CHECK(pooler.wait_for_log("transaction timeout"));
    }
    {  // A lone statement is a transaction too.
        Conn c = Conn::must(pooler.conninfo(limited, "d"));
        auto [took, r] = timed(c, "SELECT pg_sleep(4)");
        CHECK(r.is_error());
        CHECK_MESSAGE(r.message.find("transaction timeout") != std::string::npos, r.describe());
        CHECK(r.sqlstate == "25P04");
        CHECK(took < 3000ms);
    }
    {  // Another user has the global value, off.
        Conn c = Conn::must(pooler.conninfo(other, "d"));
        c.exec_ok("BEGIN");
        for (int i = 0; i < 5; ++i) {
            std::this_thread::sleep_for(300ms);
            CHECK(scalar(c, "SELECT 1") == "1");
        }
        c.exec_ok("COMMIT");
        auto [took, r] = timed(c, "SELECT pg_sleep(1.5)");
        CHECK_MESSAGE(r.ok(), r.describe());
    }
    // The global value, for everyone without an entry of their own.
    pooler.reload(limits_config({limited, other},
                                {{"pool_mode", "transaction"}, {"transaction_timeout", "1"}},
                                {"d = " + server_of(env)}, {}));
    CHECK(pooler.wait_for_log("transaction_timeout: 0 -> 1"));
    Conn c = Conn::must(pooler.conninfo(other, "d"));
    auto [took, r] = timed(c, "SELECT pg_sleep(4)");
    CHECK_MESSAGE(r.message.find("transaction timeout") != std::string::npos, r.describe());
    CHECK(took < 3000ms);
}

TEST_CASE("query_wait_notify: a client queued longer is told so once, with PgBouncer's NOTICE") {
    const std::string role = private_role("pgt_cnotify");
    REQUIRE(settled(role));
    const std::string text =
        "No server connection available in postgres backend, client being queued";
    Pgtether pooler(for_notify(role, "1"));
    auto notices_of = [&](Conn& c) {
        int n = 0;
        for (const auto& notice : c.take_notices()) {
            if (notice.message == text && notice.severity == "NOTICE") ++n;
        }
        return n;
    };
    {  // Queued for about 2.5 s (more than 1 whole second): one notice, then the result.
        Holder holder(pooler.conninfo(role));
        Conn waiter = Conn::must(pooler.conninfo(role));
        std::thread release([&] {
            std::this_thread::sleep_for(2500ms);
            holder.conn.exec("COMMIT");
        });
        CHECK(scalar(waiter, "SELECT 'served'") == "served");
        release.join();
        CHECK(notices_of(waiter) == 1);
        // A second wait on the same connection: no second notice, as in PgBouncer.
        Holder again(pooler.conninfo(role));
        std::thread release_again([&] {
            std::this_thread::sleep_for(2500ms);
            again.conn.exec("COMMIT");
        });
        CHECK(scalar(waiter, "SELECT 'again'") == "again");
        release_again.join();
        CHECK(notices_of(waiter) == 0);
    }
    {  // A short wait (under a whole second past the setting) says nothing.
        Holder holder(pooler.conninfo(role));
        Conn waiter = Conn::must(pooler.conninfo(role));
        std::thread release([&] {
            std::this_thread::sleep_for(500ms);
            holder.conn.exec("COMMIT");
        });
        CHECK(scalar(waiter, "SELECT 'quick'") == "quick");
        release.join();
        CHECK(notices_of(waiter) == 0);
    }
    // 0 turns it off.
    Pgtether quiet(for_notify(role, "0"));
    Holder holder(quiet.conninfo(role));
    Conn waiter = Conn::must(quiet.conninfo(role));
    std::thread release([&] {
        std::this_thread::sleep_for(2500ms);
        holder.conn.exec("COMMIT");
    });
    CHECK(scalar(waiter, "SELECT 'served'") == "served");
    release.join();
    CHECK(notices_of(waiter) == 0);
}
