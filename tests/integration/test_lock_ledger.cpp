// Exact lock accounting (docs/advisory-locks.md, "Exact accounting"), against a real PostgreSQL:
// long random sequences of lock, unlock and try forms — simple and extended protocol, text and
// binary parameters, multi-statement strings, pipelines, transaction blocks, errors, stacked and
// shared locks, shapes that need the probe — from many clients on a small pool. After every
// transaction, once pgtether has finished its own work, the ledger every tethered client shows in
// SHOW LOCKS is compared with pg_locks for its backend, and every other backend of the pool must
// hold no advisory lock. They must never differ. With tether_probe_delay = 0 every
// transaction that could not be counted is probed at its end, so the ledger must equal pg_locks;
// with a delay such a transaction leaves the ledger "others unknown" (a later probe settles it),
// and what the ledger lists for sure must still be held.
//
// PGT_LEDGER_SEED=<n> replays a sequence; PGT_LEDGER_STEPS=<n> makes it longer.
#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

constexpr int kClients = 6;

long long env_number(const char* name, long long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoll(v) : fallback;
}

// A lock as pg_locks and SHOW LOCKS both can spell it: "42 exclusive", "1,2 shared".
using LockSet = std::set<std::string>;

std::string big_endian8(long long v) {
    std::string out(8, '\0');
    for (int i = 7; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
        v >>= 8;
    }
    return out;
}

// Extended protocol with explicit parameter types and formats, through libpq.
bool exec_typed(Conn& conn, const std::string& sql, const std::vector<Oid>& types,
                const std::vector<std::string>& values, const std::vector<int>& formats) {
    std::vector<const char*> v;
    std::vector<int> lengths;
    for (const auto& s : values) {
        v.push_back(s.data());
        lengths.push_back(static_cast<int>(s.size()));
    }
    PGresult* r = PQexecParams(conn.raw(), sql.c_str(), static_cast<int>(values.size()),
                               types.data(), v.data(), lengths.data(), formats.data(), 0);
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return ok;
}

// Several statements in one libpq pipeline (extended protocol, one Sync each): all results are
// read, errors included.
void exec_pipeline(Conn& conn, const std::vector<std::string>& statements) {
    PGconn* c = conn.raw();
    REQUIRE(PQenterPipelineMode(c) == 1);
    for (const auto& s : statements) {
        REQUIRE(PQsendQueryParams(c, s.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1);
        REQUIRE(PQpipelineSync(c) == 1);
    }
    std::size_t syncs = 0;
    while (syncs < statements.size()) {
        PGresult* r = PQgetResult(c);
        if (!r) continue;  // end of one statement's results
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) ++syncs;
        PQclear(r);
    }
    REQUIRE(PQexitPipelineMode(c) == 1);
}

class Scenario {
  public:
    Scenario(Pgtether& pooler, unsigned seed) : pooler_(pooler), rng_(seed) {
        for (int i = 0; i < kClients; ++i) {
            clients_.push_back(Conn::must(pooler.conninfo(role(), "", "", "application_name=ledger" +
                                                                              std::to_string(i))));
        }
        admin_ = std::make_unique<Conn>(console(pooler));
        direct_ = std::make_unique<Conn>(Conn::must(direct_conninfo()));
    }

    static const std::string& role() {
        static const std::string r = private_role("pgt_ledger");
        return r;
    }

    // One random transaction of one random client.
    std::string step() {
        const int c = pick(0, kClients - 1);
        Conn& conn = clients_[static_cast<std::size_t>(c)];
        std::string what;
        switch (pick(0, 13)) {
            case 0: what = run(conn, "SELECT " + calls(c, pick(1, 3))); break;
            case 1: what = run(conn, "select 1; SELECT " + calls(c, 1) + "; SELECT " + calls(c, 2)); break;
            case 2: {  // extended, unnamed, text parameters
                long long k = key(c, true);
                what = "params " + std::to_string(k);
                conn.exec_params(std::string("SELECT ") + lock_or_try(true) + "($1)",
                                 {std::to_string(k)});
                break;
            }
            case 3: {  // extended, binary int8 parameter, declared type
                long long k = key(c, false);
                what = "binary unlock " + std::to_string(k);
                exec_typed(conn, "SELECT pg_advisory_unlock($1)", {20}, {big_endian8(k)}, {1});
                break;
            }
            case 4: {  // named prepared statements, two int4 keys
                static const char* kNames[] = {"lock2", "unlock2", "trys2"};
                static const char* kSql[] = {"SELECT pg_advisory_lock($1, $2)",
                                             "SELECT pg_advisory_unlock($1, $2)",
                                             "SELECT pg_try_advisory_lock_shared($1, $2)"};
                const int s = pick(0, 2);
                auto& prepared = prepared_[static_cast<std::size_t>(c)];
                if (!prepared.count(kNames[s])) {
                    PGT_REQUIRE_OK(conn.prepare(kNames[s], kSql[s]));
                    prepared.insert(kNames[s]);
                }
                // Blocking forms only on the client's own keys.
                // Blocking forms only on the client's own keys; the shared try on (k, 8), which
                // no one locks exclusively.
                const long long k1 = s == 0 ? 88'100 + c : pick(88'100, 88'100 + kClients - 1);
                what = std::string(kNames[s]) + " " + std::to_string(k1);
                conn.exec_prepared(kNames[s], {std::to_string(k1), s == 2 ? "8" : "7"});
                break;
            }
            case 5: exec_pipeline(conn, {"SELECT " + calls(c, 1), "SELECT 1", "SELECT " + calls(c, 2)});
                    what = "pipeline";
                    break;
            case 6: {  // a transaction block: session locks outlive ROLLBACK
                what = "block";
                conn.exec("BEGIN");
                conn.exec("SELECT " + calls(c, 2));
                conn.exec("SELECT count(*) FROM pg_class");
                conn.exec(pick(0, 1) ? "ROLLBACK" : "COMMIT");
                break;
            }
            case 7: what = run(conn, "SELECT " + calls(c, 1) + "; SELECT 1/0; SELECT " + calls(c, 1)); break;
            case 8: what = run(conn, "SELECT pg_advisory_lock(1, 3000000000)"); break;  // an error
            case 9: what = run(conn, "SELECT pg_advisory_unlock_all()"); break;
            case 10:  // shapes the probe decides
                what = run(conn, "SELECT " + calls(c, 1) + " FROM (SELECT 1) AS once");
                break;
            case 11:
                what = run(conn, "DO $$ BEGIN PERFORM pg_advisory_lock(" + std::to_string(key(c, false)) +
                                     "); PERFORM pg_advisory_unlock(" + std::to_string(key(c, false)) +
                                     "); END $$");
                break;
            case 12: what = run(conn, "SELECT 1"); break;
            case 13:  // stacking on one key
                what = run(conn, "SELECT pg_advisory_lock(" + std::to_string(kKeyBase + 200 + c) +
                                     "), pg_advisory_lock(" + std::to_string(kKeyBase + 200 + c) + ")");
                break;
        }
        return "client " + std::to_string(c) + ": " + what;
    }

    // Waits until pgtether runs none of its own queries, then compares. Empty when they agree.
    // `settled`: every ledger must be complete by now (the deferred probes have run).
    std::string compare(bool settled = false) {
        bool quiet = eventually([&] {
            auto servers = admin_->exec("SHOW SERVERS");
            if (!servers.ok()) return false;
            for (const auto& row : named_rows(servers)) {
                if (row.at("internal_query")) return false;
            }
            return true;
        }, 5s);
        if (!quiet) return "pgtether never went quiet";
        // What pgtether believes: pid -> locks (a "(maybe released)" lock may or may not be there).
        std::map<std::string, LockSet> sure;
        std::map<std::string, LockSet> maybe;
        std::set<std::string> incomplete;
        auto locks = admin_->exec("SHOW LOCKS");
        if (!locks.ok()) return "SHOW LOCKS failed: " + locks.describe();
        for (const auto& row : named_rows(locks)) {
            if (!row.at("backend_pid")) return "a tethered client without a backend";
            const std::string pid = *row.at("backend_pid");
            sure[pid];
            std::string ledger = row.at("ledger").value_or("");
            std::size_t at = 0;
            while (at < ledger.size()) {
                std::size_t end = ledger.find(", ", at);
                if (end == std::string::npos) end = ledger.size();
                std::string entry = ledger.substr(at, end - at);
                at = end + 2;
                if (entry == "others unknown") {
                    if (settled) return "backend " + pid + ": ledger still unknown: " + ledger;
                    incomplete.insert(pid);
                    continue;
                }
                bool is_maybe = false;
                if (auto p = entry.find(" (maybe released)"); p != std::string::npos) {
                    entry.erase(p);
                    is_maybe = true;
                }
                if (auto p = entry.find(" x"); p != std::string::npos) entry.erase(p);
                (is_maybe ? maybe : sure)[pid].insert(entry);
            }
        }
        // The truth: every advisory lock of the test role's backends.
        auto truth = direct_->exec(
            "SELECT a.pid::text, CASE l.objsubid WHEN 1 THEN "
            "((l.classid::bigint << 32) | l.objid::bigint)::text "
            "ELSE (l.classid::int4)::text || ',' || (l.objid::int4)::text END || "
            "CASE l.mode WHEN 'ExclusiveLock' THEN ' exclusive' ELSE ' shared' END "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND a.usename = '" + role() + "'");
        if (!truth.ok()) return "pg_locks: " + truth.describe();
        std::map<std::string, LockSet> held;
        for (const auto& row : truth.rows) held[*row[0]].insert(*row[1]);
        std::ostringstream diff;
        for (const auto& [pid, set] : held) {
            if (!sure.count(pid)) {
                diff << "backend " << pid << " holds locks but no tethered client has it; ";
                continue;
            }
            for (const auto& lock : set) {
                if (!sure[pid].count(lock) && !maybe[pid].count(lock) && !incomplete.count(pid)) {
                    diff << "backend " << pid << " holds " << lock << ", ledger does not; ";
                }
            }
        }
        for (const auto& [pid, set] : sure) {
            for (const auto& lock : set) {
                if (!held[pid].count(lock)) {
                    diff << "ledger of backend " << pid << " has " << lock << ", pg_locks does not; ";
                }
            }
        }
        return diff.str();
    }

    std::vector<Conn>& clients() { return clients_; }
    Conn& admin() { return *admin_; }

  private:
    int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

    // Keys: shared ones (base+1..4) only for non-blocking forms; a client's own (base+10*c+..)
    // for all. Advisory locks live per database and other tests run in parallel on the same one:
    // the base keeps this test's keys apart from theirs (test_tether's 10, 20, ...).
    static constexpr long long kKeyBase = 88'000'000;
    long long key(int client, bool shared_allowed) {
        if (shared_allowed && pick(0, 1)) return kKeyBase + pick(1, 4);
        return kKeyBase + 10LL * (client + 1) + pick(0, 2);
    }
    const char* lock_or_try(bool shared_key) {
        static const char* kTry[] = {"pg_try_advisory_lock", "pg_try_advisory_lock_shared",
                                     "pg_advisory_unlock", "pg_advisory_unlock_shared"};
        static const char* kAny[] = {"pg_advisory_lock", "pg_advisory_lock_shared"};
        if (shared_key || pick(0, 2) > 0) return kTry[pick(0, 3)];
        return kAny[pick(0, 1)];
    }
    // `n` lock calls: blocking ones only on the client's own keys.
    std::string calls(int client, int n) {
        std::string out;
        for (int i = 0; i < n; ++i) {
            if (i > 0) out += ", ";
            const bool blocking = pick(0, 2) == 0;
            const long long k = blocking ? key(client, false) : key(client, true);
            std::string fn = blocking ? (pick(0, 1) ? "pg_advisory_lock" : "pg_advisory_lock_shared")
                                      : lock_or_try(true);
            if (pick(0, 4) == 0) fn = "pg_catalog." + fn;
            out += fn + "(" + std::to_string(k) + ")";
        }
        return out;
    }
    std::string run(Conn& conn, const std::string& sql) {
        conn.exec_all(sql);
        return sql;
    }

    Pgtether& pooler_;
    std::mt19937 rng_;
    std::vector<Conn> clients_;
    std::vector<std::set<std::string>> prepared_ = std::vector<std::set<std::string>>(kClients);
    std::unique_ptr<Conn> admin_;
    std::unique_ptr<Conn> direct_;
};

}  // namespace

namespace {

// `settle_every`: with deferred probes, every this many steps the clients pause longer than
// tether_probe_delay; then every ledger must have been settled by a probe and equal pg_locks.
void run_scenario(const std::map<std::string, std::string>& settings, int settle_every = 0) {
    REQUIRE(settled(Scenario::role()));
    std::map<std::string, std::string> all = {{"tether_reserve_size", "8"},
                                              {"query_wait_timeout", "20"}};
    all.insert(settings.begin(), settings.end());
    PoolerConfig config = pool_config("transaction", 2, all);
    config.userlist = {{TestEnv::get().superuser, ""}, {Scenario::role(), ""}};
    Pgtether pooler(config);
    const auto seed = static_cast<unsigned>(env_number("PGT_LEDGER_SEED", std::random_device{}()));
    const long long steps = env_number("PGT_LEDGER_STEPS", 300);
    MESSAGE("seed " << seed << " (PGT_LEDGER_SEED replays it), " << steps << " steps");
    Scenario scenario(pooler, seed);
    for (long long i = 0; i < steps; ++i) {
        const std::string what = scenario.step();
        const std::string diff = scenario.compare();
        INFO("seed " << seed << ", step " << i << ": " << what);
        if (!diff.empty()) {
            const std::string log = pooler.log();
            MESSAGE("the end of pgtether's log:\n" << log.substr(log.size() > 6000 ? log.size() - 6000 : 0));
        }
        REQUIRE_MESSAGE(diff.empty(), diff);
        if (settle_every > 0 && i % settle_every == settle_every - 1) {
            std::this_thread::sleep_for(400ms);
            const std::string settled = scenario.compare(true);
            REQUIRE_MESSAGE(settled.empty(), settled);
        }
    }
    // Most lock-relevant transactions were decided without a probe.
    auto stats = scenario.admin().exec("SHOW STATS_TOTALS");
    REQUIRE(stats.ok());
    long long ledger = 0;
    long long probes = 0;
    for (const auto& row : named_rows(stats)) {
        ledger += cell_int(row, "ledger_count");
        probes += cell_int(row, "probe_count");
    }
    MESSAGE("ledger decisions " << ledger << ", probes " << probes);
    CHECK(ledger > probes);
    // Everyone leaves: nothing stays locked.
    for (auto& c : scenario.clients()) c.close();
    CHECK(eventually([&] {
        return direct_scalar("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a "
                             "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND a.usename = '" +
                             Scenario::role() + "'") == "0";
    }, 5s));
}

}  // namespace

TEST_CASE("the lock ledger never differs from pg_locks (every uncounted transaction probed, the default)") {
    run_scenario({{"tether_probe_delay", "0"}});
}

TEST_CASE("the lock ledger never differs from pg_locks (probes deferred)") {
    // A short delay, so that idle probes happen during the run too.
    run_scenario({{"tether_probe_delay", "0.2"}}, 20);
}
