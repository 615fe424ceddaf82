// auth_type = ldap (docs/tls-and-auth.md, "LDAP"): the client's clear-text password is checked by
// a real slapd (Debian's, started by the test on a loopback port with a directory of its own) in
// both of PostgreSQL's modes -- simple bind and search+bind -- and the pool's servers log in with
// the password LDAP accepted.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/process.hpp"
#include "tests/integration/support/test_env.hpp"
#include "tests/integration/support/tls_support.hpp"

using namespace pgtether::itest;

namespace {

constexpr const char* kSlapd = "/usr/sbin/slapd";
constexpr const char* kBaseDn = "dc=example,dc=net";
constexpr const char* kPeople = "ou=people,dc=example,dc=net";

// slapd with an mdb directory holding the auth-test role (same password as in PostgreSQL), a
// user with another password, and a search account.
class Slapd {
  public:
    Slapd() : dir_("pgt-ldap", TestEnv::get().tmp_dir) {
        const AuthUser& user = TestEnv::get().auth_user("scram-sha-256");
        user_ = user.name;
        password_ = user.password;
        const std::string d = dir_.path();
        run_command("mkdir -p '" + d + "/data'");
        const std::string conf = dir_.write_file(
            "slapd.conf",
            "include /etc/ldap/schema/core.schema\n"
            "include /etc/ldap/schema/cosine.schema\n"
            "include /etc/ldap/schema/inetorgperson.schema\n"
            "pidfile " + d + "/slapd.pid\n"
            "modulepath /usr/lib/ldap\n"
            "moduleload back_mdb\n"
            "database mdb\n"
            "maxsize 10485760\n"
            "suffix \"" + std::string(kBaseDn) + "\"\n"
            "rootdn \"cn=admin," + kBaseDn + "\"\n"
            "rootpw adminpw\n"
            "directory " + d + "/data\n");
        auto person = [](const std::string& uid, const std::string& password) {
            return "dn: uid=" + uid + "," + kPeople + "\nobjectClass: inetOrgPerson\nuid: " + uid +
                   "\ncn: " + uid + "\nsn: " + uid + "\nuserPassword: " + password + "\n\n";
        };
        const std::string ldif = dir_.write_file(
            "data.ldif", "dn: " + std::string(kBaseDn) +
                             "\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n"
                             "o: example\n\n"
                             "dn: " + kPeople + "\nobjectClass: organizationalUnit\nou: people\n\n" +
                             person(user_, password_) + person("other_user", "other-secret") +
                             person("searcher", "search-secret"));
        run_command(std::string("/usr/sbin/slapadd -f '") + conf + "' -l '" + ldif + "'");
        port_ = free_port();
        process_ = std::make_unique<ChildProcess>(ChildProcess::Options{
            {kSlapd, "-f", conf, "-h", "ldap://127.0.0.1:" + std::to_string(port_) + "/", "-d",
             "0"},
            d + "/slapd.log"});
        if (!eventually([&] { return port_accepts("127.0.0.1", port_); })) {
            throw std::runtime_error("slapd did not start: " + read_file(d + "/slapd.log"));
        }
    }
    ~Slapd() {
        if (process_) process_->stop(5s);
    }
    Slapd(const Slapd&) = delete;
    Slapd& operator=(const Slapd&) = delete;

    [[nodiscard]] int port() const { return port_; }
    [[nodiscard]] const std::string& user() const { return user_; }
    [[nodiscard]] const std::string& password() const { return password_; }
    void stop() { process_->stop(5s); }

  private:
    TempDir dir_;
    std::string user_;
    std::string password_;
    int port_ = 0;
    std::unique_ptr<ChildProcess> process_;
};

PoolerConfig ldap_pool(const std::string& options) {
    PoolerConfig config = pool_config("transaction", 2,
                                      {{"auth_type", "ldap"}, {"auth_ldap_options", options}});
    // auth_file is ignored under ldap: a wrong password for the user there must not be what the
    // servers log in with.
    const AuthUser& user = TestEnv::get().auth_user("scram-sha-256");
    config.userlist = {{TestEnv::get().superuser, ""}, {user.name, "not-the-password"}};
    return config;
}

}  // namespace

TEST_CASE("auth_type = ldap against a real slapd: both modes, refusals, server logins") {
    if (::access(kSlapd, X_OK) != 0) {
        MESSAGE("skipped: slapd is not installed (scripts/lib/deps.sh installs it)");
        return;
    }
    Slapd slapd;
    const std::string server = "ldapserver=127.0.0.1 ldapport=" + std::to_string(slapd.port());
    const std::string modes[] = {
        // simple bind: uid=USER,ou=people,...
        server + " ldapprefix=uid= ldapsuffix=\"," + kPeople + "\"",
        // search+bind, anonymous search by uid
        server + " ldapbasedn=\"" + kBaseDn + "\"",
        // search+bind as a search account, with a filter
        server + " ldapbasedn=\"" + kBaseDn + "\" ldapbinddn=\"uid=searcher," + kPeople +
            "\" ldapbindpasswd=search-secret ldapsearchfilter=\"(&(objectClass=inetOrgPerson)"
            "(uid=$username))\"",
        // the same as a URL
        "ldapurl=\"ldap://127.0.0.1:" + std::to_string(slapd.port()) + "/" + kBaseDn +
            "?uid?sub\"",
    };
    for (const std::string& options : modes) {
        CAPTURE(options);
        Pgtether pooler(ldap_pool(options));
        // The right password: LDAP says yes, and PostgreSQL, which wants SCRAM from this role,
        // takes the same password from pgtether (auth_file's is wrong).
        Conn good = Conn::must(pooler.conninfo(slapd.user(), "", slapd.password()));
        CHECK(good.exec_ok("SELECT current_user").value() == slapd.user());

        Conn wrong(pooler.conninfo(slapd.user(), "", "wrong"));
        REQUIRE_FALSE(wrong.ok());
        CHECK(wrong.error().find("LDAP authentication failed") != std::string::npos);
        CHECK(pooler.wait_for_log("closing because: LDAP authentication failed"));
        CHECK(pooler.wait_for_log("LDAP: LDAP login failed for user"));

        // A user the directory does not have, and one whose name would change a search filter.
        Conn unknown(pooler.conninfo("nobody_here", "", "x"));
        CHECK_FALSE(unknown.ok());
        Conn star(pooler.conninfo("scram*", "", slapd.password()));
        CHECK_FALSE(star.ok());
        CHECK(pooler.running());
    }

    SUBCASE("an auth_hba_file ldap line with its own options") {
        TempDir dir("pgt-ldap-hba", TestEnv::get().tmp_dir);
        PoolerConfig config = ldap_pool(server + " ldapprefix=uid=nobody,");  // not this one
        config.settings["auth_type"] = "hba";
        config.settings["auth_hba_file"] = dir.write_file(
            "hba.conf", "host all all 127.0.0.1/32 ldap " + server + " ldapprefix=\"uid=\" " +
                            "ldapsuffix=\"," + kPeople + "\"\n");
        Pgtether pooler(config);
        Conn good = Conn::must(pooler.conninfo(slapd.user(), "", slapd.password()));
        CHECK(good.exec_ok("SELECT current_user").value() == slapd.user());
        Conn wrong(pooler.conninfo(slapd.user(), "", "wrong"));
        REQUIRE_FALSE(wrong.ok());
        CHECK(wrong.error().find("LDAP authentication failed") != std::string::npos);
    }
    SUBCASE("an unreachable LDAP server fails the login, not pgtether") {
        Pgtether pooler(ldap_pool(server + " ldapbasedn=\"" + kBaseDn + "\""));
        slapd.stop();
        Conn refused(pooler.conninfo(slapd.user(), "", slapd.password()));
        REQUIRE_FALSE(refused.ok());
        CHECK(refused.error().find("LDAP authentication failed") != std::string::npos);
        CHECK(pooler.wait_for_log("could not perform initial LDAP bind"));
        CHECK(pooler.running());
    }
}

TEST_CASE("auth_type = ldap: options that cannot work stop the start with the key") {
    TempDir dir("pgt-ldap-conf", TestEnv::get().tmp_dir);
    const std::string ini = dir.write_file(
        "bad.ini",
        "[databases]\n* = host=127.0.0.1\n[pgbouncer]\nlisten_port = 6432\nauth_type = ldap\n"
        "auth_ldap_options = ldapserver=h ldapprefix=uid= ldapbasedn=dc=x\n");
    std::string output;
    try {
        run_command("'" + TestEnv::get().pgtether_bin + "' --check '" + ini + "'");
    } catch (const std::runtime_error& e) {
        output = e.what();
    }
    CHECK(output.find("auth_ldap_options") != std::string::npos);
    CHECK(output.find("together with ldapprefix") != std::string::npos);
}
