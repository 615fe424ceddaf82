// No client ever inherits another's session (docs/session-state.md): the scrub matrix. Through
// a pool of one backend, client 1 gives its session one kind of state -- an advisory lock, a
// temporary table (also one created without the word TEMP), a LISTEN, a prepared statement, a
// cursor, a setting, a role, a session authorization, and state left by a DO block's dynamic
// SQL -- and then either leaves or stays idle. Client 2 then sees a session exactly like a fresh
// direct connection's, and client 1, where it stayed, still has exactly what the same steps give
// on a direct connection.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

// Everything of a session another client could inherit, as one line. pgtether's own prepared
// probe is a protocol-level statement (from_sql false), as a driver's would be.
const char* const kFingerprint =
    "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
    "          AND pid = pg_backend_pid()) AS locks, "
    "       (SELECT count(*) FROM pg_class "
    "          WHERE relnamespace = pg_my_temp_schema()) AS temp_objects, "
    "       (SELECT count(*) FROM pg_listening_channels()) AS listens, "
    "       (SELECT count(*) FROM pg_prepared_statements WHERE from_sql) AS prepared, "
    "       (SELECT count(*) FROM pg_cursors) AS cursors, "
    "       current_user, session_user, current_setting('role') AS role, "
    "       current_setting('search_path') AS search_path, "
    "       current_setting('work_mem') AS work_mem, "
    "       (SELECT count(*) FROM iso_orders) AS orders_seen";

std::string fingerprint(Conn& conn) {
    Result r = conn.exec(kFingerprint);
    if (!r.ok() || r.rows.size() != 1) throw std::runtime_error("fingerprint: " + r.describe());
    std::string line;
    for (std::size_t i = 0; i < r.columns.size(); ++i) {
        if (i > 0) line += " | ";
        line += r.columns[i] + "=" + (r.rows[0][i] ? *r.rows[0][i] : "NULL");
    }
    return line;
}

struct Kind {
    const char* name;
    std::vector<std::string> steps;  // one transaction each
};

const Kind kKinds[] = {
    {"advisory lock", {"SELECT pg_advisory_lock(7001)"}},
    {"temp table", {"CREATE TEMP TABLE iso_scratch (n int)"}},
    // No TEMP anywhere: the search_path puts pg_temp first, and the table shadows
    // public.iso_orders for whoever gets the backend next.
    {"temp table without TEMP",
     {"SET search_path = pg_temp, public", "CREATE TABLE iso_orders (n int)",
      "INSERT INTO iso_orders VALUES (1), (2)"}},
    {"listen", {"LISTEN iso_jobs"}},
    {"SQL prepare", {"PREPARE iso_p AS SELECT 1"}},
    {"cursor WITH HOLD", {"DECLARE iso_c CURSOR WITH HOLD FOR SELECT 1"}},
    {"setting", {"SET work_mem = '7MB'"}},
    {"search_path", {"SET search_path = pg_catalog, public"}},
    {"SET ROLE", {"SET ROLE iso_payroll"}},
    {"set_config role", {"SELECT set_config('role', 'iso_payroll', false)"}},
    {"SET SESSION AUTHORIZATION", {"SET SESSION AUTHORIZATION iso_auditor"}},
    {"authorization and role", {"SET SESSION AUTHORIZATION iso_auditor", "SET ROLE iso_payroll"}},
    {"DO block lock", {"DO $$ BEGIN EXECUTE 'SELECT pg_advisory_' || 'lock(7002)'; END $$"}},
    {"DO block listen", {"DO $$ BEGIN EXECUTE 'LIS' || 'TEN iso_dyn'; END $$"}},
    {"DO block role", {"DO $$ BEGIN EXECUTE 'SET ROLE ' || 'iso_payroll'; END $$"}},
};

void create_roles_and_tables() {
    Conn direct = Conn::must(direct_conninfo());
    // Shared by both runs of this test (workers = 1 and 2), never at the same time.
    direct.exec_ok(
        "DO $$ BEGIN "
        "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iso_payroll') THEN "
        "  CREATE ROLE iso_payroll; END IF; "
        "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'iso_auditor') THEN "
        "  CREATE ROLE iso_auditor; END IF; "
        "END $$");
    direct.exec_ok("GRANT iso_payroll TO iso_auditor");
    direct.exec_ok("CREATE TABLE IF NOT EXISTS public.iso_orders (n int)");
    direct.exec_ok("GRANT SELECT, INSERT ON public.iso_orders TO PUBLIC");
}

// Runs the kind's steps; each must succeed.
void give_state(Conn& conn, const Kind& kind) {
    for (const auto& step : kind.steps) {
        Result r = conn.exec(step);
        REQUIRE_MESSAGE(r.ok(), kind.name << ": " << step << ": " << r.describe());
    }
}

PoolerConfig one_backend() {
    // One backend, one more for a tethered client: client 2 is served while client 1 stays.
    return pool_config("transaction", 1,
                       {{"tether_reserve_size", "1"}, {"query_wait_timeout", "10"}});
}

}  // namespace

TEST_CASE("scrub matrix: no client inherits another's session state, through a pool of one") {
    create_roles_and_tables();
    Conn fresh_direct = Conn::must(direct_conninfo());
    const std::string clean = fingerprint(fresh_direct);
    Pgtether pooler(one_backend());

    for (const Kind& kind : kKinds) {
        for (const bool stays : {false, true}) {
            const std::string name = kind.name;
            CAPTURE(name);
            CAPTURE(stays);
            // What the same steps give on a direct connection: client 1's own session.
            std::string own;
            {
                Conn direct = Conn::must(direct_conninfo());
                give_state(direct, kind);
                own = fingerprint(direct);
                REQUIRE_MESSAGE(own != clean, kind.name << " leaves no trace to look for");
            }
            Conn client1 = Conn::must(pooler.conninfo());
            give_state(client1, kind);
            if (!stays) client1.close();

            Conn client2 = Conn::must(pooler.conninfo());
            CHECK(fingerprint(client2) == clean);
            // And in its next transactions too (whichever backend serves them).
            PGT_CHECK_OK(client2.exec("SELECT 1"));
            CHECK(fingerprint(client2) == clean);
            client2.close();

            if (stays) {
                CHECK(fingerprint(client1) == own);
                client1.close();
            }
            // Both gone: the backend they used is clean for the next kind.
            Conn client3 = Conn::must(pooler.conninfo());
            CHECK(eventually([&] { return fingerprint(client3) == clean; }, 5s));
        }
    }
}
