// auth_type = pam (docs/tls-and-auth.md, "PAM"): the client's clear-text password is checked by a
// PAM service of the test's own -- pam_exec.so running a script that accepts one password and
// records what PAM told it -- and the pool's servers log in with the password PAM accepted.
// Writing the service file needs root (/etc/pam.d); elsewhere the test says so and skips.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

// A PAM service in /etc/pam.d, removed again when the test ends.
class PamService {
  public:
    PamService() : dir_("pgt-pam", TestEnv::get().tmp_dir) {
        const AuthUser& user = TestEnv::get().auth_user("scram-sha-256");
        name_ = "pgtether-test-" + std::to_string(::getpid());
        seen_ = dir_.path() + "/seen.log";
        // pam_exec hands the password on stdin (expose_authtok), the user and the client's
        // address in PAM_USER and PAM_RHOST. "slow" takes a second, for a client that leaves
        // while PAM still works.
        const std::string check = dir_.write_file(
            "check.sh",
            "#!/bin/sh\n"
            "password=$(tr -d '\\000')\n"
            "echo \"$PAM_TYPE $PAM_USER $PAM_RHOST\" >> " + seen_ + "\n"
            "[ \"$password\" = slow ] && sleep 1\n"
            "case \"$PAM_USER\" in " + user.name + "|locked_user) ;; *) exit 1 ;; esac\n"
            "[ \"$password\" = '" + user.password + "' ]\n");
        // The account phase refuses one user whatever its password (pam_acct_mgmt).
        const std::string account = dir_.write_file(
            "account.sh", "#!/bin/sh\necho \"$PAM_TYPE $PAM_USER $PAM_RHOST\" >> " + seen_ +
                              "\n[ \"$PAM_USER\" != locked_user ]\n");
        ::chmod(check.c_str(), 0755);
        ::chmod(account.c_str(), 0755);
        ::chmod(dir_.path().c_str(), 0755);
        std::ofstream(path()) << "auth required pam_exec.so expose_authtok quiet " << check
                              << "\naccount required pam_exec.so quiet " << account << "\n";
        ok_ = static_cast<bool>(std::ifstream(path()));
    }
    ~PamService() { ::unlink(path().c_str()); }
    PamService(const PamService&) = delete;
    PamService& operator=(const PamService&) = delete;

    [[nodiscard]] bool ok() const { return ok_; }
    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::string path() const { return "/etc/pam.d/" + name_; }
    [[nodiscard]] std::string seen() const { return read_file(seen_); }

  private:
    TempDir dir_;
    std::string name_;
    std::string seen_;
    bool ok_ = false;
};

std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

PoolerConfig pam_pool(const PamService& service) {
    PoolerConfig config = pool_config("transaction", 2,
                                      {{"auth_type", "pam"}, {"auth_pam_service", service.name()}});
    // auth_file is ignored under pam: the user's line there has a wrong password, which must not
    // be what the servers log in with.
    const AuthUser& user = TestEnv::get().auth_user("scram-sha-256");
    config.userlist = {{TestEnv::get().superuser, ""}, {user.name, "not-the-password"}};
    return config;
}

}  // namespace

TEST_CASE("auth_type = pam: PAM decides, and servers log in with the password it accepted") {
    if (::geteuid() != 0) {
        MESSAGE("skipped: writing a PAM service file in /etc/pam.d needs root");
        return;
    }
    PamService service;
    REQUIRE(service.ok());
    Pgtether pooler(pam_pool(service));
    const AuthUser& user = TestEnv::get().auth_user("scram-sha-256");

    // The right password: PAM says yes (with the client's address), and PostgreSQL, which wants
    // SCRAM from this role, takes the same password from pgtether.
    Conn good = Conn::must(pooler.conninfo(user.name, "", user.password));
    CHECK(good.exec_ok("SELECT current_user").value() == user.name);
    CHECK(service.seen().find("auth " + user.name + " 127.0.0.1") != std::string::npos);
    CHECK(service.seen().find("account " + user.name + " 127.0.0.1") != std::string::npos);

    // A wrong password: PgBouncer's words, PostgreSQL's SQLSTATE, PAM's reason in the log.
    Conn bad(pooler.conninfo(user.name, "", "wrong"));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().find("PAM authentication failed") != std::string::npos);
    CHECK(pooler.wait_for_log("closing because: PAM authentication failed"));
    CHECK(pooler.wait_for_log("PAM: pam_authenticate() failed"));

    // The account phase counts too: a user whose password PAM accepts but whose account it
    // refuses does not get in.
    Conn locked(pooler.conninfo("locked_user", "", user.password));
    REQUIRE_FALSE(locked.ok());
    CHECK(pooler.wait_for_log("PAM: pam_acct_mgmt() failed"));

    // A client that leaves while PAM works does not disturb anyone: the next login is served.
    {
        auto checks = [&] { return count_of(service.seen(), "auth "); };
        const std::size_t before = checks();
        PGconn* leaving = PQconnectStart(pooler.conninfo(user.name, "", "slow").c_str());
        REQUIRE(leaving != nullptr);
        CHECK(eventually([&] {
            (void)PQconnectPoll(leaving);
            return checks() > before;  // the script runs (and sleeps)
        }));
        PQfinish(leaving);
    }
    Conn after = Conn::must(pooler.conninfo(user.name, "", user.password));
    CHECK(after.exec_ok("SELECT 1").value() == "1");
    CHECK(pooler.running());

    // Over the Unix socket PAM gets no PAM_RHOST (there is no address).
    Conn local = Conn::must(pooler.unix_conninfo(user.name, "", "password=" + user.password));
    CHECK(local.exec_ok("SELECT 1").value() == "1");
    CHECK(service.seen().find("auth " + user.name + " \n") != std::string::npos);
}
