// A PostgreSQL of a test's own, for tests that stop and restart the server: the shared one must
// stay up for the tests running in parallel. Started with scripts/lib/pg.sh (same roles and
// pg_hba rules as the shared server, no pgbench tables) and destroyed with the object.
#pragma once

#include <string>

#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

namespace pgtether::itest {

class PrivatePostgres {
  public:
    // Runs `pg.sh start` (initdb, a free port); throws std::runtime_error with its output on
    // failure.
    PrivatePostgres();
    // A streaming standby of `primary` (`pg.sh standby`: pg_basebackup -R, a port of its own).
    struct StandbyOf {
        const PrivatePostgres& primary;
    };
    explicit PrivatePostgres(StandbyOf standby_of);
    ~PrivatePostgres();
    PrivatePostgres(const PrivatePostgres&) = delete;
    PrivatePostgres& operator=(const PrivatePostgres&) = delete;

    [[nodiscard]] const TestEnv& env() const { return env_; }
    [[nodiscard]] int port() const { return env_.pg_port; }

    // pg_ctl stop -m fast / start, on the same data directory and port. Throw on failure.
    void stop();
    void start();
    // pg_ctl promote: the standby leaves recovery and takes writes. Waits until it has.
    void promote();
    // pg_ctl stop -m immediate: the server dies as in a crash (no shutdown checkpoint).
    void crash();
    [[nodiscard]] const std::string& state_dir() const { return state_.path(); }

  private:
    // Runs argv (as the daemon user when `as_daemon_user`), waits, throws on a non-zero exit.
    void run(const std::vector<std::string>& argv, bool as_daemon_user, const std::string& what);

    TempDir state_;
    TestEnv env_;
};

}  // namespace pgtether::itest
