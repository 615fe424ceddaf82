// Lock wrappers discovered from the catalog (issue 12, docs/advisory-locks.md "Wrappers"): a
// statement that takes a session advisory lock through a function, procedure, trigger or view it
// does not name as pg_advisory_lock still tethers its client, with nothing configured.
//
// Each test database is created for this file (so discovery sees exactly these objects and other
// tests running in parallel are not disturbed) and dropped at the end. Whether a client is
// tethered is seen as in test_tether.cpp: the pool has two backends, so two other clients can
// both hold a transaction open only when no client keeps one.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/scratch_database.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

// What the wrappers below need: the unlock wrapper and the table the trigger goes on.
constexpr const char* kBaseSchema = R"sql(
-- The unlock wrapper.
CREATE FUNCTION release_job_lock(k bigint) RETURNS boolean LANGUAGE sql
  AS 'SELECT pg_advisory_unlock(k)';
CREATE TABLE jobs (id bigint);
-- Neither a wrapper nor unknown.
CREATE FUNCTION harmless(k bigint) RETURNS bigint LANGUAGE sql AS 'SELECT k + 1';
)sql";

// Every kind of wrapper, and how a client takes the lock `key` through it.
constexpr const char* kWrapperSchema = R"sql(
CREATE SCHEMA app;
-- PL/pgSQL wrapper, schema-qualified.
CREATE FUNCTION app.acquire_job_lock(k bigint) RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN PERFORM pg_advisory_lock(k); END $$;
-- SQL wrapper.
CREATE FUNCTION sql_lock(k bigint) RETURNS void LANGUAGE sql AS 'SELECT pg_advisory_lock(k)';
-- SQL-standard body (PostgreSQL 14+): prosrc is empty, the body is deparsed.
CREATE FUNCTION std_lock(k bigint) RETURNS void LANGUAGE sql
  BEGIN ATOMIC SELECT pg_advisory_lock(k); END;
-- A wrapper calling a wrapper, with a quoted mixed-case name.
CREATE FUNCTION "Outer_Lock"(k bigint) RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN PERFORM app.acquire_job_lock(k); END $$;
-- A procedure.
CREATE PROCEDURE take_lock_proc(k bigint) LANGUAGE plpgsql
  AS $$ BEGIN PERFORM pg_advisory_lock(k); END $$;
-- A trigger that locks the row's id on INSERT.
CREATE FUNCTION lock_job_row() RETURNS trigger LANGUAGE plpgsql
  AS $$ BEGIN PERFORM pg_advisory_lock(NEW.id); RETURN NEW; END $$;
CREATE TRIGGER jobs_lock AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION lock_job_row();
-- A view that calls a wrapper (a try-lock wrapper: a view column cannot be void).
CREATE FUNCTION grab(k bigint) RETURNS boolean LANGUAGE sql AS 'SELECT pg_try_advisory_lock(k)';
CREATE VIEW job_locker AS SELECT grab(731900) AS locked;
)sql";

const std::string kSchema = std::string(kBaseSchema) + kWrapperSchema;

struct WrapperCall {
    const char* kind;
    const char* sql;  // takes the lock `key`
    long long key;
};
// One call per wrapper kind of kWrapperSchema; `offset` keeps keys apart between test cases.
std::vector<WrapperCall> wrapper_calls(long long offset) {
    return {
        {"PL/pgSQL, schema-qualified", "SELECT app.acquire_job_lock({key})", offset + 1},
        {"SQL", "SELECT sql_lock({key})", offset + 2},
        {"SQL-standard body", "select STD_LOCK({key})", offset + 3},
        {"a wrapper calling a wrapper, quoted", "SELECT \"Outer_Lock\"({key})", offset + 4},
        {"a procedure", "CALL take_lock_proc({key})", offset + 5},
        {"a trigger", "INSERT INTO jobs VALUES ({key})", offset + 6},
        {"a view (its key is fixed)", "SELECT * FROM job_locker", 731900},
    };
}

std::string with_key(const WrapperCall& call) {
    std::string sql = call.sql;
    const auto at = sql.find("{key}");
    if (at != std::string::npos) sql.replace(at, 5, std::to_string(call.key));
    return sql;
}

PoolerConfig two_backends(std::map<std::string, std::string> extra = {}) {
    extra.emplace("query_wait_timeout", "20");
    // No allowance on top of the pool: a tethered client visibly takes one of the two backends.
    extra.emplace("tether_reserve_size", "0");
    return pool_config("transaction", 2, extra);
}

// The row for `name` in `database` among SHOW LOCK_FUNCTIONS' `rows`; nullopt when there is none.
std::optional<NamedRow> lock_function_in(const std::vector<NamedRow>& rows,
                                         const std::string& database, const std::string& name) {
    for (const auto& row : rows) {
        if (row.at("database") == database && row.at("name") == name) return row;
    }
    return std::nullopt;
}

std::vector<NamedRow> lock_functions(const Pgtether& pooler) {
    Conn admin = console(pooler);
    return named_rows(admin.exec_ok("SHOW LOCK_FUNCTIONS"));
}

// SHOW LOCK_FUNCTIONS' row for `name` in `database`; nullopt when there is none.
std::optional<NamedRow> lock_function(const Pgtether& pooler, const std::string& database,
                                      const std::string& name) {
    return lock_function_in(lock_functions(pooler), database, name);
}

// `name` is in the trigger as `found_prefix` says, on every worker that serves `database`: with
// several workers one discovery is posted to the others, and a client on a worker that has not
// taken it yet is not tethered by the name (SHOW LOCK_FUNCTIONS' `workers` counts those that
// have; every worker with the database has the built-in names).
bool found_as(const Pgtether& pooler, const std::string& database, const std::string& name,
              const std::string& found_prefix) {
    const auto rows = lock_functions(pooler);
    auto row = lock_function_in(rows, database, name);
    auto builtin = lock_function_in(rows, database, "pg_advisory_lock");
    return row && builtin && cell(*row, "found").rfind(found_prefix, 0) == 0 &&
           cell(*row, "workers") == cell(*builtin, "workers");
}

// Backends of `database` named as the catalog watch's listener, and all client backends of it.
int watch_listeners(const std::string& database) {
    return std::stoi(direct_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '" + database +
        "' AND application_name = 'pgtether catalog watch'"));
}

// The catalog watch of `database` has read the catalog (SHOW LOCK_FUNCTIONS' checked_at).
bool watch_has_checked(const Pgtether& pooler, const std::string& database) {
    auto row = lock_function(pooler, database, "release_job_lock");
    return row && row->count("checked_at") && row->at("checked_at").has_value();
}

// `lock_sql`, run by a client through pgtether, takes the session lock `key` without naming a
// lock function: the client must be tethered, another client must not get the lock, and the
// unlock wrapper must release it and untether the client — as on a direct connection.
void check_tethered_by(const Pgtether& pooler, const std::string& database,
                       const std::string& lock_sql, long long key) {
    INFO("statement: ", lock_sql);
    const std::string conninfo = pooler.conninfo("", database);
    Conn holder = Conn::must(conninfo);
    Conn other = Conn::must(conninfo);
    PGT_REQUIRE_OK(holder.exec(lock_sql));
    CHECK(advisory_locks_held(key) == 1);
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(" + std::to_string(key) + ")") == "f");
    CHECK(second_transaction_waits(conninfo));
    // The unlock goes to the backend that holds the lock, through the unlock wrapper.
    CHECK(scalar(holder, "SELECT release_job_lock(" + std::to_string(key) + ")") == "t");
    CHECK(advisory_locks_held(key) == 0);
    CHECK(two_transactions_fit(conninfo));
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(" + std::to_string(key) + ")") == "t");
    CHECK(scalar(other, "SELECT release_job_lock(" + std::to_string(key) + ")") == "t");
}

// `holder` has just taken the session lock `key` through a wrapper: it is tethered and `other`
// cannot take the lock; release_job_lock releases it and ends the tether.
void check_holder_tethered(const std::string& conninfo, Conn& holder, Conn& other, long long key) {
    const std::string k = std::to_string(key);
    CHECK(advisory_locks_held(key) == 1);
    CHECK(scalar(other, "SELECT pg_try_advisory_lock(" + k + ")") == "f");
    CHECK(second_transaction_waits(conninfo));
    CHECK(scalar(holder, "SELECT release_job_lock(" + k + ")") == "t");
    CHECK(advisory_locks_held(key) == 0);
    CHECK(two_transactions_fit(conninfo));
}

// release_job_lock(k) unlocks; later_lock(k) takes no lock until make_later_lock_a_wrapper().
void create_later_lock(const ScratchDatabase& db) {
    db.exec_ok(
        "CREATE FUNCTION release_job_lock(k bigint) RETURNS boolean LANGUAGE sql "
        "AS 'SELECT pg_advisory_unlock(k)'");
    db.exec_ok("CREATE FUNCTION later_lock(k bigint) RETURNS void LANGUAGE sql AS 'SELECT 1'");
}

// later_lock(k) takes the session lock k from now on (changed behind pgtether's back), and a
// RELOAD has discovered it.
void make_later_lock_a_wrapper(const ScratchDatabase& db, Pgtether& pooler) {
    db.exec_ok(
        "CREATE OR REPLACE FUNCTION later_lock(k bigint) RETURNS void LANGUAGE plpgsql "
        "AS $$ BEGIN PERFORM pg_advisory_lock(k); END $$");
    pooler.reload();
    REQUIRE(eventually([&] { return found_as(pooler, db.name(), "later_lock", "discovered"); }));
}

// A scratch database with release_job_lock and a later_lock that takes no lock yet, a pgtether
// in front of it that discovers only on RELOAD or a catalog change through it, and two clients.
class LaterLockSetup {
  public:
    explicit LaterLockSetup(const std::string& suffix)
        : db_("pgtether_discovery_" + suffix),
          created_((create_later_lock(db_), true)),
          pooler_(two_backends({{"advisory_lock_discovery_interval", "3600"}})),
          conninfo_(pooler_.conninfo("", db_.name())),
          holder_(Conn::must(conninfo_)),
          other_(Conn::must(conninfo_)) {}

    std::tuple<ScratchDatabase&, Pgtether&, const std::string&, Conn&, Conn&> parts() {
        return {db_, pooler_, conninfo_, holder_, other_};
    }

  private:
    ScratchDatabase db_;
    bool created_;  // the functions exist before any client logs in (and discovery first runs)
    Pgtether pooler_;
    std::string conninfo_;
    Conn holder_;
    Conn other_;
};

}  // namespace

TEST_CASE("wrappers, procedures, triggers and views found in the catalog tether their callers") {
    ScratchDatabase db("pgtether_discovery_wrappers");
    db.exec_ok(kSchema);
    Pgtether pooler(two_backends());
    const std::string& name = db.name();
    // The pool's first login starts discovery.
    PGT_REQUIRE_OK(Conn::must(pooler.conninfo("", name)).exec("SELECT 1"));
    REQUIRE(eventually([&] { return found_as(pooler, name, "acquire_job_lock", "discovered"); }));

    SUBCASE("what SHOW LOCK_FUNCTIONS lists") {
        CHECK(cell(*lock_function(pooler, name, "acquire_job_lock"), "schema") == "app");
        CHECK(found_as(pooler, name, "sql_lock", "discovered"));
        CHECK(found_as(pooler, name, "std_lock", "discovered"));
        CHECK(found_as(pooler, name, "Outer_Lock", "discovered"));
        CHECK(found_as(pooler, name, "release_job_lock", "discovered"));
        CHECK(cell(*lock_function(pooler, name, "take_lock_proc"), "kind") == "procedure");
        CHECK(found_as(pooler, name, "lock_job_row", "discovered"));
        auto table = lock_function(pooler, name, "jobs");
        REQUIRE(table);
        CHECK(cell(*table, "kind") == "table");
        CHECK(cell(*table, "found") == "via trigger jobs_lock (function public.lock_job_row)");
        CHECK(found_as(pooler, name, "job_locker", "via view"));
        CHECK(found_as(pooler, name, "pg_advisory_lock", "builtin"));
        CHECK_FALSE(lock_function(pooler, name, "harmless"));
        CHECK_FALSE(cell(*lock_function(pooler, name, "sql_lock"), "discovered_at").empty());
        CHECK(pooler.wait_for_log("lock functions of database \"" + name + "\""));
    }
    SUBCASE("a PL/pgSQL wrapper, schema-qualified") {
        check_tethered_by(pooler, name, "SELECT app.acquire_job_lock(731001)", 731001);
    }
    SUBCASE("a PL/pgSQL wrapper through the extended protocol") {
        const std::string conninfo = pooler.conninfo("", name);
        Conn holder = Conn::must(conninfo);
        PGT_REQUIRE_OK(holder.exec_params("SELECT app.acquire_job_lock($1)", {"731002"}));
        CHECK(second_transaction_waits(conninfo));
        CHECK(scalar(holder, "SELECT release_job_lock(731002)") == "t");
        CHECK(two_transactions_fit(conninfo));
    }
    SUBCASE("a SQL wrapper") {
        check_tethered_by(pooler, name, "SELECT sql_lock(731003)", 731003);
    }
    SUBCASE("a SQL-standard body") {
        check_tethered_by(pooler, name, "select STD_LOCK(731004)", 731004);
    }
    SUBCASE("a wrapper calling a wrapper, quoted") {
        check_tethered_by(pooler, name, "SELECT \"Outer_Lock\"(731005)", 731005);
    }
    SUBCASE("a procedure called with CALL") {
        check_tethered_by(pooler, name, "CALL take_lock_proc(731006)", 731006);
    }
    SUBCASE("a trigger that locks on INSERT") {
        check_tethered_by(pooler, name, "INSERT INTO jobs VALUES (731007)", 731007);
    }
    SUBCASE("a view that calls a wrapper") {
        check_tethered_by(pooler, name, "SELECT * FROM job_locker", 731900);
    }
}

TEST_CASE("without discovery a wrapper is not tethered (the hole discovery closes)") {
    ScratchDatabase db("pgtether_discovery_off");
    db.exec_ok(kSchema);
    Pgtether pooler(two_backends({{"advisory_lock_discovery", "off"}}));
    const std::string conninfo = pooler.conninfo("", db.name());
    Conn holder = Conn::must(conninfo);
    PGT_REQUIRE_OK(holder.exec("SELECT sql_lock(731010)"));
    CHECK(advisory_locks_held(731010) == 1);
    // The backend that holds the lock went back to the pool: a leak, not a tether.
    CHECK(two_transactions_fit(conninfo));
    CHECK_FALSE(lock_function(pooler, db.name(), "sql_lock"));
    CHECK(found_as(pooler, db.name(), "pg_advisory_lock", "builtin"));
}

TEST_CASE("a wrapper created and dropped through pgtether is discovered without a reload") {
    ScratchDatabase db("pgtether_discovery_ddl");
    db.exec_ok(
        "CREATE FUNCTION release_job_lock(k bigint) RETURNS boolean LANGUAGE sql "
        "AS 'SELECT pg_advisory_unlock(k)'");
    // A long interval: only the catalog change can explain a discovery.
    Pgtether pooler(two_backends({{"advisory_lock_discovery_interval", "3600"}}));
    const std::string& name = db.name();
    const std::string conninfo = pooler.conninfo("", name);
    Conn ddl = Conn::must(conninfo);
    PGT_REQUIRE_OK(ddl.exec("SELECT 1"));
    REQUIRE(eventually([&] { return found_as(pooler, name, "release_job_lock", "discovered"); }));

    PGT_REQUIRE_OK(
        ddl.exec("CREATE FUNCTION late_lock(k bigint) RETURNS void LANGUAGE plpgsql "
                 "AS $$ BEGIN PERFORM pg_advisory_lock(k); END $$"));
    // Called at once, maybe before discovery has finished: tethered all the same.
    check_tethered_by(pooler, name, "SELECT late_lock(731020)", 731020);
    REQUIRE(eventually([&] { return found_as(pooler, name, "late_lock", "discovered"); }));
    CHECK(pooler.wait_for_log("added: public.late_lock"));
    // And afterwards, from the discovered name.
    check_tethered_by(pooler, name, "SELECT late_lock(731021)", 731021);

    // In an explicit transaction, with CREATE OR REPLACE: discovery runs after the COMMIT.
    PGT_REQUIRE_OK(ddl.exec("BEGIN"));
    PGT_REQUIRE_OK(
        ddl.exec("CREATE OR REPLACE FUNCTION other_lock(k bigint) RETURNS void "
                 "LANGUAGE sql AS 'SELECT pg_advisory_lock_shared(k)'"));
    PGT_REQUIRE_OK(ddl.exec("COMMIT"));
    REQUIRE(eventually([&] { return found_as(pooler, name, "other_lock", "discovered"); }));

    PGT_REQUIRE_OK(ddl.exec("DROP FUNCTION late_lock(bigint)"));
    CHECK(eventually([&] { return !lock_function(pooler, name, "late_lock"); }));
    CHECK(pooler.wait_for_log("removed: public.late_lock"));
    CHECK(found_as(pooler, name, "other_lock", "discovered"));

    // A wrapper created behind pgtether's back (a direct connection) is seen by the catalog
    // watch, without a RELOAD (test cases below: every kind, and how fast).
    db.exec_ok(
        "CREATE FUNCTION direct_lock(k bigint) RETURNS void LANGUAGE sql "
        "AS 'SELECT pg_advisory_lock(k)'");
    CHECK(eventually([&] { return found_as(pooler, name, "direct_lock", "discovered"); }, 5s));
    CHECK(pooler.wait_for_log("catalog of database \"" + name + "\" changed"));
    check_tethered_by(pooler, name, "SELECT direct_lock(731022)", 731022);
}

TEST_CASE("a named statement prepared before its function became a wrapper tethers once it is") {
    LaterLockSetup setup("prepared");
    auto [db, pooler, conninfo, holder, other] = setup.parts();
    // Prepared while later_lock takes no lock: the statement's text matched nothing then.
    PGT_REQUIRE_OK(holder.prepare("take", "SELECT later_lock($1)"));
    PGT_REQUIRE_OK(holder.exec_prepared("take", {"1"}));
    // Now it does (behind pgtether's back), and a RELOAD discovers it.
    make_later_lock_a_wrapper(db, pooler);
    // The same named statement, executed again: the Bind scans its text with the new names.
    PGT_REQUIRE_OK(holder.exec_prepared("take", {"731030"}));
    check_holder_tethered(conninfo, holder, other, 731030);
}

TEST_CASE("an unnamed Parse text scanned before its function became a wrapper tethers once it is") {
    // Drivers send the same unnamed Parse for every execution; pgtether remembers the trigger's
    // answer per text (protocol/scan_memo.hpp). A discovery that changes the names must not
    // leave the old answer in place.
    LaterLockSetup setup("unnamed");
    auto [db, pooler, conninfo, holder, other] = setup.parts();
    const std::string text = "SELECT later_lock($1)";
    for (int i = 0; i < 3; ++i)
        PGT_REQUIRE_OK(holder.exec_params(text, {"1"}));
    CHECK(two_transactions_fit(conninfo));  // no lock, no tether: the text matched nothing
    make_later_lock_a_wrapper(db, pooler);
    // The same text again, as an unnamed Parse: scanned with the new names, so tethered.
    PGT_REQUIRE_OK(holder.exec_params(text, {"731031"}));
    check_holder_tethered(conninfo, holder, other, 731031);
}

TEST_CASE("a database whose discovery fails keeps serving, and discovery is retried") {
    ScratchDatabase db("pgtether_discovery_denied");
    // The pooled user cannot read pg_proc in this database: the discovery query fails.
    db.exec_ok("REVOKE SELECT ON pg_catalog.pg_proc FROM PUBLIC");
    const std::string user = private_role("lock_discovery_limited");
    PoolerConfig config = two_backends({{"advisory_lock_discovery_interval", "1"}});
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {TestEnv::get().superuser, ""}, {user, ""}};
    Pgtether pooler(config);
    const std::string conninfo = pooler.conninfo(user, db.name());
    Conn holder = Conn::must(conninfo);
    CHECK(scalar(holder, "SELECT 40 + 2") == "42");
    CHECK(pooler.wait_for_log("lock function discovery for database \"" + db.name() +
                              "\" failed: discovery query failed: 42501"));
    // The built-in names still work.
    PGT_REQUIRE_OK(holder.exec("SELECT pg_advisory_lock(731030)"));
    CHECK(second_transaction_waits(conninfo));
    CHECK(scalar(holder, "SELECT pg_advisory_unlock(731030)") == "t");
    CHECK(two_transactions_fit(conninfo));
    // Retried every second; the clients never notice.
    CHECK(eventually([&] {
        auto log = pooler.log();
        std::size_t count = 0;
        for (std::size_t at = log.find("lock function discovery for database");
             at != std::string::npos;
             at = log.find("lock function discovery for database", at + 1)) {
            ++count;
        }
        return count >= 2;
    }));
    CHECK(scalar(holder, "SELECT 1") == "1");
}

TEST_CASE("wrappers created behind pgtether's back are tethered a second later, every kind") {
    // On a direct connection (what PgBouncer users are told to run migrations on), or through
    // another pgtether instance: the catalog watch sees the catalog move and discovery runs
    // again, with no RELOAD and a discovery interval that never comes.
    ScratchDatabase db("pgtether_discovery_behind");
    db.exec_ok(kBaseSchema);
    Pgtether pooler(two_backends({{"advisory_lock_discovery_interval", "3600"},
                                  {"advisory_lock_catalog_check_interval", "0.5"}}));
    const std::string& name = db.name();
    PGT_REQUIRE_OK(Conn::must(pooler.conninfo("", name)).exec("SELECT 1"));
    REQUIRE(eventually([&] { return found_as(pooler, name, "release_job_lock", "discovered"); }));
    // The watch has read the catalog once (SHOW LOCK_FUNCTIONS says when), on a pooled backend:
    // without the event trigger it has no connection of its own.
    REQUIRE(eventually([&] { return watch_has_checked(pooler, name); }));
    CHECK(watch_listeners(name) == 0);

    SUBCASE("on a direct connection") {
        db.exec_ok(kWrapperSchema);
    }
    SUBCASE("through another pgtether instance") {
        Pgtether other(two_backends());
        Conn ddl = Conn::must(other.conninfo("", name));
        ddl.exec_ok(kWrapperSchema);
    }
    std::this_thread::sleep_for(1s);
    for (const auto& call : wrapper_calls(731100)) {
        const std::string kind = call.kind;
        CAPTURE(kind);
        check_tethered_by(pooler, name, with_key(call), call.key);
    }
    CHECK(pooler.wait_for_log("catalog of database \"" + name + "\" changed"));
}

// Every catalog check (here every 0.1 s) runs on an idle pooled backend. It takes the one the
// next client would get last, a client that comes meanwhile waits for it rather than meeting a
// new backend, and it goes back to its place in the idle list (LIFO by default): a lone client
// keeps its one backend as on a direct connection, whether the pool has one backend or several.
// Before, the check took the front backend (the client's) and put it back at the front, and a
// client that came meanwhile got another one, or a new one.
void check_watch_keeps_client_backend(int warm_backends) {
    ScratchDatabase db("pgtether_watch_places");
    db.exec_ok(kBaseSchema);
    Pgtether pooler(pool_config("transaction", 3, {{"advisory_lock_catalog_check_interval", "0.1"}}));
    const std::string& name = db.name();
    const std::string conninfo = pooler.conninfo("", name);
    {
        std::vector<Conn> warm;
        for (int i = 0; i < warm_backends; ++i) {
            warm.push_back(Conn::must(conninfo));
            PGT_REQUIRE_OK(warm.back().exec("BEGIN; SELECT 1"));
        }
        for (auto& conn : warm) PGT_REQUIRE_OK(conn.exec("COMMIT"));
    }
    REQUIRE(eventually([&] { return watch_has_checked(pooler, name); }));
    const auto first_check = lock_function(pooler, name, "release_job_lock")->at("checked_at");
    Conn client = Conn::must(conninfo);
    std::set<std::string> backends;
    std::size_t queries = 0;
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < until) {
        const Result r = client.exec("SELECT pg_backend_pid()");
        PGT_REQUIRE_OK(r);
        backends.insert(r.rows.at(0).at(0).value_or(""));
        ++queries;
    }
    INFO(queries, " queries");
    // The watch did run meanwhile (about 30 times).
    CHECK(lock_function(pooler, name, "release_job_lock")->at("checked_at") != first_check);
    CHECK(backends.size() == 1);
    // No backend was opened for a client that came while one was lent. (With two workers the
    // warm-up's backends may sit on the other worker's share, and a client's share opens its
    // own: the count is exact only with one.)
    if (workers_in_this_run() != 1) return;
    CHECK(direct_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = '" + name +
                        "' AND backend_type = 'client backend' AND pid <> pg_backend_pid()") ==
          std::to_string(warm_backends));
}

TEST_CASE("the catalog watch borrows an idle backend without changing which backend a client gets") {
    SUBCASE("the pool's only backend") { check_watch_keeps_client_backend(1); }
    SUBCASE("one of three") { check_watch_keeps_client_backend(3); }
}

TEST_CASE("a wrapper created 10 ms before its first call is tethered: an unknown name is probed") {
    // No catalog watch and no interval: only the call of a name the last discovery did not know
    // can tell pgtether to look.
    ScratchDatabase db("pgtether_discovery_unknown");
    db.exec_ok(kBaseSchema);
    Pgtether pooler(two_backends({{"advisory_lock_discovery_interval", "3600"},
                                  {"advisory_lock_catalog_check_interval", "0"}}));
    const std::string& name = db.name();
    const std::string conninfo = pooler.conninfo("", name);
    Conn holder = Conn::must(conninfo);
    Conn other = Conn::must(conninfo);
    PGT_REQUIRE_OK(holder.exec("SELECT harmless(1)"));
    REQUIRE(eventually([&] { return found_as(pooler, name, "release_job_lock", "discovered"); }));
    // Ordinary statements call only known names: no probe for them.
    PGT_REQUIRE_OK(holder.exec("INSERT INTO jobs (id) VALUES (harmless(1))"));
    CHECK(two_transactions_fit(conninfo));

    db.exec_ok(
        "CREATE FUNCTION fresh_lock(k bigint) RETURNS void LANGUAGE plpgsql "
        "AS $$ BEGIN PERFORM pg_advisory_lock(k); END $$");
    std::this_thread::sleep_for(10ms);
    PGT_REQUIRE_OK(holder.exec("SELECT fresh_lock(731200)"));
    check_holder_tethered(conninfo, holder, other, 731200);
    // The extended protocol too.
    PGT_REQUIRE_OK(holder.exec_params("SELECT fresh_lock($1)", {"731201"}));
    check_holder_tethered(conninfo, holder, other, 731201);
}

TEST_CASE("the optional event trigger: a DDL notification makes the watch look at once") {
    ScratchDatabase db("pgtether_discovery_event");
    db.exec_ok(kBaseSchema);
    // The event trigger of docs/advisory-locks.md, as a DBA would install it.
    db.exec_ok(
        "CREATE FUNCTION pgtether_catalog_notify() RETURNS event_trigger LANGUAGE plpgsql "
        "AS $$ BEGIN PERFORM pg_notify('pgtether_catalog', tg_tag); END $$");
    db.exec_ok(
        "CREATE EVENT TRIGGER pgtether_catalog ON ddl_command_end "
        "EXECUTE FUNCTION pgtether_catalog_notify()");
    // Periodic checks that never come: only the notification explains a discovery.
    Pgtether pooler(two_backends({{"advisory_lock_discovery_interval", "3600"},
                                  {"advisory_lock_catalog_check_interval", "3600"}}));
    const std::string& name = db.name();
    PGT_REQUIRE_OK(Conn::must(pooler.conninfo("", name)).exec("SELECT 1"));
    // The discovery saw the trigger: a connection listens for it (its LISTEN done).
    REQUIRE(eventually([&] {
        return direct_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = '" + name +
                             "' AND application_name = 'pgtether catalog watch' AND state = "
                             "'idle' AND query LIKE 'LISTEN%'") == "1";
    }));
    // A trigger wrapper is called by no name: nothing but the catalog can tell.
    db.exec_ok(
        "CREATE FUNCTION lock_job_row() RETURNS trigger LANGUAGE plpgsql "
        "AS $$ BEGIN PERFORM pg_advisory_lock(NEW.id); RETURN NEW; END $$; "
        "CREATE TRIGGER jobs_lock AFTER INSERT ON jobs FOR EACH ROW "
        "EXECUTE FUNCTION lock_job_row()");
    CHECK(eventually([&] { return found_as(pooler, name, "jobs", "via trigger"); }, 3s));
    check_tethered_by(pooler, name, "INSERT INTO jobs VALUES (731300)", 731300);
}
