// psql and pgbench, unmodified, through pgtether: pgbench initialises its tables directly, then
// runs through pgtether with the simple and extended protocols (and prepared statements in
// session mode) with no failed transactions and consistent balances afterwards; psql runs -c and
// -f scripts with \copy both ways, over TCP and over pgtether's Unix socket.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

struct Run {
    int exit_code = -1;
    std::string output;
};

// Runs a PostgreSQL client program (as ourselves) and collects its output.
Run run(const std::vector<std::string>& argv, const TempDir& dir, const std::string& name,
        std::chrono::milliseconds timeout = 60s) {
    ChildProcess::Options options;
    options.argv = argv;
    options.log_path = dir.path() + "/" + name + ".out";
    ChildProcess child(options);
    auto status = child.wait_exit(timeout);
    Run result;
    result.output = read_file(options.log_path);
    if (status && WIFEXITED(*status)) result.exit_code = WEXITSTATUS(*status);
    return result;
}

std::string bin(const std::string& program) { return TestEnv::get().pg_bin + "/" + program; }

// A database of its own for pgbench, so its writes never disturb the other tests' reads of the
// shared pgbench tables.
class BenchDatabase {
  public:
    BenchDatabase() {
        Conn admin = Conn::must(direct_conninfo("", "postgres"));
        admin.exec_ok("DROP DATABASE IF EXISTS " + name_);
        admin.exec_ok("CREATE DATABASE " + name_);
    }
    ~BenchDatabase() {
        Conn admin(direct_conninfo("", "postgres"));
        admin.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    }
    [[nodiscard]] const std::string& name() const { return name_; }

  private:
    std::string name_ = "pgt_clients_bench";
};

std::string pgbench_summary(const std::string& output, const std::string& key) {
    std::smatch m;
    std::regex re(key + ": ([0-9]+)");
    return std::regex_search(output, m, re) ? m[1].str() : "";
}

}  // namespace

TEST_CASE("pgbench: initialised directly, then run through pgtether, simple and extended") {
    const TestEnv& env = TestEnv::get();
    BenchDatabase db;
    TempDir dir("pgt-clients", env.tmp_dir);
    const std::string port = std::to_string(env.pg_port);

    Run init = run({bin("pgbench"), "-i", "-s", "1", "-q", "-h", env.pg_host, "-p", port, "-U",
                    env.superuser, db.name()},
                   dir, "pgbench-init");
    REQUIRE_MESSAGE(init.exit_code == 0, init.output);

    struct Mode {
        std::string pool_mode;
        std::string protocol;
    };
    for (const Mode& mode : {Mode{"transaction", "simple"}, Mode{"transaction", "extended"},
                             Mode{"session", "prepared"}}) {
        CAPTURE(mode.pool_mode);
        CAPTURE(mode.protocol);
        PoolerConfig config;
        config.settings = {{"pool_mode", mode.pool_mode},
                           {"default_pool_size", mode.pool_mode == "session" ? "10" : "4"},
                           {"max_client_conn", "50"}};
        Pgtether pooler(config);
        Run bench = run({bin("pgbench"), "-h", pooler.host(), "-p", std::to_string(pooler.port()),
                         "-U", env.superuser, "-c", "10", "-j", "2", "-T", "3", "-M",
                         mode.protocol, "-n", db.name()},
                        dir, "pgbench-" + mode.protocol);
        INFO(bench.output);
        CHECK(bench.exit_code == 0);
        CHECK(pgbench_summary(bench.output, "number of failed transactions") == "0");
        std::string processed =
            pgbench_summary(bench.output, "number of transactions actually processed");
        REQUIRE_FALSE(processed.empty());
        CHECK(std::stoll(processed) > 0);
        CHECK(pooler.running());
    }

    // TPC-B keeps every balance total equal to the sum of the history's deltas.
    Conn direct = Conn::must(direct_conninfo("", db.name()));
    auto r = direct.exec(
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(bbalance) FROM "
        "pgbench_branches), (SELECT sum(tbalance) FROM pgbench_tellers), (SELECT sum(delta) FROM "
        "pgbench_history), (SELECT count(*) FROM pgbench_history)");
    PGT_REQUIRE_OK(r);
    CHECK(r.value(0, 0) == r.value(0, 3));
    CHECK(r.value(0, 1) == r.value(0, 3));
    CHECK(r.value(0, 2) == r.value(0, 3));
    CHECK(std::stoll(r.value(0, 4)) > 0);
}

TEST_CASE("psql -c and -f with \\copy both ways, over TCP and the Unix socket") {
    const TestEnv& env = TestEnv::get();
    TempDir dir("pgt-clients", env.tmp_dir);
    PoolerConfig config;
    config.settings = {{"pool_mode", "transaction"}, {"default_pool_size", "2"}};
    Pgtether pooler(config);
    const std::string port = std::to_string(pooler.port());

    // psql -c, TCP and Unix socket (the pooler's unix_socket_dir is its temp dir).
    for (const std::string& host : {pooler.host(), pooler.dir()}) {
        CAPTURE(host);
        Run c = run({bin("psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", host, "-p", port,
                     "-U", env.superuser, "-d", env.database, "-c",
                     "SELECT 'psql says ' || 6 * 7"},
                    dir, host == pooler.host() ? "psql-c-tcp" : "psql-c-unix");
        CHECK_MESSAGE(c.exit_code == 0, c.output);
        CHECK(c.output == "psql says 42\n");
    }
    // An error makes psql exit with 1 and print PostgreSQL's message.
    Run bad = run({bin("psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", pooler.host(), "-p",
                   port, "-U", env.superuser, "-d", env.database, "-c", "SELECT 1/0"},
                  dir, "psql-error");
    CHECK(bad.exit_code == 1);
    CHECK(bad.output.find("division by zero") != std::string::npos);

    // psql -f: a script with \copy in and out, a transaction, and a notice.
    std::string data;
    for (int i = 1; i <= 5000; ++i) {
        data += std::to_string(i) + ",\"row " + std::to_string(i) + ", with a comma\"\n";
    }
    const std::string in_csv = dir.write_file("in.csv", data);
    const std::string out_csv = dir.path() + "/out.csv";
    const std::string script = dir.write_file(
        "script.sql",
        "DROP TABLE IF EXISTS psql_copy;\n"
        "CREATE TABLE psql_copy (id int PRIMARY KEY, t text);\n"
        "\\copy psql_copy FROM '" + in_csv + "' WITH (FORMAT csv)\n"
        "BEGIN;\n"
        "UPDATE psql_copy SET t = upper(t) WHERE id % 1000 = 0;\n"
        "COMMIT;\n"
        "\\copy (SELECT id, t FROM psql_copy ORDER BY id) TO '" + out_csv + "' WITH (FORMAT csv)\n"
        "SELECT count(*), sum(id) FROM psql_copy;\n"
        "DO $$ BEGIN RAISE NOTICE 'script notice'; END $$;\n"
        "DROP TABLE psql_copy;\n"
        "\\echo script done\n");
    Run f = run({bin("psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", pooler.host(), "-p",
                 port, "-U", env.superuser, "-d", env.database, "-f", script},
                dir, "psql-f");
    INFO(f.output);
    CHECK(f.exit_code == 0);
    CHECK(f.output.find("COPY 5000") != std::string::npos);
    CHECK(f.output.find("5000|12502500") != std::string::npos);
    CHECK(f.output.find("script notice") != std::string::npos);
    CHECK(f.output.find("script done") != std::string::npos);

    // What came back out is what went in, with the transaction's update applied.
    std::string expected;
    for (int i = 1; i <= 5000; ++i) {
        std::string t = "row " + std::to_string(i) + ", with a comma";
        if (i % 1000 == 0) {
            for (auto& ch : t) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        }
        expected += std::to_string(i) + ",\"" + t + "\"\n";
    }
    CHECK(read_file(out_csv) == expected);
}
