// auth_hba_file: the parser (PgBouncer's subset of pg_hba.conf, refused lines named) and the
// matcher (first matching line wins; no line means reject).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/hba.hpp"
#include "core/ident_map.hpp"

using namespace pgtether;

namespace {

// @files served from memory, keyed by resolved path.
struct Files {
    std::map<std::string, std::string> contents;
    HbaFileReader reader() const {
        return [this](const std::string& path) -> std::optional<std::string> {
            auto it = contents.find(path);
            if (it == contents.end()) return std::nullopt;
            return it->second;
        };
    }
};

HbaRules parse(const std::string& text, const Files& files = {}) {
    return parse_hba(text, "/etc/pgtether/hba.conf", files.reader());
}

std::string parse_error(const std::string& text, const Files& files = {}) {
    try {
        parse(text, files);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

sockaddr_storage ipv4(const char* text) {
    sockaddr_storage ss{};
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    REQUIRE(inet_pton(AF_INET, text, &sin->sin_addr) == 1);
    return ss;
}

sockaddr_storage ipv6(const char* text) {
    sockaddr_storage ss{};
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    REQUIRE(inet_pton(AF_INET6, text, &sin6->sin6_addr) == 1);
    return ss;
}

// The method of the first matching line, "none" when no line matches.
std::string decide(const HbaRules& rules, const char* transport, const char* address,
                   const char* database, const char* user,
                   ReplicationMode replication = ReplicationMode::None) {
    HbaClient client;
    client.replication = replication;
    sockaddr_storage ss{};
    std::string t = transport;
    client.unix_socket = t == "local";
    client.tls = t == "tls";
    if (!client.unix_socket) {
        ss = std::string(address).find(':') != std::string::npos ? ipv6(address) : ipv4(address);
        client.address = reinterpret_cast<const sockaddr*>(&ss);
    }
    client.database = database;
    client.user = user;
    const HbaRule* rule = match_hba(rules, client);
    return rule ? to_string(rule->method) : "none";
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("hba: a typical file and its decisions") {
    auto rules = parse(
        "# TYPE  DATABASE        USER            ADDRESS                 METHOD\n"
        "local   all             postgres                                peer\n"
        "local   all             all                                     md5\n"
        "host    all             blocked         0.0.0.0/0               reject\n"
        "hostssl app,reports     alice,\"Bob\"     10.0.0.0/8              cert\n"
        "hostnossl app           all             10.1.0.0 255.255.0.0    scram-sha-256\n"
        "host    sameuser        all             192.168.0.0/16          password\n"
        "host    all             all             ::1/128                 trust\n"
        "host    all             all             127.0.0.1/32            md5   # comment\n");
    REQUIRE(rules.rules.size() == 8);
    CHECK(rules.rules[3].line == 5);
    CHECK(rules.rules[3].users.names == std::set<std::string>{"alice", "Bob"});

    CHECK(decide(rules, "local", "", "app", "postgres") == "peer");
    CHECK(decide(rules, "local", "", "app", "alice") == "md5");
    CHECK(decide(rules, "tcp", "10.2.3.4", "app", "blocked") == "reject");
    CHECK(decide(rules, "tls", "10.2.3.4", "app", "blocked") == "reject");
    // hostssl needs TLS; hostnossl needs its absence.
    CHECK(decide(rules, "tls", "10.2.3.4", "reports", "alice") == "cert");
    CHECK(decide(rules, "tcp", "10.2.3.4", "reports", "alice") == "none");
    CHECK(decide(rules, "tls", "10.2.3.4", "reports", "Bob") == "cert");
    CHECK(decide(rules, "tls", "10.2.3.4", "reports", "bob") == "none");  // names are exact
    CHECK(decide(rules, "tcp", "10.1.200.1", "app", "carol") == "scram-sha-256");
    CHECK(decide(rules, "tls", "10.1.200.1", "app", "carol") == "none");
    CHECK(decide(rules, "tcp", "10.1.200.1", "other", "carol") == "none");
    // sameuser: the database named after the user.
    CHECK(decide(rules, "tcp", "192.168.7.7", "dave", "dave") == "password");
    CHECK(decide(rules, "tcp", "192.168.7.7", "app", "dave") == "none");
    CHECK(decide(rules, "tcp", "::1", "app", "erin") == "trust");
    CHECK(decide(rules, "tcp", "127.0.0.1", "app", "erin") == "md5");
    CHECK(decide(rules, "tcp", "127.0.0.2", "app", "erin") == "none");
    // An IPv4 client on a dual-stack socket matches IPv4 rules.
    CHECK(decide(rules, "tcp", "::ffff:127.0.0.1", "app", "erin") == "md5");
}

TEST_CASE("hba: the first matching line wins") {
    auto rules = parse(
        "host all all 127.0.0.1/32 reject\n"
        "host all all 127.0.0.1/32 trust\n");
    CHECK(decide(rules, "tcp", "127.0.0.1", "db", "u") == "reject");
    auto empty = parse("# nothing\n\n");
    CHECK(empty.rules.empty());
    CHECK(decide(empty, "tcp", "127.0.0.1", "db", "u") == "none");
    CHECK(decide(empty, "local", "", "db", "u") == "none");
}

TEST_CASE("hba: address masks") {
    auto rules = parse(
        "host all all 10.0.0.0/8 md5\n"
        "host all all 172.16.0.0 255.240.0.0 password\n"
        "host all all 0.0.0.0/0 reject\n"
        "host all all fd00::/8 trust\n"
        "host all all ::/0 scram-sha-256\n");
    CHECK(decide(rules, "tcp", "10.255.255.255", "d", "u") == "md5");
    CHECK(decide(rules, "tcp", "11.0.0.0", "d", "u") == "reject");
    CHECK(decide(rules, "tcp", "172.31.255.1", "d", "u") == "password");
    CHECK(decide(rules, "tcp", "172.32.0.1", "d", "u") == "reject");
    CHECK(decide(rules, "tcp", "fd12::1", "d", "u") == "trust");
    CHECK(decide(rules, "tcp", "fe80::1", "d", "u") == "scram-sha-256");
    // /0 and /32 edges.
    auto exact = parse("host all all 192.0.2.7/32 trust\n");
    CHECK(decide(exact, "tcp", "192.0.2.7", "d", "u") == "trust");
    CHECK(decide(exact, "tcp", "192.0.2.6", "d", "u") == "none");
    // A /25 mask splits a byte.
    auto half = parse("host all all 192.0.2.128/25 trust\n");
    CHECK(decide(half, "tcp", "192.0.2.200", "d", "u") == "trust");
    CHECK(decide(half, "tcp", "192.0.2.127", "d", "u") == "none");
}

TEST_CASE("hba: @file name lists, relative to the HBA file") {
    Files files;
    files.contents["/etc/pgtether/readers.txt"] = "alice, bob\n# comment\ncarol @more.txt\n";
    files.contents["/etc/pgtether/more.txt"] = "dave\n";
    files.contents["/abs/dbs"] = "app reports\n";
    auto rules = parse("host @/abs/dbs @readers.txt 0.0.0.0/0 md5\n", files);
    REQUIRE(rules.rules.size() == 1);
    CHECK(rules.rules[0].users.names == std::set<std::string>{"alice", "bob", "carol", "dave"});
    CHECK(rules.rules[0].databases.names == std::set<std::string>{"app", "reports"});
    CHECK(decide(rules, "tcp", "1.2.3.4", "app", "dave") == "md5");
    CHECK(decide(rules, "tcp", "1.2.3.4", "other", "dave") == "none");

    CHECK(contains(parse_error("host all @missing.txt 0.0.0.0/0 md5\n", files),
                   "cannot read @missing.txt (/etc/pgtether/missing.txt)"));
    Files loop;
    loop.contents["/etc/pgtether/self.txt"] = "@self.txt\n";
    CHECK(contains(parse_error("host all @self.txt 0.0.0.0/0 md5\n", loop), "nested too deeply"));

    // Found by fuzz_hba (tests/fuzz/crashes/hba/nested_file_bomb): nine files, each naming the
    // next eight times, nest only nine deep but would be read 8^9 times.
    Files bomb;
    for (int i = 1; i <= 8; ++i) {
        std::string line;
        for (int j = 0; j < 8; ++j)
            line += "@f" + std::to_string(i + 1) + " ";
        bomb.contents["/etc/pgtether/f" + std::to_string(i)] = line + "\n";
    }
    bomb.contents["/etc/pgtether/f9"] = "x\n";
    CHECK(contains(parse_error("host all @f1 0.0.0.0/0 md5\n", bomb),
                   "more than 1000 @file references in all"));
    // A file named a few times over is fine.
    bomb.contents["/etc/pgtether/f3"] = "x\n";
    CHECK(parse("host all @f1 0.0.0.0/0 md5\n", bomb).rules.size() == 1);
}

TEST_CASE("hba: quoting and keywords") {
    // Quoted keywords are plain names; "" is a quote inside a name.
    auto rules = parse("host \"all\" \"sameuser\",\"a\"\"b\" 127.0.0.1/32 trust\n");
    REQUIRE(rules.rules.size() == 1);
    CHECK_FALSE(rules.rules[0].databases.all);
    CHECK(rules.rules[0].databases.names == std::set<std::string>{"all"});
    CHECK(rules.rules[0].users.names == std::set<std::string>{"sameuser", "a\"b"});
    CHECK(decide(rules, "tcp", "127.0.0.1", "all", "a\"b") == "trust");
    CHECK(decide(rules, "tcp", "127.0.0.1", "app", "a\"b") == "none");
    // Lists may have spaces around commas.
    auto spaced = parse("host app , reports all 127.0.0.1/32 trust\n");
    CHECK(spaced.rules[0].databases.names == std::set<std::string>{"app", "reports"});
}

TEST_CASE("hba: `replication` lines, and a mask with host bits") {
    // `replication` matches physical replication connections only; an address with bits
    // outside its mask is kept with PgBouncer's warning and matches no client.
    auto rules = parse(
        "host replication all 0.0.0.0/0 reject\n"
        "host replication,app all 0.0.0.0/0 password\n"
        "hostssl all all 192.168.1.1/0 trust\n"
        "host all all 10.0.0.1/8 trust\n"
        "host all all 0.0.0.0/0 md5\n");
    REQUIRE(rules.rules.size() == 5);
    CHECK(decide(rules, "tcp", "10.0.0.1", "replication", "u") == "md5");
    CHECK(decide(rules, "tcp", "10.0.0.1", "app", "u") == "password");
    CHECK(decide(rules, "tls", "192.168.1.1", "db", "u") == "md5");
    CHECK(decide(rules, "tcp", "10.0.0.1", "db", "u") == "md5");
    // Physical replication: only the `replication` lines (the first one matching), never `all`;
    // logical replication matches by database name, as any connection.
    CHECK(decide(rules, "tcp", "10.0.0.1", "db", "u", ReplicationMode::Physical) == "reject");
    CHECK(decide(rules, "tcp", "10.0.0.1", "app", "u", ReplicationMode::Logical) == "password");
    CHECK(decide(rules, "tcp", "10.0.0.1", "db", "u", ReplicationMode::Logical) == "md5");
    auto physical_only = parse(
        "host all all 0.0.0.0/0 trust\n"
        "host replication,app repl 0.0.0.0/0 scram-sha-256\n");
    CHECK(decide(physical_only, "tcp", "10.0.0.1", "db", "repl", ReplicationMode::Physical) ==
          "scram-sha-256");
    CHECK(decide(physical_only, "tcp", "10.0.0.1", "db", "u", ReplicationMode::Physical) ==
          "none");
    CHECK(decide(physical_only, "tcp", "10.0.0.1", "replication", "u") == "trust");
    REQUIRE(rules.warnings.size() == 2);
    CHECK(rules.warnings[0] ==
          "address does not match mask in /etc/pgtether/hba.conf line #3: 192.168.1.1 / 0.0.0.0");
    CHECK(rules.warnings[1] ==
          "address does not match mask in /etc/pgtether/hba.conf line #4: 10.0.0.1 / 255.0.0.0");
}

TEST_CASE("hba: refused lines name the file and line") {
    struct Case {
        const char* text;
        const char* message;
    };
    const Case cases[] = {
        {"hostgssenc all all 0.0.0.0/0 md5\n", "connection type \"hostgssenc\" is not supported"},
        {"remote all all 0.0.0.0/0 md5\n", "invalid connection type \"remote\""},
        {"host samerole all 0.0.0.0/0 md5\n", "\"samerole\" is not supported"},
        {"host all +admins 0.0.0.0/0 md5\n", "group membership (\"+admins\") is not supported"},
        {"host all all db.example.com md5\n", "invalid IP address \"db.example.com\""},
        {"host all all \"all\" md5\n", "invalid IP address \"all\""},
        {"host all all samenet md5\n", "invalid IP address \"samenet\""},
        {"host all all 10.0.0.0/33 md5\n", "invalid CIDR mask"},
        {"host all all 10.0.0.0 md5\n", "invalid netmask \"md5\""},
        {"host all all 10.0.0.0/8 ident\n", "authentication method \"ident\" is not supported"},
        {"host all all 10.0.0.0/8 md5 clientcert=verify-ca\n",
         "options such as \"clientcert=verify-ca\" are not supported"},
        {"host all all 10.0.0.0/8 md5 map=x\n", "map= applies to peer and cert authentication only"},
        {"local all all peer map=x\n", "map=x needs auth_ident_file"},
        {"local all all peer map=\n", "map= without a map name"},
        {"local all all peer map=x map=y\n", "unexpected \"map=y\" after the authentication"},
        {"host all all 10.0.0.0/8 peer\n", "peer authentication is only supported on local"},
        {"hostnossl all all 10.0.0.0/8 cert\n", "cert authentication is only supported on host"},
        {"local all all cert\n", "cert authentication is only supported on host"},
        {"local all\n", "missing user name"},
        {"local all all\n", "missing authentication method"},
        {"host all all\n", "missing address"},
        {"host all all 10.0.0.0/8\n", "missing authentication method"},
        // A comma continues the list across spaces: the address became a user name.
        {"host all a, 10.0.0.0/8 md5\n", "invalid IP address \"md5\""},
        {"host all \"unterminated 10.0.0.0/8 md5\n", "unterminated quoted name"},
        {", host all a 10.0.0.0/8 md5\n", "unexpected comma"},
        {"host,local all a 10.0.0.0/8 md5\n", "a list is not allowed as connection type"},
        {"host all a,,b 10.0.0.0/8 md5\n", "unexpected comma"},
        {"local all a,\n", "list ends with a comma"},
    };
    for (const auto& c : cases) {
        std::string text = c.text;
        CAPTURE(text);
        std::string error = parse_error(std::string("# header\n") + c.text);
        CHECK(contains(error, "/etc/pgtether/hba.conf:2: "));
        CAPTURE(error);
        CHECK(contains(error, c.message));
    }
}

TEST_CASE("hba: load_hba_file reports an unreadable file") {
    try {
        load_hba_file("/nonexistent/hba.conf");
        FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        CHECK(contains(e.what(), "/nonexistent/hba.conf: cannot read HBA file"));
    }
}

// PgBouncer 1.18's own HBA vectors (test/hba_test.rules and test/hba_test.eval, ISC licence: see
// tests/unit/data/pgbouncer-hba/COPYRIGHT), run as its test/hba_test.c runs them: every line of
// the .eval file is "METHOD<TAB>DATABASE<TAB>USER<TAB>ADDRESS[<TAB>tls]" (tab runs separate; lines
// starting with '#' and blank lines are skipped), ADDRESS "unix" meaning the Unix socket, and the
// method of the first matching rule must be METHOD ("reject" when no rule matches).
TEST_CASE("PgBouncer's HBA test vectors") {
    const std::string dir = std::string(PGTETHER_TEST_DATA_DIR) + "/pgbouncer-hba";
    auto read = [](const std::string& path) {
        std::ifstream in(path);
        REQUIRE(in.good());
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    };
    HbaRules rules = parse_hba(read(dir + "/hba_test.rules"), dir + "/hba_test.rules",
                               [](const std::string&) { return std::nullopt; });
    CHECK(rules.rules.size() == 28);

    std::istringstream eval(read(dir + "/hba_test.eval"));
    std::string line;
    int line_number = 0;
    int checked = 0;
    while (std::getline(eval, line)) {
        ++line_number;
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> tokens;
        for (std::size_t pos = 0; pos < line.size();) {
            std::size_t start = line.find_first_not_of('\t', pos);
            if (start == std::string::npos) break;
            std::size_t end = line.find('\t', start);
            if (end == std::string::npos) end = line.size();
            tokens.push_back(line.substr(start, end - start));
            pos = end;
        }
        if (tokens.empty()) continue;
        REQUIRE_MESSAGE(tokens.size() >= 4, "hba_test.eval:" << line_number);
        const bool unix_socket = tokens[3] == "unix";
        const char* transport = unix_socket ? "local" : tokens.size() > 4 ? "tls" : "tcp";
        INFO("hba_test.eval:" << line_number << ": " << line);
        std::string method = decide(rules, transport, unix_socket ? nullptr : tokens[3].c_str(),
                                    tokens[1].c_str(), tokens[2].c_str());
        CHECK((method == "none" ? "reject" : method) == tokens[0]);
        ++checked;
    }
    CHECK(checked == 57);
}

TEST_CASE("hba: all as an address matches every TCP client, and no Unix-socket client") {
    auto rules = parse(
        "hostssl all all all cert\n"
        "host    all all all scram-sha-256\n");
    CHECK(rules.rules[0].any_address);
    CHECK(decide(rules, "tls", "10.1.2.3", "app", "alice") == "cert");
    CHECK(decide(rules, "tls", "2001:db8::1", "app", "alice") == "cert");
    CHECK(decide(rules, "tcp", "192.0.2.7", "app", "alice") == "scram-sha-256");
    CHECK(decide(rules, "tcp", "::1", "app", "alice") == "scram-sha-256");
    CHECK(decide(rules, "local", "", "app", "alice") == "none");
}

namespace {

IdentMaps ident(const std::string& text) { return parse_ident_maps(text, "/etc/pgtether/ident"); }

std::string ident_error(const std::string& text) {
    try {
        ident(text);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("ident maps: which system name may log in as which user") {
    IdentMaps maps = ident(
        "# MAPNAME  SYSTEM-USERNAME  PG-USERNAME\n"
        "ops        deploy           app_owner\n"
        "ops        deploy           app_reader   # a comment\n"
        "ops        \"svc user\"       app_reader\n"
        "admins     alice            all\n"
        "quoted     bob              \"all\"\n");
    REQUIRE(maps.maps.size() == 3);
    CHECK(maps.maps.at("ops").size() == 3);
    struct Case {
        const char* map;
        const char* system;
        const char* user;
        bool allowed;
    };
    const Case cases[] = {
        {"ops", "deploy", "app_owner", true},
        {"ops", "deploy", "app_reader", true},
        {"ops", "deploy", "postgres", false},
        {"ops", "svc user", "app_reader", true},
        {"ops", "svc user", "app_owner", false},
        {"ops", "alice", "app_owner", false},
        {"admins", "alice", "anyone", true},   // all, unquoted: every user
        {"admins", "deploy", "anyone", false},
        {"quoted", "bob", "all", true},         // "all" quoted is a user called all
        {"quoted", "bob", "someone", false},
        {"missing", "deploy", "app_owner", false},
        {"", "alice", "alice", true},           // no map: the same name only
        {"", "alice", "bob", false},
        {"", "", "", false},                    // no system name known
        {"admins", "", "anyone", false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.map);
        CAPTURE(c.system);
        CAPTURE(c.user);
        CHECK(external_name_allows(&maps, c.map, c.system, c.user) == c.allowed);
    }
    CHECK_FALSE(external_name_allows(nullptr, "ops", "deploy", "app_owner"));
    const IdentMapping* line = match_ident(maps, "ops", "deploy", "app_reader");
    REQUIRE(line != nullptr);
    CHECK(line->line == 3);
}

TEST_CASE("ident maps: refused lines name the file and line") {
    struct Case {
        const char* text;
        const char* message;
    };
    const Case cases[] = {
        {"ops deploy\n", "expected MAPNAME SYSTEM-USERNAME PG-USERNAME"},
        {"ops deploy app extra\n", "unexpected \"extra\" after MAPNAME"},
        {"ops /^(.*)$ \\1\n", "regular expressions are not supported as system user name"},
        {"ops deploy +admins\n", "group membership (\"+admins\") is not supported"},
        {"ops \"/^x$\" app\n", "regular expressions are not supported as system user name"},
        {"ops deploy \\1\n", "\\1 substitution is not supported"},
        {"ops deploy a,b\n", "a list is not allowed as database user name"},
        {"include other.conf\n", "\"include\" is not supported"},
        {"include_dir conf.d\n", "\"include_dir\" is not supported"},
        {"ops \"unterminated app\n", "unterminated quoted name"},
    };
    for (const auto& c : cases) {
        std::string text = c.text;
        CAPTURE(text);
        std::string error = ident_error(std::string("# header\n") + c.text);
        CAPTURE(error);
        CHECK(contains(error, "/etc/pgtether/ident:2: "));
        CHECK(contains(error, c.message));
    }
}

TEST_CASE("hba: map= names a map of auth_ident_file") {
    IdentMaps maps = ident("ops deploy app_owner\n");
    HbaRules rules = parse_hba(
        "local all all peer map=ops\n"
        "hostssl all all all cert map=ops\n"
        "hostssl all all all cert\n",
        "/etc/pgtether/hba.conf", Files{}.reader(), &maps);
    CHECK(rules.rules[0].ident_map == "ops");
    CHECK(rules.rules[1].ident_map == "ops");
    CHECK(rules.rules[2].ident_map.empty());
    try {
        (void)parse_hba("local all all peer map=other\n", "/etc/pgtether/hba.conf",
                        Files{}.reader(), &maps);
        FAIL("an unknown map was accepted");
    } catch (const ConfigError& e) {
        CHECK(contains(e.what(), "/etc/pgtether/hba.conf:1: "));
        CHECK(contains(e.what(), "ident map \"other\" is not in /etc/pgtether/ident"));
    }
}

TEST_CASE("ident maps: load_ident_file reports an unreadable file") {
    try {
        (void)load_ident_file("/nonexistent/ident.conf");
        FAIL("no error");
    } catch (const ConfigError& e) {
        CHECK(contains(e.what(), "/nonexistent/ident.conf: cannot read ident map file"));
    }
}

TEST_CASE("hba: ldap lines carry their options (PgBouncer 1.25), checked when read") {
    auto rules = parse(
        "host all all 10.0.0.0/8 ldap ldapserver=ldap.example.net ldapport=1389 "
        "ldapprefix=\"uid=\" ldapsuffix=\",ou=people,dc=example,dc=net\"\n"
        "host all all 0.0.0.0/0 ldap ldapserver=a,ldaptls=1 "
        "ldapurl=\"ldap://b/dc=example,dc=net?cn?one\"\n");
    REQUIRE(rules.rules.size() == 2);
    const auto& simple = rules.rules[0];
    CHECK(simple.method == HbaMethod::Ldap);
    REQUIRE(simple.ldap);
    CHECK(simple.ldap->uris() == "ldap://ldap.example.net:1389");
    CHECK(ldap_simple_bind_dn(*simple.ldap, "alice") == "uid=alice,ou=people,dc=example,dc=net");
    const auto& url = rules.rules[1];
    REQUIRE(url.ldap);
    CHECK(url.ldap->start_tls);
    CHECK(url.ldap->uris() == "ldap://b:389");  // ldapurl's host replaces ldapserver's
    CHECK(url.ldap->base_dn == "dc=example,dc=net");
    CHECK(ldap_search_filter(*url.ldap, "bob") == "(cn=bob)");
    CHECK(decide(rules, "tcp", "10.1.2.3", "db", "u") == "ldap");
    // What cannot work is refused with the line, as every other HBA mistake.
    CHECK(contains(parse_error("host all all 0.0.0.0/0 md5\nhost all all 0.0.0.0/0 ldap\n"),
                   "hba.conf:2: authentication method \"ldap\" requires argument"));
    CHECK(contains(parse_error("host all all 0.0.0.0/0 ldap ldapserver=h ldapfoo=1\n"),
                   "invalid LDAP key parameter: \"ldapfoo\""));
    CHECK(contains(parse_error("host all all 0.0.0.0/0 ldap ldapserver=h \"ldapbasedn\"\n"),
                   "is not key=value"));
}
