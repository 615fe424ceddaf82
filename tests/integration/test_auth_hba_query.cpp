// The rest of PgBouncer's authentication, driven through pgtether by real clients against the
// shared throwaway PostgreSQL (whose roles require md5, scram-sha-256 or password): auth_type = hba
// with an allow/deny matrix over TCP, TLS and the Unix socket, and peer logins through an
// auth_ident_file map; auth_query for valid, expired, missing and NOLOGIN users, through
// auth_user, a SECURITY DEFINER function, per-database settings and auth_dbname, with proof that
// no client start-up parameter reaches the lookup connection;
// SCRAM pass-through to a server that requires scram-sha-256, with secrets from auth_file and
// from auth_query. Failing logins must leave no backend behind.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"
#include "tests/integration/support/tls_support.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TestPki& pki() {
    static TestPki instance(TestEnv::get().tmp_dir);
    return instance;
}

Conn admin() {
    // Named, like this test's server connections (see shared_server()).
    return Conn::must(direct_conninfo("", "", "", "application_name=pgt_test_auth"));
}

std::string scalar(const std::string& sql) {
    return admin().exec_ok(sql).value();
}

// Runs `sql` as the superuser, ignoring "already exists" (the shared server outlives one test).
void setup(const std::string& sql) {
    admin().exec_ok("DO $$ BEGIN " + sql +
                    "; EXCEPTION WHEN duplicate_object OR duplicate_function THEN NULL; END $$");
}

// The authentication request a raw client gets first: "ok" (AuthenticationOk), "md5",
// "cleartext", "sasl", or the SQLSTATE of an error.
std::string first_auth_request(const PoolerProcess& pooler, const std::string& user,
                               const std::string& database) {
    RawConn raw(pooler.host(), pooler.port());
    raw.send(wire::startup({{"user", user}, {"database", database}}));
    auto msg = raw.read_message();
    if (!msg) return "nothing";
    if (msg->type == 'E') {
        return wire::error_fields(*msg)['C'];
    }
    if (msg->type != 'R' || msg->body.size() < 4) return std::string("unexpected ") + msg->type;
    switch (static_cast<unsigned char>(msg->body[3])) {
        case 0:
            return "ok";
        case 3:
            return "cleartext";
        case 5:
            return "md5";
        case 10:
            return "sasl";
        default:
            return "code " + std::to_string(msg->body[3]);
    }
}

// The SQLSTATE a libpq connection failed with ("" when it connected). libpq keeps only the text,
// so the distinctive messages stand for the codes.
struct Outcome {
    bool ok;
    std::string error;
};

Outcome try_connect(const std::string& conninfo) {
    Conn conn(conninfo);
    if (!conn.ok()) return {false, conn.error()};
    auto r = conn.exec("SELECT current_user");
    if (!r.ok()) return {false, r.error_text};
    return {true, r.value()};
}

// Where the shared server is, for [databases] lines. The server connections get their own
// application_name: other tests running at the same time count the server's unnamed backends.
std::string shared_server() {
    const TestEnv& env = TestEnv::get();
    return "host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
           " application_name=pgt_test_auth";
}

// A pooler configuration with the fallback database entry on the shared server.
PoolerConfig on_shared_server() {
    PoolerConfig config;
    config.databases = {"* = " + shared_server()};
    return config;
}

// PgBouncer's recommended set-up: a SECURITY DEFINER lookup function an unprivileged auth_user
// may call, in the test database only (not in "postgres"), callable by `grantee`.
void create_lookup_function(const std::string& grantee) {
    auto in_test_db = admin();
    in_test_db.exec_ok(
        "CREATE OR REPLACE FUNCTION pgtether_lookup(i_username text, OUT uname text, OUT phash "
        "text) RETURNS record AS $$ BEGIN SELECT rolname, CASE WHEN rolvaliduntil < now() THEN "
        "NULL ELSE rolpassword END FROM pg_authid WHERE rolname = i_username AND rolcanlogin "
        "INTO uname, phash; RETURN; END $$ LANGUAGE plpgsql SECURITY DEFINER");
    in_test_db.exec_ok("REVOKE ALL ON FUNCTION pgtether_lookup(text) FROM PUBLIC");
    in_test_db.exec_ok("GRANT EXECUTE ON FUNCTION pgtether_lookup(text) TO " + grantee);
}

// auth_user `auth_user` looks everyone up through that function, each lookup taking `seconds`
// (so that a flood of logins lasts long enough to be watched).
PoolerConfig slow_lookups(const std::string& auth_user, const std::string& auth_type,
                          const std::string& seconds) {
    PoolerConfig config = on_shared_server();
    config.settings = {{"auth_type", auth_type},
                       {"auth_user", auth_user},
                       {"auth_query", "SELECT l.uname, l.phash, pg_sleep(" + seconds +
                                          ")::text FROM pgtether_lookup($1) AS l"},
                       {"max_client_conn", "3000"}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
    return config;
}

int backends(const std::string& where) {
    return std::stoi(scalar("SELECT count(*) FROM pg_stat_activity WHERE " + where));
}

}  // namespace

TEST_CASE("auth_type = hba: allow/deny matrix over TCP, TLS and the Unix socket") {
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-hba", env.tmp_dir);
    std::string hba =
        dir.write_file("hba.conf",
                       "# TYPE    DATABASE   USER        ADDRESS        METHOD\n"
                       "hostnossl all        md5_user    127.0.0.1/32   md5\n"
                       "hostssl   all        scram_user  127.0.0.1/32   scram-sha-256\n"
                       "host      all        plain_user  127.0.0.1/32   password\n"
                       "host      template1  all         127.0.0.1/32   reject\n"
                       "host      all        postgres    127.0.0.1/32   trust\n"
                       "local     all        postgres                   peer\n"
                       "local     peerdb     root                       peer\n");
    PoolerConfig config;
    config.settings = {{"auth_type", "hba"},
                       {"auth_hba_file", hba},
                       {"client_tls_sslmode", "prefer"},
                       {"client_tls_key_file", pki().path("server.key")},
                       {"client_tls_cert_file", pki().path("server.crt")}};
    const std::string target = shared_server();
    config.databases = {"* = " + target,
                        "peerdb = " + target + " dbname=" + env.database + " user=postgres"};
    config.extra_args = {"-v"};
    Pgtether pgtether(config);
    const std::string db = env.database;
    auto tcp = [&](const std::string& user, const std::string& database,
                   const std::string& password) {
        return try_connect(pgtether.conninfo(user, database, password));
    };
    auto tls = [&](const std::string& user, const std::string& database,
                   const std::string& password) {
        return try_connect(pgtether.conninfo(user, database, password, "sslmode=require"));
    };
    auto local = [&](const std::string& user, const std::string& database) {
        return try_connect(make_conninfo(pgtether.dir(), pgtether.port(), user, database));
    };
    int template1_before = backends("datname = 'template1' AND usename = 'postgres'");

    // Allowed, each by its own line and method.
    CHECK(first_auth_request(pgtether, "md5_user", db) == "md5");
    CHECK(tcp("md5_user", db, "secret").error == "md5_user");
    CHECK(tls("scram_user", db, "secret").error == "scram_user");
    CHECK(first_auth_request(pgtether, "plain_user", db) == "cleartext");
    CHECK(tcp("plain_user", db, "secret").error == "plain_user");
    CHECK(first_auth_request(pgtether, "postgres", db) == "ok");
    CHECK(tcp("postgres", db, "").error == "postgres");
    // The first matching line decides: md5_user's line matches template1 before `reject`.
    CHECK(tcp("md5_user", "template1", "secret").ok);
    // peer: this test runs as root; the forced user logs in to the server.
    if (::geteuid() == 0) CHECK(local("root", "peerdb").error == "postgres");

    // Refused.
    auto wrong = tcp("md5_user", db, "wrong");
    CHECK_FALSE(wrong.ok);
    CHECK(contains(wrong.error, "password authentication failed for user \"md5_user\""));
    auto ssl_for_nossl = tls("md5_user", db, "secret");
    CHECK_FALSE(ssl_for_nossl.ok);
    CHECK(contains(ssl_for_nossl.error,
                   "no auth_hba_file entry for host \"127.0.0.1\", user "
                   "\"md5_user\", database \"" +
                       db + "\", SSL encryption"));
    auto nossl_for_ssl = tcp("scram_user", db, "secret");
    CHECK_FALSE(nossl_for_ssl.ok);
    CHECK(contains(nossl_for_ssl.error,
                   "user \"scram_user\", database \"" + db + "\", no encryption"));
    CHECK(first_auth_request(pgtether, "scram_user", db) == "28000");
    auto rejected = tcp("postgres", "template1", "");
    CHECK_FALSE(rejected.ok);
    CHECK(contains(rejected.error, "auth_hba_file rejects connection for host \"127.0.0.1\""));
    CHECK(first_auth_request(pgtether, "postgres", "template1") == "28000");
    auto nobody = tcp("nobody", db, "");
    CHECK_FALSE(nobody.ok);
    CHECK(contains(nobody.error, "no auth_hba_file entry"));
    if (::geteuid() == 0) {
        auto peer = local("postgres", db);
        CHECK_FALSE(peer.ok);
        CHECK(contains(peer.error, "Peer authentication failed for user \"postgres\""));
        CHECK(pgtether.wait_for_log("operating-system user \"root\""));
    }
    auto unlisted = local("md5_user", db);
    CHECK_FALSE(unlisted.ok);
    CHECK(contains(unlisted.error, "no auth_hba_file entry for host \"[local]\""));

    // Refused logins opened no backend.
    CHECK(backends("datname = 'template1' AND usename = 'postgres'") == template1_before);
}

TEST_CASE("auth_type = hba: peer with map= follows auth_ident_file, also after a reload") {
    if (::geteuid() != 0) return;  // the map pairs root, the user this test runs as in CI
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-ident", env.tmp_dir);
    std::string ident = dir.write_file("ident.conf",
                                       "# MAPNAME  SYSTEM-USERNAME  PG-USERNAME\n"
                                       "ops        root             deployer\n"
                                       "ops        somebody_else    all\n");
    std::string hba = dir.write_file("hba.conf",
                                     "local all all peer map=ops\n"
                                     "host  all all all  reject\n");
    PoolerConfig config;
    config.settings = {{"auth_type", "hba"}, {"auth_hba_file", hba}, {"auth_ident_file", ident}};
    // Whoever logs in, the server connection is postgres's: the map decides who gets in.
    config.databases = {"peerdb = " + shared_server() + " dbname=" + env.database +
                        " user=postgres"};
    config.extra_args = {"-v"};
    Pgtether pgtether(config);
    auto local = [&](const std::string& user) {
        return try_connect(make_conninfo(pgtether.dir(), pgtether.port(), user, "peerdb"));
    };

    CHECK(local("deployer").error == "postgres");
    // Under a map, the same name is not implied: root is not paired with root.
    auto same_name = local("root");
    CHECK_FALSE(same_name.ok);
    CHECK(contains(same_name.error, "Peer authentication failed for user \"root\""));
    CHECK(pgtether.wait_for_log(
        "ident map \"ops\" does not let operating-system user \"root\" (uid 0) log in as "
        "\"root\""));
    CHECK_FALSE(local("postgres").ok);
    // `all` on another system user's line does not help root.
    CHECK_FALSE(local("anyone").ok);
    // `all` as an address: every TCP client.
    auto tcp = try_connect(pgtether.conninfo("deployer", "peerdb"));
    CHECK_FALSE(tcp.ok);
    CHECK(contains(tcp.error, "auth_hba_file rejects connection for host \"127.0.0.1\""));

    // The map is read again on reload: root may now be anyone.
    dir.write_file("ident.conf", "ops root all\n");
    pgtether.reload();
    CHECK(eventually([&] { return local("anyone").ok; }));
    CHECK(local("deployer").ok);

    // A map= naming a map the file does not have is refused at reload, naming the line; the
    // running rules stay.
    dir.write_file("hba.conf", "local all all peer map=nosuchmap\n");
    pgtether.reload();
    CHECK(pgtether.wait_for_log("hba.conf:1: ident map \"nosuchmap\" is not in "));
    CHECK(local("anyone").ok);
    CHECK(pgtether.running());
}

TEST_CASE("auth_query: valid, expired, missing and NOLOGIN users") {
    const TestEnv& env = TestEnv::get();
    setup("CREATE ROLE expired_user LOGIN PASSWORD 'secret' VALID UNTIL '2001-01-01'");
    setup("CREATE ROLE nologin_user NOLOGIN PASSWORD 'secret'");
    for (const char* auth_type : {"md5", "scram-sha-256"}) {
        CAPTURE(auth_type);
        PoolerConfig config = on_shared_server();
        config.settings = {{"auth_type", auth_type}, {"auth_user", "postgres"}};
        // Only the auth_user is listed: every other user is looked up.
        config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
        config.extra_args = {"-v"};
        Pgtether pgtether(config);

        // scram_user's secret is a SCRAM secret: the login to PostgreSQL (which requires
        // scram-sha-256 for it) works by SCRAM pass-through, with no password anywhere.
        CHECK(try_connect(pgtether.conninfo("scram_user", "", "secret")).error == "scram_user");
        if (std::string(auth_type) == "md5") {
            // An md5 secret answers PostgreSQL's md5 challenge.
            CHECK(try_connect(pgtether.conninfo("md5_user", "", "secret")).error == "md5_user");
        }
        // The words of a wrong password, whether the user exists or not (PgBouncer's "SASL
        // authentication failed" after a SCRAM exchange).
        const bool scram_only = std::string(auth_type) == "scram-sha-256";
        for (const char* user : {"expired_user", "no_such_user", "nologin_user"}) {
            CAPTURE(user);
            auto refused = try_connect(pgtether.conninfo(user, "", "secret"));
            CHECK_FALSE(refused.ok);
            CHECK(contains(refused.error,
                           scram_only ? std::string("SASL authentication failed")
                                      : std::string("password authentication failed for user \"") +
                                            user));
        }
        auto wrong = try_connect(pgtether.conninfo("scram_user", "", "wrong"));
        CHECK_FALSE(wrong.ok);
        CHECK(contains(wrong.error, "SASL authentication failed"));
        CHECK(pgtether.wait_for_log("user \"expired_user\" has no valid password"));
        CHECK(pgtether.wait_for_log("no such user \"no_such_user\""));
        CHECK(pgtether.wait_for_log("no such user \"nologin_user\""));
    }
    // No backend for any refused user, and every lookup connection is gone.
    CHECK(backends("usename IN ('expired_user', 'no_such_user', 'nologin_user')") == 0);
    bool lookups_closed = false;
    for (int i = 0; i < 50 && !lookups_closed; ++i) {
        lookups_closed = backends("application_name = 'pgtether auth_query'") == 0;
        if (!lookups_closed) std::this_thread::sleep_for(100ms);
    }
    CHECK(lookups_closed);
    (void)env;
}

TEST_CASE("auth_query on a host list whose first host is down: the lookup tries the next") {
    // The first host refuses (a primary gone in a failover). A lookup connection that cannot
    // log in there goes on to the next host, as libpq does with a host list, before any login
    // is refused; the later lookups start where the last one logged in.
    const TestEnv& env = TestEnv::get();
    const int gone = free_port();
    PoolerConfig config;
    config.databases = {"hosts = host=" + env.pg_host + "," + env.pg_host + " port=" +
                        std::to_string(gone) + "," + std::to_string(env.pg_port) +
                        " dbname=" + env.database + " application_name=pgt_test_auth"};
    config.settings = {{"auth_type", "md5"}, {"auth_user", "postgres"}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
    config.extra_args = {"-v"};
    Pgtether pgtether(config);
    for (int i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(try_connect(pgtether.conninfo("md5_user", "hosts", "secret")).error == "md5_user");
    }
    auto wrong = try_connect(pgtether.conninfo("md5_user", "hosts", "wrong"));
    CHECK_FALSE(wrong.ok);
    CHECK(contains(wrong.error, "password authentication failed for user \"md5_user\""));
}

TEST_CASE("auth_dbname: console users looked up there; unusable ones are a config error") {
    // PgBouncer 1.24: with a global auth_dbname, a console user missing from auth_file is looked
    // up in that database (the console has no server of its own to ask).
    // No "*" entry: an auth_dbname it does not name is unknown.
    PoolerConfig config;
    config.databases = {"app = " + shared_server() + " dbname=" + TestEnv::get().database,
                        "authdb = " + shared_server() + " dbname=" + TestEnv::get().database};
    config.settings = {{"auth_type", "md5"},
                       {"auth_user", "postgres"},
                       {"auth_dbname", "authdb"},
                       {"admin_users", "md5_user"}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
    Pgtether pgtether(config);
    {
        Conn console(pgtether.conninfo("md5_user", "pgbouncer", "secret"));
        REQUIRE_MESSAGE(console.ok(), console.error());
        CHECK(console.exec("SHOW VERSION").ok());
        // The database the lookup runs in, DISABLEd: PgBouncer's words.
        PGT_REQUIRE_OK(console.exec("DISABLE authdb"));
        auto refused = try_connect(pgtether.conninfo("md5_user", "app", "secret"));
        CHECK_FALSE(refused.ok);
        CHECK(contains(refused.error, "authentication database \"authdb\" is disabled"));
        PGT_REQUIRE_OK(console.exec("ENABLE authdb"));
        CHECK(try_connect(pgtether.conninfo("md5_user", "app", "secret")).ok);
    }
    CHECK_FALSE(Conn(pgtether.conninfo("md5_user", "pgbouncer", "wrong")).ok());

    // An auth_dbname that is no database of the configuration, or the console itself: the
    // client gets PgBouncer's "bouncer config error", the log says why.
    const std::pair<std::string, std::string> bad_ones[] = {
        {"nosuchentry", "authentication database \"nosuchentry\" is not configured"},
        {"pgbouncer", "cannot use the reserved \"pgbouncer\" database as an auth_dbname"}};
    for (const auto& [bad, logged] : bad_ones) {
        CAPTURE(bad);
        config.settings["auth_dbname"] = bad;
        pgtether.reload(config);
        // Until the reload has taken effect, the login may still meet the previous setting.
        CHECK(eventually([&] {
            auto refused = try_connect(pgtether.conninfo("md5_user", "app", "secret"));
            return !refused.ok && contains(refused.error, "bouncer config error") &&
                   contains(pgtether.log(), logged);
        }));
    }
}

TEST_CASE("auth_type = trust with auth_user: users missing from auth_file are looked up") {
    // PgBouncer logs in a user auth_query finds, without a password (trust), and logs in to the
    // server with the secret found; a user it does not find is refused.
    const std::string passwordless = private_role("pgt_trust_lookup");
    PoolerConfig config = on_shared_server();
    config.settings = {{"auth_type", "trust"}, {"auth_user", "postgres"}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
    config.extra_args = {"-v"};
    Pgtether pgtether(config);
    // md5_user's md5 secret answers PostgreSQL's md5 challenge; the client sends no password.
    CHECK(try_connect(pgtether.conninfo("md5_user")).error == "md5_user");
    // A role without a password (NULL from auth_query) that the server trusts.
    CHECK(try_connect(pgtether.conninfo(passwordless)).error == passwordless);
    auto refused = try_connect(pgtether.conninfo("no_such_user"));
    CHECK_FALSE(refused.ok);
    // PgBouncer's words for a refused trust login.
    CHECK_MESSAGE(contains(refused.error, "\"trust\" authentication failed"), refused.error);
    CHECK(pgtether.wait_for_log("no such user \"no_such_user\""));
}

TEST_CASE("auth_query: the lookup connection carries nothing of the client's") {
    // CVE-2025-12819: client start-up parameters (options=-c search_path=...) reached the
    // connection that ran the auth query. The query here records the settings it runs with.
    admin().exec_ok("CREATE TABLE IF NOT EXISTS auth_probe (app text, path text)");
    admin().exec_ok("TRUNCATE auth_probe");
    PoolerConfig config = on_shared_server();
    config.settings = {
        {"auth_type", "scram-sha-256"},
        {"auth_user", "postgres"},
        {"ignore_startup_parameters", "options"},
        {"auth_query",
         "WITH probe AS (INSERT INTO auth_probe VALUES (current_setting('application_name'), "
         "current_setting('search_path')) RETURNING 1) SELECT rolname, rolpassword FROM "
         "pg_authid, probe WHERE rolname = $1"}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{{"postgres", ""}};
    Pgtether pgtether(config);
    auto conn = Conn::must(pgtether.conninfo(
        "scram_user", "", "secret", "application_name=evil options='-c search_path=evil'"));
    CHECK(conn.exec_ok("SELECT current_user").value() == "scram_user");
    auto rows = admin().exec_ok("SELECT app, path FROM auth_probe");
    REQUIRE(rows.rows.size() == 1);
    CHECK(rows.rows[0][0] == "pgtether auth_query");
    CHECK(rows.rows[0][1] == "\"$user\", public");
}

TEST_CASE("auth_query through a SECURITY DEFINER function, per database, with auth_dbname") {
    const TestEnv& env = TestEnv::get();
    create_lookup_function("md5_user");
    const std::string target = shared_server();
    const std::string lookup = "SELECT * FROM pgtether_lookup($1)";

    SUBCASE("per-database auth_user and auth_query") {
        PoolerConfig config;
        config.settings = {{"auth_type", "md5"}};
        config.databases = {"viafunc = " + target + " dbname=" + env.database +
                            " auth_user=md5_user auth_query='" + lookup + "'"};
        // auth_user logs in with its md5 password from auth_file; PostgreSQL requires md5 for it.
        config.userlist = std::vector<std::pair<std::string, std::string>>{{"md5_user", "secret"}};
        Pgtether pgtether(config);
        CHECK(try_connect(pgtether.conninfo("scram_user", "viafunc", "secret")).error ==
              "scram_user");
    }
    SUBCASE("auth_dbname: the lookup runs in another database") {
        PoolerConfig config;
        config.settings = {{"auth_type", "md5"},
                           {"auth_user", "md5_user"},
                           {"auth_query", lookup},
                           {"auth_dbname", "lookups"}};
        config.databases = {"* = " + target, "lookups = " + target + " dbname=" + env.database};
        config.userlist = std::vector<std::pair<std::string, std::string>>{{"md5_user", "secret"}};
        config.extra_args = {"-v"};
        Pgtether pgtether(config);
        CHECK(try_connect(pgtether.conninfo("scram_user", "postgres", "secret")).error ==
              "scram_user");
        // Without auth_dbname the function is missing in "postgres": the lookup fails, clearly.
        config.settings.erase("auth_dbname");
        pgtether.reload(config);
        CHECK(pgtether.wait_for_log("configuration reloaded"));
        auto failed = try_connect(pgtether.conninfo("scram_user", "postgres", "secret"));
        CHECK_FALSE(failed.ok);
        CHECK(contains(failed.error, "bouncer config error"));  // PgBouncer's words
        CHECK(pgtether.wait_for_log("function pgtether_lookup(unknown) does not exist"));
    }
}

TEST_CASE("SCRAM pass-through from auth_file to a server that requires scram-sha-256") {
    const TestEnv& env = TestEnv::get();
    const auto& scram = env.auth_user("scram-sha-256");
    std::string secret =
        scalar("SELECT rolpassword FROM pg_authid WHERE rolname = '" + scram.name + "'");
    REQUIRE(secret.starts_with("SCRAM-SHA-256$"));
    for (const char* auth_type : {"scram-sha-256", "md5"}) {
        CAPTURE(auth_type);
        PoolerConfig config = on_shared_server();
        config.settings = {{"auth_type", auth_type}, {"pool_mode", "transaction"}};
        config.userlist = std::vector<std::pair<std::string, std::string>>{{scram.name, secret}};
        Pgtether pgtether(config);
        // md5 switches to SCRAM for a SCRAM secret (PgBouncer's rule).
        CHECK(first_auth_request(pgtether, scram.name, env.database) == "sasl");
        auto conn = Conn::must(pgtether.conninfo(scram.name, "", scram.password));
        CHECK(conn.exec_ok("SELECT current_user").value() == scram.name);
        // More server connections log in with the same ClientKey.
        auto second = Conn::must(pgtether.conninfo(scram.name, "", scram.password));
        conn.exec_ok("BEGIN");
        CHECK(second.exec_ok("SELECT 1").value() == "1");
        conn.exec_ok("COMMIT");
    }
    SUBCASE("the same password with another salt cannot log in to the server") {
        // Pass-through replays the client's proof of the stored secret; a secret with another
        // salt proves nothing to PostgreSQL. The client is told, and no backend stays.
        admin().exec_ok("SET password_encryption = 'scram-sha-256'");
        setup("CREATE ROLE salt_probe PASSWORD '" + scram.password + "'");
        std::string other =
            scalar("SELECT rolpassword FROM pg_authid WHERE rolname = 'salt_probe'");
        REQUIRE(other != secret);
        PoolerConfig config = on_shared_server();
        config.settings = {{"auth_type", "scram-sha-256"}};
        config.userlist = std::vector<std::pair<std::string, std::string>>{{scram.name, other}};
        Pgtether pgtether(config);
        auto failed = try_connect(pgtether.conninfo(scram.name, "", scram.password));
        CHECK_FALSE(failed.ok);
        // The server's refusal, passed on (the client's own SCRAM exchange succeeded).
        CHECK(contains(failed.error,
                       "password authentication failed for user \"" + scram.name + "\""));
    }
}

TEST_CASE("auth_query: a flood of logins runs over a few pooled auth_user connections") {
    // Each login of a user not in auth_file used to open a PostgreSQL connection of its own,
    // before the client proved anything: 100 clients with made-up names were 100 PostgreSQL
    // logins at once. Now the lookups queue for at most two connections per database (per
    // worker), which stay open for the next lookups.
    const TestEnv& env = TestEnv::get();
    const std::string auth_user = private_role("pgt_auth_flood");
    REQUIRE(settled(auth_user));
    create_lookup_function(auth_user);
    PoolerConfig config = slow_lookups(auth_user, "scram-sha-256", "0.02");
    config.extra_args = {"-v"};
    Pgtether pgtether(config);

    constexpr int kFlood = 150;
    std::vector<std::unique_ptr<RawConn>> flood;
    for (int i = 0; i < kFlood; ++i) {
        flood.push_back(std::make_unique<RawConn>(pgtether.host(), pgtether.port()));
        REQUIRE(flood.back()->send(wire::startup(
            {{"user", "pgt_ghost_" + std::to_string(i)}, {"database", env.database}})));
    }
    // A legitimate login in the middle of the flood waits its turn and succeeds. Its turn comes
    // after the 150 lookups and, for SCRAM, after the 150 key derivations queued before it
    // (every SCRAM login derives once, known user or not): several seconds under the sanitizers
    // on a loaded machine, beyond the harness's 10-second connect_timeout (CI, sanitize phase).
    std::atomic<bool> legit_done{false};
    Outcome legit;
    std::thread legit_login([&] {
        legit = try_connect(pgtether.conninfo("scram_user", "", "secret", "connect_timeout=60"));
        legit_done = true;
    });
    int most = 0;
    for (int i = 0; i < 200 && !legit_done; ++i) {
        most = std::max(most, backends("usename = '" + auth_user + "'"));
        std::this_thread::sleep_for(10ms);
    }
    legit_login.join();
    CHECK_MESSAGE(legit.ok, legit.error);
    CHECK(legit.error == "scram_user");
    MESSAGE("most auth_user connections seen during the flood: " << most);
    CHECK(most >= 1);
    CHECK(most <= 2);
    // Every flooding client got its answer: the same SCRAM request a real user gets (the
    // exchange then fails like a wrong password), none was dropped.
    int answered = 0;
    for (auto& conn : flood) {
        auto request = conn->read_message(30s);
        if (request && request->type == 'R') ++answered;
    }
    CHECK(answered == kFlood);
    CHECK(backends("usename = '" + auth_user + "'") <= 2);
}

TEST_CASE("auth_query: beyond the lookup queue a login is refused at once with 53300") {
    // 2 lookups run, 1000 wait; each takes two seconds here, so logins beyond those find the
    // queue full and are refused instead of held (PgBouncer refuses beyond max_client_conn the
    // same way).
    const TestEnv& env = TestEnv::get();
    const std::string auth_user = private_role("pgt_auth_queue");
    create_lookup_function(auth_user);
    Pgtether pgtether(slow_lookups(auth_user, "md5", "2"));

    constexpr int kClients = 1100;
    std::vector<std::unique_ptr<RawConn>> clients;
    for (int i = 0; i < kClients; ++i) {
        clients.push_back(std::make_unique<RawConn>(pgtether.host(), pgtether.port()));
        REQUIRE(clients.back()->send(wire::startup(
            {{"user", "pgt_queued_" + std::to_string(i)}, {"database", env.database}})));
    }
    // Every client beyond the 1002 that fit gets an answer: most the refusal, a few the md5
    // request of a lookup that finished while the others were still connecting.
    int refused = 0;
    int other = 0;
    std::vector<bool> replied(clients.size(), false);
    for (int round = 0; round < 100 && refused + other < kClients - 1002; ++round) {
        for (std::size_t i = 0; i < clients.size(); ++i) {
            if (replied[i]) continue;
            auto reply = clients[i]->read_message(0ms);
            if (!reply) continue;  // still waiting for its lookup
            replied[i] = true;
            if (reply->type == 'E' && wire::error_fields(*reply)['C'] == "53300") {
                CHECK(wire::error_fields(*reply)['M'] ==
                      "too many clients waiting for an authentication lookup");
                ++refused;
            } else {
                ++other;
            }
        }
        std::this_thread::sleep_for(100ms);
    }
    MESSAGE("refused: " << refused << ", answered: " << other);
    // Opening the clients takes seconds on a loaded machine, during which a few lookups finish;
    // the rest beyond 1002 are refused.
    CHECK(refused >= 1);
    CHECK(refused + other >= kClients - 1002);
    CHECK(pgtether.wait_for_log("lookups already wait"));
    // Clients that give up leave the queue; the pooler serves new logins again.
    clients.clear();
    Outcome after;
    CHECK(eventually([&] {
        after = try_connect(pgtether.conninfo("md5_user", "", "secret"));
        return after.ok;
    }));
    CHECK_MESSAGE(after.error == "md5_user", after.error);
    CHECK(backends("usename = '" + auth_user + "'") <= 2);
}

TEST_CASE("auth_query: lookup connections are reused, and a reload retires them") {
    const std::string auth_user = private_role("pgt_auth_reuse");
    REQUIRE(settled(auth_user));
    create_lookup_function(auth_user);
    PoolerConfig config = slow_lookups(auth_user, "scram-sha-256", "0");
    Pgtether pgtether(config);
    const std::string who = "usename = '" + auth_user + "'";
    std::vector<int> pids;
    for (int i = 0; i < 5; ++i) {
        CHECK(try_connect(pgtether.conninfo("scram_user", "", "secret")).error == "scram_user");
        // One login at a time: one connection serves them all and stays for the next.
        CHECK(backends(who) == 1);
        pids.push_back(std::stoi(scalar("SELECT pid FROM pg_stat_activity WHERE " + who)));
    }
    CHECK(std::count(pids.begin(), pids.end(), pids.front()) == 5);
    // After a reload nothing made with the old settings serves again: the idle connection goes.
    pgtether.reload(config);
    CHECK(pgtether.wait_for_log("configuration reloaded"));
    CHECK(eventually([&] { return backends(who) == 0; }));
    CHECK(try_connect(pgtether.conninfo("scram_user", "", "secret")).error == "scram_user");
    CHECK(std::stoi(scalar("SELECT pid FROM pg_stat_activity WHERE " + who)) != pids.front());
}
