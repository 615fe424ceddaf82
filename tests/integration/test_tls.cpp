// TLS on both sides of pgtether (issue "TLS on both sides and the rest of PgBouncer's
// authentication"), against a PostgreSQL of its own with ssl = on and a test CA made with the
// openssl command line: every libpq sslmode against every client_tls_sslmode (libpq and psql),
// PostgreSQL 17's direct TLS, client certificates and auth_type = cert, server_tls_sslmode up to
// verify-full with right and wrong host names, client certificates towards PostgreSQL, large
// results through two TLS hops, and the "unencrypted bytes before the handshake" attacks on both
// sides (a fake server in a thread plays the malicious PostgreSQL).
#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/support/admin.hpp"
#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"
#include "tests/integration/support/tls_support.hpp"

using namespace pgtether::itest;
using namespace std::chrono_literals;

namespace {

// The CA, the TLS-enabled PostgreSQL and the client certificates, made once per run.
struct World {
    TestPki pki;
    TlsPostgres pg;
    World() : pki(TestEnv::get().tmp_dir), pg(pki) {
        pki.client_cert("postgres");
        pki.client_cert("cert_user");
        pki.client_cert("md5_user");
        pki.rogue_cert("postgres");
    }
};

World& world() {
    static World w;
    return w;
}

const TestEnv& tls_env() {
    return world().pg.env();
}

std::string ca() {
    return world().pki.path("ca.crt");
}

// pgtether in front of the TLS PostgreSQL, with client TLS in `mode` (the test CA checks client
// certificates in the verify modes).
PoolerConfig client_tls(const std::string& mode, std::map<std::string, std::string> extra = {}) {
    PoolerConfig config;
    config.settings = {{"client_tls_sslmode", mode},
                       {"client_tls_key_file", world().pki.path("server.key")},
                       {"client_tls_cert_file", world().pki.path("server.crt")}};
    if (mode == "verify-ca" || mode == "verify-full") config.settings["client_tls_ca_file"] = ca();
    for (auto& [k, v] : extra)
        config.settings[k] = v;
    config.extra_args = {"-v"};
    return config;
}

// libpq conninfo for a TLS client of `pooler` (host name "localhost", which the test certificate
// names), with a client certificate unless `cert` is empty.
std::string tls_conninfo(const PoolerProcess& pooler, const std::string& sslmode,
                         const std::string& cert = "client-postgres",
                         const std::string& user = "postgres") {
    std::string s = "host=localhost port=" + std::to_string(pooler.port()) + " user=" + user +
                    " dbname=" + tls_env().database + " sslmode=" + sslmode +
                    " sslrootcert=" + ca() + " gssencmode=disable connect_timeout=10";
    // A path that does not exist means "no certificate" to libpq (it would otherwise look in
    // ~/.postgresql).
    std::string base = cert.empty() ? world().pki.path("none") : world().pki.path(cert);
    s += " sslcert=" + base + ".crt sslkey=" + base + ".key";
    return s;
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// psql -Atc SQL with `conninfo`; the output, or nullopt when psql failed (output in `error`).
std::optional<std::string> psql(const std::string& conninfo, const std::string& sql,
                                std::string& error) {
    std::string command = tls_env().pg_bin + "/psql -X -Atc \"" + sql + "\" '" + conninfo + "'";
    try {
        return run_command(command);
    } catch (const std::exception& e) {
        error = e.what();
        return std::nullopt;
    }
}

// Backend messages a fake server sends, written out (protocol §55.7).
const std::string kAuthOk("R\0\0\0\x08\0\0\0\0", 9);
const std::string kReady("Z\0\0\0\x05I", 6);

bool table_exists(const std::string& name, const TestEnv& env) {
    auto conn = Conn::must(direct_conninfo("", "", "", "", env));
    return conn.exec_ok("SELECT to_regclass('" + name + "') IS NOT NULL").value() == "t";
}

}  // namespace

TEST_CASE("every libpq sslmode against every client_tls_sslmode (libpq and psql)") {
    // Expected outcome of a client mode (rows) against a pgtether mode (columns):
    // "plain" = connected without TLS, "tls" = connected with TLS, "fail" = refused.
    const std::vector<std::string> modes = {"disable", "allow",     "prefer",
                                            "require", "verify-ca", "verify-full"};
    const std::map<std::string, std::vector<std::string>> expected = {
        //               disable  allow    prefer   require  verify-ca verify-full
        {"disable", {"plain", "plain", "plain", "fail", "fail", "fail"}},
        // libpq's allow tries plaintext first and TLS only when that is refused.
        {"allow", {"plain", "plain", "plain", "tls", "tls", "tls"}},
        {"prefer", {"plain", "tls", "tls", "tls", "tls", "tls"}},
        {"require", {"fail", "tls", "tls", "tls", "tls", "tls"}},
        {"verify-ca", {"fail", "tls", "tls", "tls", "tls", "tls"}},
        {"verify-full", {"fail", "tls", "tls", "tls", "tls", "tls"}},
    };
    for (std::size_t column = 0; column < modes.size(); ++column) {
        const std::string& server_mode = modes[column];
        Pgtether pgtether(client_tls(server_mode), 10s, tls_env());
        for (const auto& client_mode : modes) {
            std::string want = expected.at(client_mode)[column];
            std::string conninfo = tls_conninfo(pgtether, client_mode);
            CAPTURE(server_mode);
            CAPTURE(client_mode);
            Conn conn(conninfo);
            if (want == "fail") {
                CHECK_FALSE(conn.ok());
                if (server_mode == "disable") {
                    CHECK(contains(conn.error(), "server does not support SSL"));
                } else {
                    CHECK(contains(conn.error(), "SSL/TLS connection required"));
                }
            } else {
                REQUIRE_MESSAGE(conn.ok(), conn.error());
                CHECK(PQsslInUse(conn.raw()) == (want == "tls" ? 1 : 0));
                CHECK(conn.exec_ok("SELECT 40 + 2").value() == "42");
            }
            std::string error;
            auto out = psql(conninfo, "SELECT 'psql ok'", error);
            if (want == "fail") {
                CHECK_FALSE(out.has_value());
            } else {
                CHECK_MESSAGE(out == "psql ok\n", error);
            }
        }
    }
}

TEST_CASE("over max_client_conn, a TLS client reads the refusal after its handshake") {
    // PgBouncer answers the SSLRequest ('S' and the handshake, or 'N' with TLS off) and refuses
    // at the start-up packet; an ErrorResponse in place of the 'S' reaches libpq only as "an error
    // response during SSL exchange" (or not at all, with sslmode=require).
    auto refusal = [](const std::string& conninfo) {
        PGconn* raw = PQconnectStart(conninfo.c_str());
        PQsetErrorVerbosity(raw, PQERRORS_VERBOSE);
        while (PQconnectPoll(raw) != PGRES_POLLING_FAILED && PQstatus(raw) != CONNECTION_OK) {
            std::this_thread::sleep_for(5ms);
        }
        const bool connected = PQstatus(raw) == CONNECTION_OK;
        std::string error = PQerrorMessage(raw);
        PQfinish(raw);
        CHECK_FALSE(connected);
        return error;
    };
    const std::string kRefused = "53300: no more connections allowed (max_client_conn)";
    // The one client allowed. The start-up check's own connection may still count for a moment.
    auto first_client = [](const std::string& conninfo) {
        std::optional<Conn> conn;
        REQUIRE(eventually([&] {
            conn.emplace(conninfo);
            return conn->ok();
        }, 5s));
        return std::move(*conn);
    };
    for (const char* server_mode : {"prefer", "require"}) {
        CAPTURE(server_mode);
        Pgtether pgtether(client_tls(server_mode, {{"max_client_conn", "1"}}), 10s, tls_env());
        Conn first = first_client(tls_conninfo(pgtether, "require"));
        for (const char* client_mode : {"prefer", "require", "verify-full"}) {
            CAPTURE(client_mode);
            std::string error = refusal(tls_conninfo(pgtether, client_mode));
            CHECK_MESSAGE(contains(error, kRefused), error);
            CHECK_MESSAGE(!contains(error, "SSL exchange"), error);
        }
        CHECK(first.exec_ok("SELECT 1").value() == "1");
    }
    // TLS off: the SSLRequest gets its 'N', then the refusal in plaintext.
    Pgtether plain(client_tls("disable", {{"max_client_conn", "1"}}), 10s, tls_env());
    Conn first = first_client(tls_conninfo(plain, "disable"));
    std::string error = refusal(tls_conninfo(plain, "prefer"));
    CHECK_MESSAGE(contains(error, kRefused), error);
}

TEST_CASE("client certificates towards pgtether") {
    SUBCASE("verify-ca and verify-full require one from the CA") {
        for (const char* mode : {"verify-ca", "verify-full"}) {
            CAPTURE(mode);
            Pgtether pgtether(client_tls(mode), 10s, tls_env());
            Conn without(tls_conninfo(pgtether, "require", ""));
            CHECK_FALSE(without.ok());
            CHECK(contains(without.error(), "certificate"));
            Conn rogue(tls_conninfo(pgtether, "require", "rogue-postgres"));
            CHECK_FALSE(rogue.ok());
            CHECK(contains(rogue.error(), "unknown ca"));
            Conn good(tls_conninfo(pgtether, "require", "client-postgres"));
            REQUIRE_MESSAGE(good.ok(), good.error());
            CHECK(good.exec_ok("SELECT 1").value() == "1");
            CHECK(pgtether.wait_for_log("TLS handshake failed"));
        }
    }
    SUBCASE("require with a CA file: a certificate is optional and not validated") {
        Pgtether pgtether(client_tls("require", {{"client_tls_ca_file", ca()}}), 10s, tls_env());
        for (const char* cert : {"", "rogue-postgres", "client-postgres"}) {
            CAPTURE(cert);
            Conn conn(tls_conninfo(pgtether, "require", cert));
            REQUIRE_MESSAGE(conn.ok(), conn.error());
            CHECK(PQsslInUse(conn.raw()) == 1);
        }
    }
}

TEST_CASE("SET client_tls_key_file, then client_tls_cert_file: the pair applies together") {
    // PgBouncer's admin_set: a TLS setting that does not work on its own is stored, the running
    // TLS setup stays (with a notice), and the SET completing the pair applies both. Its test
    // suite (test_client_ssl_set_enable, _set_change_ca) sets key and certificate this way.
    Pgtether pgtether(client_tls("require"), 10s, tls_env());
    Conn admin = Conn::must("host=localhost port=" + std::to_string(pgtether.port()) +
                            " user=postgres dbname=pgbouncer sslmode=require gssencmode=disable "
                            "connect_timeout=10");
    const std::string other = world().pki.client_cert("postgres");  // CN=postgres
    PGT_REQUIRE_OK(admin.exec("SET client_tls_key_file = '" + other + ".key'"));
    bool noticed = false;
    for (const auto& notice : admin.take_notices())
        noticed = noticed || contains(notice.message, "TLS settings could not be applied");
    CHECK(noticed);
    CHECK(find_row(admin.exec("SHOW CONFIG"), "value", other + ".key"));
    // Still the old pair: its certificate names localhost.
    Conn before(tls_conninfo(pgtether, "verify-full"));
    CHECK_MESSAGE(before.ok(), before.error());
    PGT_REQUIRE_OK(admin.exec("SET client_tls_cert_file = '" + other + ".crt'"));
    // Now the new pair, whose certificate names "postgres".
    Conn full(tls_conninfo(pgtether, "verify-full"));
    CHECK_FALSE(full.ok());
    CHECK(contains(full.error(), "does not match host name"));
    Conn ca_only(tls_conninfo(pgtether, "verify-ca"));
    CHECK_MESSAGE(ca_only.ok(), ca_only.error());
    // A value that can never work is still refused outright.
    CHECK_FALSE(admin.exec("SET client_tls_sslmode = 'sometimes'").ok());
}

TEST_CASE("auth_type = cert: the certificate's CommonName is the user") {
    Pgtether pgtether(client_tls("verify-full", {{"auth_type", "cert"}}), 10s, tls_env());
    Conn good(tls_conninfo(pgtether, "verify-full", "client-postgres", "postgres"));
    REQUIRE_MESSAGE(good.ok(), good.error());
    CHECK(good.exec_ok("SELECT current_user").value() == "postgres");

    // A valid certificate for someone else.
    Conn other(tls_conninfo(pgtether, "verify-full", "client-md5_user", "postgres"));
    CHECK_FALSE(other.ok());
    CHECK(contains(other.error(), "certificate authentication failed for user \"postgres\""));
    CHECK(pgtether.wait_for_log("certificate name \"md5_user\" is not the user name"));

    // No TLS at all: refused before authentication.
    Conn plain(pgtether.conninfo());
    CHECK_FALSE(plain.ok());
    CHECK(contains(plain.error(), "SSL/TLS connection required"));

    // Over the Unix socket (no TLS there) cert authentication cannot succeed.
    Conn local(make_conninfo(pgtether.dir(), pgtether.port(), "postgres", tls_env().database));
    CHECK_FALSE(local.ok());
    CHECK(contains(local.error(), "connection requires a valid client certificate"));
}

TEST_CASE("auth_type = hba: cert with map= lets the names of auth_ident_file in") {
    TempDir dir("pgt-certmap", TestEnv::get().tmp_dir);
    std::string ident = dir.write_file("ident.conf",
                                       "certs  cert_user  postgres\n"
                                       "certs  md5_user   all\n");
    std::string hba = dir.write_file("hba.conf", "hostssl all all all cert map=certs\n");
    Pgtether pgtether(client_tls("verify-full", {{"auth_type", "hba"},
                                                 {"auth_hba_file", hba},
                                                 {"auth_ident_file", ident}}),
                      10s, tls_env());
    // CN=cert_user may be postgres; CN=md5_user may be anyone.
    for (const char* cert : {"client-cert_user", "client-md5_user"}) {
        CAPTURE(cert);
        Conn mapped(tls_conninfo(pgtether, "verify-full", cert, "postgres"));
        REQUIRE_MESSAGE(mapped.ok(), mapped.error());
        CHECK(mapped.exec_ok("SELECT current_user").value() == "postgres");
    }
    // CN=postgres is not in the map: under map=, the same name is not implied.
    Conn same_name(tls_conninfo(pgtether, "verify-full", "client-postgres", "postgres"));
    CHECK_FALSE(same_name.ok());
    CHECK(contains(same_name.error(), "certificate authentication failed for user \"postgres\""));
    CHECK(pgtether.wait_for_log(
        "ident map \"certs\" does not let certificate name \"postgres\" log in as "
        "\"postgres\""));
    // CN=cert_user is paired with postgres only.
    Conn other_user(tls_conninfo(pgtether, "verify-full", "client-cert_user", "md5_user"));
    CHECK_FALSE(other_user.ok());
    CHECK(contains(other_user.error(), "certificate authentication failed for user \"md5_user\""));
}

TEST_CASE("PostgreSQL 17 direct TLS (ClientHello first, ALPN postgresql)") {
    auto startup = wire::startup({{"user", "postgres"}, {"database", tls_env().database}});
    SUBCASE("accepted with ALPN when TLS is configured") {
        Pgtether pgtether(client_tls("require"), 10s, tls_env());
        DirectTlsConn conn("127.0.0.1", pgtether.port(), true, ca());
        REQUIRE_MESSAGE(conn.connected(), conn.error());
        REQUIRE(conn.send(startup));
        auto login = conn.read_until_ready_or_error();
        INFO(wire::describe(login));
        REQUIRE_FALSE(login.empty());
        CHECK(login.back().type == 'Z');
        REQUIRE(conn.send(wire::query("SELECT 'direct'")));
        auto result = conn.read_until_ready_or_error();
        INFO(wire::describe(result));
        bool saw_row = false;
        for (const auto& m : result)
            saw_row = saw_row || (m.type == 'D' && contains(m.body, "direct"));
        CHECK(saw_row);
    }
    SUBCASE("refused without ALPN") {
        Pgtether pgtether(client_tls("require"), 10s, tls_env());
        DirectTlsConn conn("127.0.0.1", pgtether.port(), false, ca());
        // The handshake itself completes; then the connection is closed unread.
        if (conn.connected()) {
            conn.send(startup);
            CHECK(conn.read_until_ready_or_error(2s).empty());
        }
        CHECK(pgtether.wait_for_log("direct TLS connection without ALPN"));
    }
    SUBCASE("refused when client TLS is disabled") {
        Pgtether pgtether(client_tls("disable"), 10s, tls_env());
        DirectTlsConn conn("127.0.0.1", pgtether.port(), true, ca());
        CHECK_FALSE(conn.connected());
        CHECK(pgtether.wait_for_log("direct TLS connection, but client_tls_sslmode = disable"));
    }
}

TEST_CASE("client side: bytes sent behind an SSLRequest never run") {
    // A man in the middle answers the client's SSLRequest itself and appends its own start-up
    // packet and query; pgtether must refuse them (CVE-2021-23214 in PostgreSQL).
    const TestEnv& env = tls_env();
    for (const char* mode : {"require", "prefer", "disable"}) {
        CAPTURE(mode);
        Pgtether pgtether(client_tls(mode), 10s, env);
        std::string table = std::string("injected_") + mode;
        RawConn raw("127.0.0.1", pgtether.port());
        REQUIRE(raw.send(wire::ssl_request() +
                         wire::startup({{"user", "postgres"}, {"database", env.database}}) +
                         wire::query("CREATE TABLE " + table + " (x int)")));
        auto messages = raw.read_until_ready_or_error();
        INFO(wire::describe(messages));
        REQUIRE_FALSE(messages.empty());
        CHECK(messages[0].type == 'E');  // not 'S', not 'N': refused outright
        CHECK(wire::first_error_sqlstate(messages) == "08P01");
        CHECK(contains(messages[0].body, "received unencrypted data after SSL request"));
        CHECK(raw.wait_closed());
        CHECK_FALSE(table_exists(table, env));
    }
    SUBCASE("plaintext after the 'S' answer is not TLS: the connection ends") {
        Pgtether pgtether(client_tls("require"), 10s, env);
        RawConn raw("127.0.0.1", pgtether.port());
        REQUIRE(raw.send(wire::ssl_request()));
        REQUIRE(raw.read_exact(1) == "S");
        REQUIRE(raw.send(wire::startup({{"user", "postgres"}, {"database", env.database}}) +
                         wire::query("CREATE TABLE injected_after_s (x int)")));
        CHECK(raw.wait_closed());
        CHECK_FALSE(table_exists("injected_after_s", env));
        CHECK(pgtether.wait_for_log("TLS handshake failed"));
    }
}

TEST_CASE("server side: server_tls_sslmode up to verify-full") {
    const TestEnv& env = tls_env();
    const std::string port = std::to_string(env.pg_port);
    auto server_tls = [&](const std::string& mode, std::vector<std::string> databases,
                          std::map<std::string, std::string> extra = {}) {
        PoolerConfig config;
        config.settings = {{"server_tls_sslmode", mode}, {"server_tls_ca_file", ca()}};
        for (auto& [k, v] : extra)
            config.settings[k] = v;
        config.databases = std::move(databases);
        config.extra_args = {"-v"};
        return config;
    };
    const std::string by_name = "byname = host=localhost port=" + port + " dbname=" + env.database;
    const std::string by_ip = "byip = host=127.0.0.1 port=" + port + " dbname=" + env.database;
    const std::string ssl_query = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

    SUBCASE("verify-full: the right host name") {
        Pgtether pgtether(server_tls("verify-full", {by_name, by_ip}), 10s, env);
        auto conn = Conn::must(pgtether.conninfo("postgres", "byname"));
        CHECK(conn.exec_ok(ssl_query).value() == "t");
        CHECK(pgtether.wait_for_log("TLS established: TLSv1.3"));
        // Wrong name: the certificate names localhost, not 127.0.0.1.
        Conn wrong(pgtether.conninfo("postgres", "byip"));
        CHECK_FALSE(wrong.ok());
        CHECK(contains(wrong.error(), "TLS handshake with server failed"));
        CHECK(contains(wrong.error(), "IP address mismatch"));
    }
    SUBCASE("verify-ca: any name, but the CA must match") {
        Pgtether pgtether(server_tls("verify-ca", {by_ip}), 10s, env);
        auto conn = Conn::must(pgtether.conninfo("postgres", "byip"));
        CHECK(conn.exec_ok(ssl_query).value() == "t");
        Pgtether stranger(server_tls("verify-ca", {by_ip},
                                     {{"server_tls_ca_file", world().pki.path("rogue-ca.crt")}}),
                          10s, env);
        Conn refused(stranger.conninfo("postgres", "byip"));
        CHECK_FALSE(refused.ok());
        CHECK(contains(refused.error(), "certificate verify failed"));
    }
    SUBCASE("require and prefer against a server without TLS") {
        const TestEnv& plain = TestEnv::get();  // the shared fixture: ssl = off
        // (Named backends: other tests count the shared server's unnamed ones.)
        std::string line = "plain = host=" + plain.pg_host +
                           " port=" + std::to_string(plain.pg_port) + " dbname=" + plain.database +
                           " application_name=pgt_test_tls";
        Pgtether require(server_tls("require", {line}), 10s, env);
        Conn refused(require.conninfo("postgres", "plain"));
        CHECK_FALSE(refused.ok());
        CHECK(contains(refused.error(), "server does not support TLS"));
        Pgtether prefer(server_tls("prefer", {line}), 10s, env);
        auto conn = Conn::must(prefer.conninfo("postgres", "plain"));
        CHECK(conn.exec_ok(ssl_query).value() == "f");
    }
    SUBCASE("a reload that changes server TLS settings replaces server connections") {
        auto config = server_tls("require", {by_ip}, {{"pool_mode", "transaction"}});
        Pgtether pgtether(config, 10s, env);
        auto conn = Conn::must(pgtether.conninfo("postgres", "byip"));
        CHECK(conn.exec_ok(ssl_query).value() == "t");
        config.settings["server_tls_sslmode"] = "disable";
        pgtether.reload(config);
        REQUIRE(pgtether.wait_for_log("configuration reloaded"));
        // The same client, its next transaction: a new server connection, now in plaintext.
        CHECK(conn.exec_ok(ssl_query).value() == "f");
        CHECK(pgtether.wait_for_log("obsolete connection (server TLS settings changed)"));
    }
    SUBCASE("a client certificate for PostgreSQL's cert authentication") {
        world().pg.prepend_hba("hostssl all cert_user 127.0.0.1/32 cert");
        auto admin = Conn::must(direct_conninfo("", "", "", "", env));
        admin.exec("CREATE ROLE cert_user LOGIN");
        std::string line =
            "certdb = host=localhost port=" + port + " dbname=" + env.database + " user=cert_user";
        auto cert = world().pki.path("client-cert_user");
        Pgtether with(server_tls("verify-full", {line},
                                 {{"server_tls_cert_file", cert + ".crt"},
                                  {"server_tls_key_file", cert + ".key"}}),
                      10s, env);
        auto conn = Conn::must(with.conninfo("postgres", "certdb"));
        CHECK(conn.exec_ok("SELECT current_user").value() == "cert_user");
        CHECK(conn.exec_ok("SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                  .value() == "/CN=cert_user");
        Pgtether without(server_tls("verify-full", {line}), 10s, env);
        Conn refused(without.conninfo("postgres", "certdb"));
        CHECK_FALSE(refused.ok());
        CHECK(contains(refused.error(), "connection requires a valid client certificate"));
    }
}

TEST_CASE("server side: bytes after the server's 'S' never count") {
    // A malicious "server" accepts TLS with 'S' and appends a plaintext AuthenticationOk and
    // ReadyForQuery, hoping the pooler reads them as the server's (CVE-2021-23222 in libpq).
    const TestEnv& env = TestEnv::get();
    SUBCASE("in the same packet as the 'S'") {
        FakeServer fake("S" + kAuthOk + kReady);
        PoolerConfig config;
        config.settings = {{"server_tls_sslmode", "require"}};
        config.databases = {"fake = host=127.0.0.1 port=" + std::to_string(fake.port()) +
                            " dbname=fake"};
        config.extra_args = {"-v"};
        Pgtether pgtether(config, 10s, env);
        Conn conn(pgtether.conninfo("postgres", "fake"));
        CHECK_FALSE(conn.ok());
        CHECK(contains(conn.error(), "server sent unencrypted data after accepting TLS"));
        auto session = fake.wait();
        REQUIRE(session);
        CHECK(session->got_ssl_request);
        CHECK(session->after.empty());  // no StartupMessage, no TLS: nothing at all
        CHECK(session->closed_by_client);
    }
    SUBCASE("arriving just after the 'S'") {
        FakeServer fake("S", kAuthOk + kReady);
        PoolerConfig config;
        config.settings = {{"server_tls_sslmode", "require"}};
        config.databases = {"fake = host=127.0.0.1 port=" + std::to_string(fake.port()) +
                            " dbname=fake"};
        config.extra_args = {"-v"};
        Pgtether pgtether(config, 10s, env);
        Conn conn(pgtether.conninfo("postgres", "fake"));
        CHECK_FALSE(conn.ok());
        CHECK(contains(conn.error(), "TLS handshake with server failed"));
        auto session = fake.wait();
        REQUIRE(session);
        CHECK(session->got_ssl_request);
        // pgtether sent its ClientHello (a TLS record, 0x16) and nothing in plaintext.
        REQUIRE_FALSE(session->after.empty());
        CHECK(static_cast<unsigned char>(session->after[0]) == 0x16);
        CHECK_FALSE(contains(session->after, std::string("\0\x03\0\0", 4)));  // protocol 3.0
        CHECK(session->closed_by_client);
    }
}

TEST_CASE("two TLS hops: large results, large queries and pipelines") {
    const TestEnv& env = tls_env();
    PoolerConfig config = client_tls("require", {{"server_tls_sslmode", "verify-full"},
                                                 {"server_tls_ca_file", ca()},
                                                 {"pool_mode", "transaction"}});
    config.databases = {"big = host=localhost port=" + std::to_string(env.pg_port) +
                        " dbname=" + env.database};
    Pgtether pgtether(config, 10s, env);
    std::string conninfo = tls_conninfo(pgtether, "require");
    conninfo.replace(conninfo.find("dbname=" + env.database), 7 + env.database.size(),
                     "dbname=big");
    auto conn = Conn::must(conninfo);
    auto direct = Conn::must(direct_conninfo("", "", "", "", env));
    const std::string rows =
        "SELECT count(*), sum(length(t)), md5(string_agg(t, ',' ORDER BY g)) FROM "
        "(SELECT g, md5(g::text) || repeat('y', g % 500) AS t FROM generate_series(1, 50000) g) s";
    CHECK(conn.exec_ok(rows).rows == direct.exec_ok(rows).rows);
    auto wide = conn.exec_ok("SELECT g, repeat(md5(g::text), 200) FROM generate_series(1, 2000) g");
    CHECK(wide.rows.size() == 2000);
    CHECK(wide.rows[1999][1]->size() == 6400);
    auto one = conn.exec_ok("SELECT repeat('z', 3000000)");
    CHECK(one.value().size() == 3000000);
    // A 2 MB query text: many TLS records from the client, reassembled behind the TLS layer.
    std::string literal(2 * 1024 * 1024, 'q');
    CHECK(conn.exec_ok("SELECT length('" + literal + "')").value() ==
          std::to_string(literal.size()));
    // Many small statements in one round trip.
    std::string many;
    for (int i = 0; i < 500; ++i)
        many += "SELECT " + std::to_string(i) + ";";
    auto all = conn.exec_all(many);
    REQUIRE(all.size() == 500);
    CHECK(all[499].value() == "499");
    // Cancel requests: libpq 15 sends them in plaintext, which client_tls_sslmode = require
    // accepts; pgtether forwards them (in plaintext too) to the TLS server.
    REQUIRE(PQsendQuery(conn.raw(), "SELECT pg_sleep(30)") == 1);
    std::this_thread::sleep_for(300ms);
    PGcancel* cancel = PQgetCancel(conn.raw());
    char errbuf[256];
    CHECK(PQcancel(cancel, errbuf, sizeof errbuf) == 1);
    PQfreeCancel(cancel);
    Result last = Result::client_error("no result");
    while (PGresult* res = PQgetResult(conn.raw())) {
        last = Result::from(res);
        PQclear(res);
    }
    PGT_CHECK_SQLSTATE(last, "57014");
    CHECK(conn.exec_ok("SELECT 'still usable'").value() == "still usable");

    // The admin console shows both TLS sessions in PgBouncer's `tls` column.
    std::string console = conninfo;
    console.replace(console.find("dbname=big"), 10, "dbname=pgbouncer");
    auto admin = Conn::must(console);
    for (const char* what : {"SHOW CLIENTS", "SHOW SERVERS"}) {
        CAPTURE(what);
        auto shown = admin.exec_ok(what);
        std::size_t tls_col = 0;
        while (tls_col < shown.columns.size() && shown.columns[tls_col] != "tls")
            ++tls_col;
        REQUIRE(tls_col < shown.columns.size());
        bool found = false;
        for (const auto& row : shown.rows) {
            found = found || (row[tls_col] && row[tls_col]->starts_with("TLSv1.3/TLS_") &&
                              contains(*row[tls_col], "/ECDH="));
        }
        CHECK(found);
    }
}
