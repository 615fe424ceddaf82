// Authentication on both sides of pgtether.
//
// Clients: every auth_type (trust, plain, md5, scram-sha-256) against an auth_file holding plain,
// md5 and SCRAM secrets; a wrong password or an unknown user gets 28P01 and never opens a backend.
// The client-side roles are private to this file and trusted by PostgreSQL, so pg_stat_activity
// shows exactly the backends pgtether opened for them.
//
// Servers: pgtether logs in to the harness's password roles (scram_user: scram-sha-256, md5_user:
// md5, plain_user: password) with the [databases] password, with the auth_file's plain or md5
// secret, and by SCRAM pass-through with only the SCRAM secret copied from pg_authid.
#include <doctest/doctest.h>
#include <poll.h>

#include <set>
#include <string>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// Connects with PQERRORS_VERBOSE set before the exchange, so a refused login's message carries
// its SQLSTATE ("FATAL:  28P01: password authentication failed ..."). Returns "" on success.
std::string login_error(const std::string& conninfo) {
    PGconn* conn = PQconnectStart(conninfo.c_str());
    if (conn == nullptr) return "out of memory";
    PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
    PostgresPollingStatusType status = PGRES_POLLING_WRITING;
    while (status != PGRES_POLLING_OK && status != PGRES_POLLING_FAILED) {
        pollfd pfd{PQsocket(conn), static_cast<short>(status == PGRES_POLLING_READING ? POLLIN
                                                                                      : POLLOUT),
                   0};
        if (poll(&pfd, 1, 10'000) <= 0) break;
        status = PQconnectPoll(conn);
    }
    std::string error;
    if (PQstatus(conn) != CONNECTION_OK) {
        error = PQerrorMessage(conn);
        if (error.empty()) error = "connection failed without a message";
    }
    PQfinish(conn);
    return error;
}

// PostgreSQL's md5 secret: "md5" + md5(password || user).
std::string md5_secret(const std::string& user, const std::string& password) {
    return "md5" + md5_hex(password + user);
}

// A SCRAM-SHA-256 secret for `password`, made by PostgreSQL itself.
std::string scram_secret(const std::string& password) {
    Conn conn = Conn::must(direct_conninfo());
    conn.exec_ok("SET password_encryption = 'scram-sha-256'");
    conn.exec_ok("DROP ROLE IF EXISTS pgt_auth_scratch");
    conn.exec_ok("CREATE ROLE pgt_auth_scratch PASSWORD '" + password + "'");
    std::string secret =
        scalar(conn, "SELECT rolpassword FROM pg_authid WHERE rolname = 'pgt_auth_scratch'");
    conn.exec_ok("DROP ROLE pgt_auth_scratch");
    return secret;
}

std::string stored_secret(const std::string& role) {
    Conn conn = Conn::must(direct_conninfo());
    Result r =
        conn.exec_params("SELECT rolpassword FROM pg_authid WHERE rolname = $1", {role});
    if (!r.ok() || r.rows.size() != 1) throw std::runtime_error("no secret for " + role);
    return r.value();
}

// Client-side roles: PostgreSQL trusts them; pgtether's auth_file decides.
struct ClientUser {
    std::string role;
    std::string kind;  // the auth_file secret kind: plain, md5, scram
    std::string password;
    std::string secret;  // as written to the auth_file
};

std::vector<ClientUser> client_users() {
    std::vector<ClientUser> users = {
        {private_role("pgt_auth_plain"), "plain", "pw-plain", ""},
        {private_role("pgt_auth_md5"), "md5", "pw-md5", ""},
        {private_role("pgt_auth_scram"), "scram", "pw-scram", ""},
    };
    users[0].secret = users[0].password;
    users[1].secret = md5_secret(users[1].role, users[1].password);
    users[2].secret = scram_secret(users[2].password);
    return users;
}

PoolerConfig auth_config(const std::string& auth_type, const std::vector<ClientUser>& users) {
    PoolerConfig config;
    config.settings = {{"auth_type", auth_type}, {"pool_mode", "transaction"}};
    std::vector<std::pair<std::string, std::string>> list = {{TestEnv::get().superuser, ""}};
    for (const auto& u : users) list.emplace_back(u.role, u.secret);
    config.userlist = list;
    return config;
}

// Which (auth_type, secret kind) pairs can authenticate with the right password: PgBouncer's
// rules. scram-sha-256 cannot check a password against an md5 secret.
bool can_succeed(const std::string& auth_type, const std::string& kind) {
    return !(auth_type == "scram-sha-256" && kind == "md5");
}

// The message of a failed login, PgBouncer's words (which its tools match): "trust"
// authentication failed for trust, SASL authentication failed after a SCRAM exchange (auth_type
// scram-sha-256, or md5 with a SCRAM secret), else PostgreSQL's "password authentication failed
// for user ...", which contains PgBouncer's "password authentication failed". `kind` is the
// secret's, "" for an unknown user.
std::string failure_words(const std::string& auth_type, const std::string& kind,
                          const std::string& role) {
    if (auth_type == "trust") return "\"trust\" authentication failed";
    if (auth_type == "scram-sha-256" || (auth_type == "md5" && kind == "scram")) {
        return "SASL authentication failed";
    }
    return "password authentication failed for user \"" + role + "\"";
}

}  // namespace

TEST_CASE("client authentication: every auth_type against plain, md5 and SCRAM secrets") {
    const auto users = client_users();
    for (const std::string auth_type : {"trust", "plain", "md5", "scram-sha-256"}) {
        CAPTURE(auth_type);
        Pgtether pooler(auth_config(auth_type, users));
        for (const auto& user : users) {
            CAPTURE(user.role);
            CAPTURE(user.kind);
            const std::string good = pooler.conninfo(user.role, "", user.password);
            const std::string wrong = pooler.conninfo(user.role, "", user.password + "-wrong");
            const std::string none = pooler.conninfo(user.role);
            if (auth_type == "trust") {
                // trust asks for no password at all: any password works, none too.
                CHECK(login_error(good).empty());
                CHECK(login_error(wrong).empty());
                CHECK(login_error(none).empty());
                continue;
            }
            std::string error = login_error(good);
            if (can_succeed(auth_type, user.kind)) {
                CHECK_MESSAGE(error.empty(), error);
                Conn conn = Conn::must(good);
                CHECK(scalar(conn, "SELECT current_user") == user.role);
            } else {
                CHECK(contains(error, "28P01"));
            }
            error = login_error(wrong);
            CHECK_MESSAGE(contains(error, "28P01"), error);
            CHECK_MESSAGE(contains(error, failure_words(auth_type, user.kind, user.role)), error);
            // libpq cannot answer a password request without a password.
            CHECK_FALSE(login_error(none).empty());
        }
    }
}

TEST_CASE("wrong passwords and unknown users: 28P01, PgBouncer's words, and no backend opened") {
    const auto users = client_users();
    for (const auto& user : users) REQUIRE(settled(user.role));
    for (const std::string auth_type : {"trust", "plain", "md5", "scram-sha-256"}) {
        CAPTURE(auth_type);
        Pgtether pooler(auth_config(auth_type, users));
        const std::string ghost = "pgt_auth_no_such_user";
        for (int i = 0; i < 3; ++i) {
            std::string unknown = login_error(pooler.conninfo(ghost, "", "whatever"));
            CHECK_MESSAGE(contains(unknown, "28P01"), unknown);
            CHECK_MESSAGE(contains(unknown, failure_words(auth_type, "", ghost)), unknown);
            if (auth_type == "trust") continue;
            for (const auto& user : users) {
                std::string wrong = login_error(pooler.conninfo(user.role, "", "nope"));
                CHECK_MESSAGE(contains(wrong, "28P01"), wrong);
            }
        }
        for (const auto& user : users) {
            CAPTURE(user.role);
            CHECK(backends_of(user.role) == 0);
        }
        // An unknown database is only revealed after authentication (3D000 then).
        std::string no_db = login_error(pooler.conninfo(ghost, "no_such_db", "x"));
        CHECK_MESSAGE(contains(no_db, "28P01"), no_db);
    }
}

TEST_CASE("cleartext: the exact ErrorResponse for a wrong password, over a raw socket") {
    const auto users = client_users();
    REQUIRE(settled(users[0].role));
    Pgtether pooler(auth_config("plain", users));
    RawConn raw(pooler.host(), pooler.port());
    REQUIRE(raw.send(wire::startup({{"user", users[0].role}, {"database", "pgtether_test"}})));
    auto request = raw.read_message();
    REQUIRE(request.has_value());
    CHECK(request->type == 'R');
    CHECK(request->body == wire::i32(3));  // AuthenticationCleartextPassword
    REQUIRE(raw.send(wire::message('p', wire::cstr("not the password"))));
    auto reply = raw.read_until_ready_or_error();
    INFO(wire::describe(reply));
    REQUIRE(wire::first_error_sqlstate(reply) == "28P01");
    CHECK(wire::error_fields(reply.back())['S'] == "FATAL");
    CHECK(raw.wait_closed());
    CHECK(backends_of(users[0].role) == 0);
}

TEST_CASE("server login with the [databases] password: scram-sha-256, md5 and cleartext roles") {
    const TestEnv& env = TestEnv::get();
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}};
    for (const auto& user : env.auth_users) {
        config.databases.push_back("as_" + user.name + " = host=" + env.pg_host +
                                   " port=" + std::to_string(env.pg_port) + " dbname=" +
                                   env.database + " user=" + user.name +
                                   " password=" + user.password);
    }
    config.databases.push_back("wrong_password = host=" + env.pg_host + " port=" +
                               std::to_string(env.pg_port) + " dbname=" + env.database +
                               " user=scram_user password=not-secret");
    Pgtether pooler(config);
    for (const auto& user : env.auth_users) {
        CAPTURE(user.name);
        // The client is the trusted superuser; the server connection is the forced user.
        Conn conn(pooler.conninfo("", "as_" + user.name));
        REQUIRE_MESSAGE(conn.ok(), (conn.error() + "\n" + pooler.log()));
        CHECK(scalar(conn, "SELECT current_user") == user.name);
        CHECK(scalar(conn, "SELECT count(*) FROM pgbench_branches") != "0");
    }
    // The server refuses the configured password: the client hears PostgreSQL's own 28P01.
    std::string error = login_error(pooler.conninfo("", "wrong_password"));
    CHECK_MESSAGE(contains(error, "28P01"), error);
    CHECK(pooler.running());
}

TEST_CASE("server logins with one plain password derive its SCRAM keys once") {
    // PBKDF2 for every server connection ran on the event loop: a reconnect storm was one
    // derivation per connection. The keys depend on the password, the role's salt and the
    // iteration count only: four logins, one derivation (proxy/server/scram_key_cache.hpp).
    const TestEnv& env = TestEnv::get();
    const auto& scram = env.auth_user("scram-sha-256");
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "4"}, {"workers", "1"}};
    config.databases = {"as_scram = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
                        " dbname=" + env.database + " user=" + scram.name +
                        " password=" + scram.password};
    config.extra_args = {"-v"};
    Pgtether pooler(config);
    // Four clients in a transaction at once: four server connections, four SCRAM logins.
    std::vector<Conn> clients;
    for (int i = 0; i < 4; ++i) {
        clients.emplace_back(pooler.conninfo("", "as_scram"));
        REQUIRE_MESSAGE(clients.back().ok(), clients.back().error());
        PGT_REQUIRE_OK(clients.back().exec("BEGIN"));
        CHECK(scalar(clients.back(), "SELECT current_user") == scram.name);
    }
    std::set<std::string> pids;
    for (auto& c : clients) pids.insert(scalar(c, "SELECT pg_backend_pid()"));
    CHECK(pids.size() == 4);
    const std::string log = pooler.log();
    std::size_t derived = 0;
    for (std::size_t at = log.find("SCRAM keys derived"); at != std::string::npos;
         at = log.find("SCRAM keys derived", at + 1)) {
        ++derived;
    }
    CHECK_MESSAGE(derived == 1, log);
    for (auto& c : clients) PGT_CHECK_OK(c.exec("COMMIT"));
}

TEST_CASE("server login with the auth_file's plain and md5 secrets") {
    const TestEnv& env = TestEnv::get();
    const auto& scram = env.auth_user("scram-sha-256");
    const auto& md5 = env.auth_user("md5");
    const auto& plain = env.auth_user("password");
    for (const std::string auth_type : {"trust", "md5", "plain"}) {
        CAPTURE(auth_type);
        PoolerConfig config;
        config.settings = {{"auth_type", auth_type}, {"pool_mode", "transaction"}};
        config.userlist = std::vector<std::pair<std::string, std::string>>{
            {env.superuser, ""},
            {scram.name, scram.password},                       // plain secret, SCRAM server
            {md5.name, md5_secret(md5.name, md5.password)},     // md5 secret, md5 server
            {plain.name, plain.password},                       // plain secret, cleartext server
        };
        Pgtether pooler(config);
        for (const auto* user : {&scram, &md5, &plain}) {
            CAPTURE(user->name);
            Conn conn(pooler.conninfo(user->name, "", user->password));
            REQUIRE_MESSAGE(conn.ok(), (conn.error() + "\n" + pooler.log()));
            CHECK(scalar(conn, "SELECT current_user") == user->name);
        }
    }
}

TEST_CASE("SCRAM pass-through: only the SCRAM secret from pg_authid, no plain password") {
    const TestEnv& env = TestEnv::get();
    const auto& scram = env.auth_user("scram-sha-256");
    for (const std::string auth_type : {"scram-sha-256", "md5"}) {
        // md5 also uses SCRAM for users whose secret is a SCRAM secret (PgBouncer's rule).
        CAPTURE(auth_type);
        PoolerConfig config;
        config.settings = {{"auth_type", auth_type}, {"pool_mode", "transaction"},
                           {"default_pool_size", "2"}};
        config.userlist = std::vector<std::pair<std::string, std::string>>{
            {env.superuser, ""}, {scram.name, stored_secret(scram.name)}};
        Pgtether pooler(config);

        Conn first(pooler.conninfo(scram.name, "", scram.password));
        REQUIRE_MESSAGE(first.ok(), (first.error() + "\n" + pooler.log()));
        CHECK(scalar(first, "SELECT current_user") == scram.name);
        // A second server login (two at once) and a later client reuse what the first proved.
        Conn second = Conn::must(pooler.conninfo(scram.name, "", scram.password));
        PGT_REQUIRE_OK(first.exec("BEGIN"));
        CHECK(scalar(first, "SELECT current_user") == scram.name);
        // first holds its backend, so second needs a server login of its own.
        CHECK(scalar(second, "SELECT current_user") == scram.name);
        CHECK(scalar(first, "SELECT pg_backend_pid()") !=
              scalar(second, "SELECT pg_backend_pid()"));
        PGT_REQUIRE_OK(first.exec("COMMIT"));

        std::string wrong = login_error(pooler.conninfo(scram.name, "", "not-secret"));
        CHECK_MESSAGE(contains(wrong, "28P01"), wrong);
    }
}

TEST_CASE("server login that cannot work is a clear error, not a hang") {
    const TestEnv& env = TestEnv::get();
    const auto& scram = env.auth_user("scram-sha-256");
    // trust towards clients, but the server wants SCRAM and pgtether has no usable secret: an md5
    // secret cannot answer SCRAM, and no client has proved the password.
    PoolerConfig config;
    config.settings = {{"auth_type", "trust"}, {"pool_mode", "transaction"}};
    config.userlist = std::vector<std::pair<std::string, std::string>>{
        {env.superuser, ""}, {scram.name, md5_secret(scram.name, scram.password)}};
    Pgtether pooler(config);
    std::string error = login_error(pooler.conninfo(scram.name));
    if (error.empty()) {
        Conn conn(pooler.conninfo(scram.name));
        Result r = conn.exec("SELECT 1");
        CHECK(r.is_error());
        error = r.error_text;
    }
    CHECK_MESSAGE(contains(error, "SCRAM"), error);
    // Other users are unaffected.
    Conn ok = Conn::must(pooler.conninfo());
    CHECK(scalar(ok, "SELECT 1") == "1");
}

TEST_CASE("a stored SCRAM secret with a huge iteration count fails like a wrong password") {
    // Any role may store such a secret for itself (ALTER ROLE self PASSWORD 'SCRAM-SHA-256$...');
    // checking a cleartext password against it would run PBKDF2 for 2e9 iterations on the event
    // loop and stall every client for the better part of an hour.
    auto users = client_users();
    ClientUser& user = users[2];
    REQUIRE(user.kind == "scram");
    const std::string prefix = "SCRAM-SHA-256$4096:";
    REQUIRE(user.secret.rfind(prefix, 0) == 0);
    user.secret = "SCRAM-SHA-256$2000000000:" + user.secret.substr(prefix.size());
    Pgtether pooler(auth_config("plain", users));
    for (int i = 0; i < 3; ++i) {
        std::string error = login_error(pooler.conninfo(user.role, "", user.password));
        CHECK_MESSAGE(contains(error, "28P01"), error);
        CHECK_MESSAGE(
            contains(error, "password authentication failed for user \"" + user.role + "\""),
            error);
    }
    CHECK(pooler.wait_for_log("2000000000 iterations, more than pgtether computes"));
    // The worker was never blocked: other users log in and run queries as before.
    CHECK(login_error(pooler.conninfo(users[0].role, "", users[0].password)).empty());
    Conn conn = Conn::must(pooler.conninfo(users[1].role, "", users[1].password));
    CHECK(scalar(conn, "SELECT 1") == "1");
    CHECK(backends_of(user.role) == 0);
}

TEST_CASE("server_require_auth refuses a cleartext request and keeps SCRAM working") {
    // plain_user's pg_hba method is `password`: PostgreSQL asks for the password in clear, which
    // any server (or anything answering in its place) may do. `!password,!md5` forbids it.
    const TestEnv& env = TestEnv::get();
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"server_require_auth", "!password,!md5"}};
    for (const auto& user : env.auth_users) {
        config.databases.push_back(
            "as_" + user.name + " = host=" + env.pg_host + " port=" + std::to_string(env.pg_port) +
            " dbname=" + env.database + " user=" + user.name + " password=" + user.password);
    }
    Pgtether pooler(config);
    const auto& scram = env.auth_user("scram-sha-256");
    Conn conn(pooler.conninfo("", "as_" + scram.name));
    REQUIRE_MESSAGE(conn.ok(), (conn.error() + "\n" + pooler.log()));
    CHECK(scalar(conn, "SELECT current_user") == scram.name);
    for (const char* method : {"password", "md5"}) {
        const auto& user = env.auth_user(method);
        CAPTURE(user.name);
        std::string error = login_error(pooler.conninfo("", "as_" + user.name));
        if (error.empty()) {
            Conn refused(pooler.conninfo("", "as_" + user.name));
            Result r = refused.exec("SELECT 1");
            CHECK(r.is_error());
            error = r.error_text;
        }
        CHECK_FALSE(error.empty());
    }
    CHECK(pooler.wait_for_log(
        "authentication method requirement \"!password,!md5\" (server_require_auth) failed: "
        "server requested a cleartext password"));
    CHECK(pooler.wait_for_log("server requested a hashed password"));
    // The refused server connections are closed by pgtether; their backends exit when they read
    // the EOF, which on a loaded machine is not yet done when the log line is written.
    const std::string refused_role = env.auth_user("password").name;
    CHECK(eventually([&] { return backends_of(refused_role) == 0; }));
    CHECK(pooler.running());
}
