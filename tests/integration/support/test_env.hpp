// The throwaway PostgreSQL an integration test runs against, and the binaries under test.
//
// scripts/lib/pg.sh writes an env file (KEY=VALUE lines); ctest passes its path in PGT_ENV_FILE and
// the pgtether binary in PGTETHER_BIN (tests/integration/CMakeLists.txt).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgtether::itest {

// A role that must authenticate with a password (pg_hba method md5 / scram-sha-256 / password).
struct AuthUser {
    std::string name;
    std::string method;  // the pg_hba.conf method required for this role
    std::string password;
};

struct TestEnv {
    std::string pg_host;  // TCP address PostgreSQL listens on (127.0.0.1)
    int pg_port = 0;
    std::string pg_socket_dir;  // Unix socket directory
    std::string pg_data;
    std::string pg_bin;  // directory with psql, pgbench, ...
    std::string pg_log;
    std::string tmp_dir;    // scratch dir deleted together with the server (PGT_PG_TMP)
    std::string superuser;  // trusted superuser, "postgres"
    std::string database;   // database with the pgbench tables, "pgtether_test"
    std::vector<AuthUser> auth_users;

    std::string pgtether_bin;   // $PGTETHER_BIN
    // $PGT_PGTETHER_SANITIZED=1: PGTETHER_BIN runs under AddressSanitizer, whose quarantine and
    // shadow memory make the daemon's RSS say nothing about what it holds. A runtime fact, not
    // this program's build: the sanitizer phase runs the release build's test programs.
    bool pgtether_sanitized = false;
    std::string pgbouncer_bin;  // $PGT_PGBOUNCER_BIN, default /usr/sbin/pgbouncer

    // The first auth-test role whose pg_hba method is `method`; throws std::runtime_error if none.
    [[nodiscard]] const AuthUser& auth_user(std::string_view method) const;

    // Parses an env file written by scripts/lib/pg.sh; throws std::runtime_error naming the
    // missing file or key.
    static TestEnv load(const std::string& env_file);

    // The environment of this test run, loaded once from $PGT_ENV_FILE.
    static const TestEnv& get();
};

}  // namespace pgtether::itest
