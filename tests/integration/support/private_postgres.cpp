// A private throwaway PostgreSQL for one test.
#include "tests/integration/support/private_postgres.hpp"

#include <sys/wait.h>

#include <stdexcept>

namespace pgtether::itest {

namespace {

std::string pg_sh() { return std::string(PGT_SOURCE_DIR) + "/scripts/lib/pg.sh"; }

}  // namespace

PrivatePostgres::PrivatePostgres() : state_("pgt-private-pg") {
    run({pg_sh(), "start", state_.path(), "--pgbench-scale", "0", "--max-connections", "50"},
        false, "pg.sh start");
    env_ = TestEnv::load(state_.path() + "/pg.env");
    // The binaries under test come from the shared environment.
    env_.pgtether_bin = TestEnv::get().pgtether_bin;
    env_.pgbouncer_bin = TestEnv::get().pgbouncer_bin;
}

PrivatePostgres::PrivatePostgres(StandbyOf standby_of) : state_("pgt-private-standby") {
    run({pg_sh(), "standby", standby_of.primary.state_dir(), state_.path()}, false,
        "pg.sh standby");
    env_ = TestEnv::load(state_.path() + "/pg.env");
    env_.pgtether_bin = TestEnv::get().pgtether_bin;
    env_.pgbouncer_bin = TestEnv::get().pgbouncer_bin;
}

PrivatePostgres::~PrivatePostgres() {
    try {
        run({pg_sh(), "stop", state_.path()}, false, "pg.sh stop");
    } catch (...) {
        // Best effort: a destructor must not throw; pg.sh stop already tried everything.
    }
}

void PrivatePostgres::stop() {
    run({env_.pg_bin + "/pg_ctl", "-D", env_.pg_data, "-m", "fast", "-w", "-t", "30", "stop"},
        true, "pg_ctl stop");
}

void PrivatePostgres::start() {
    run({env_.pg_bin + "/pg_ctl", "-D", env_.pg_data, "-l", env_.pg_log, "-w", "-t", "30",
         "start"},
        true, "pg_ctl start");
}

void PrivatePostgres::promote() {
    run({env_.pg_bin + "/pg_ctl", "-D", env_.pg_data, "-w", "-t", "30", "promote"}, true,
        "pg_ctl promote");
}

void PrivatePostgres::crash() {
    run({env_.pg_bin + "/pg_ctl", "-D", env_.pg_data, "-m", "immediate", "-w", "-t", "30",
         "stop"},
        true, "pg_ctl stop -m immediate");
}

void PrivatePostgres::run(const std::vector<std::string>& argv, bool as_daemon_user,
                          const std::string& what) {
    ChildProcess::Options options;
    options.argv = argv;
    options.log_path = state_.path() + "/commands.log";
    options.as_daemon_user = as_daemon_user;
    ChildProcess child(options);
    auto status = child.wait_exit(120s);
    if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
        throw std::runtime_error(what + " failed (" +
                                 (status ? describe_status(*status) : std::string("timeout")) +
                                 "):\n" + read_file(options.log_path));
    }
}

}  // namespace pgtether::itest
