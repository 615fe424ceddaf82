// Config loader: value parsers, the ini reader, whole files (Debian's example, a production-style
// file, conf/pgtether.ini), %include, every error class and the unsupported-key report.
//
// Behaviour expected here was checked against PgBouncer 1.18 itself (a config that loads gets as
// far as "should not run as root"); the places where pgtether is deliberately stricter say so.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "core/config.hpp"
#include "core/config_keys.hpp"
#include "core/config_values.hpp"
#include "core/ini_file.hpp"

using namespace pgtether;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string kData = PGTETHER_TEST_DATA_DIR;
const std::string kConf = std::string(PGTETHER_TEST_DATA_DIR) + "/../../../conf";
const std::string kDocs = std::string(PGTETHER_TEST_DATA_DIR) + "/../../../docs";

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// 1-based number of the first line of `path` that contains `needle`.
int line_of(const std::string& path, const std::string& needle) {
    std::istringstream in(read_text(path));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.find(needle) != std::string::npos) return n;
    }
    FAIL("\"" << needle << "\" not in " << path);
    return 0;
}

// Changes the working directory for one test: %include paths are relative to it.
class CwdGuard {
  public:
    explicit CwdGuard(const fs::path& dir) : saved_(fs::current_path()) { fs::current_path(dir); }
    ~CwdGuard() { fs::current_path(saved_); }
    CwdGuard(const CwdGuard&) = delete;
    CwdGuard& operator=(const CwdGuard&) = delete;

  private:
    fs::path saved_;
};

// A scratch directory for config files written by a test.
class TempDir {
  public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "pgtether-config-XXXXXX").string();
        REQUIRE(mkdtemp(pattern.data()) != nullptr);
        dir_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string write(const std::string& name, const std::string& text) const {
        auto path = dir_ / name;
        fs::create_directories(path.parent_path());
        std::ofstream(path, std::ios::binary) << text;
        return path.string();
    }
    const fs::path& path() const { return dir_; }

  private:
    fs::path dir_;
};

std::optional<ConfigError> error_of(const std::string& path) {
    try {
        load_config(path);
    } catch (const ConfigError& e) {
        return e;
    }
    return std::nullopt;
}

// Writes `text` as a config file and returns the ConfigError loading it must produce.
ConfigError error_from_text(const std::string& text) {
    TempDir tmp;
    auto path = tmp.write("t.ini", text);
    auto err = error_of(path);
    REQUIRE_MESSAGE(err.has_value(), "no error for:\n" << text);
    CHECK(err->file() == path);
    return *err;
}

std::shared_ptr<const Config> load_text(const std::string& text) {
    TempDir tmp;
    return load_config(tmp.write("t.ini", text));
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

const std::string kMain = "[pgbouncer]\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Value parsers

TEST_CASE("workers: a count from 1 to 64, or auto for one per CPU") {
    CHECK(*parse_worker_count("1", 8, 64).value == 1);
    CHECK(*parse_worker_count("4", 8, 64).value == 4);
    CHECK(*parse_worker_count("auto", 8, 64).value == 8);
    CHECK(*parse_worker_count("AUTO", 8, 64).value == 8);
    CHECK(*parse_worker_count("auto", 0, 64).value == 1);    // the CPU count is unknown
    CHECK(*parse_worker_count("auto", 256, 64).value == 64);  // bounded
    CHECK_FALSE(parse_worker_count("0", 8, 64));
    CHECK_FALSE(parse_worker_count("65", 8, 64));
    CHECK_FALSE(parse_worker_count("autos", 8, 64));
    CHECK(load_text("[pgbouncer]\nworkers = 3\n")->workers == 3);
    CHECK(load_text("[pgbouncer]\n")->workers == 1);
    CHECK(load_text("[pgbouncer]\nworkers = auto\n")->workers >= 1);
}

TEST_CASE("integers are read like strtol(base 0), as PgBouncer's cf_set_int") {
    CHECK(*parse_integer("6432", 1, 65535).value == 6432);
    CHECK(*parse_integer("+12", 0, 100).value == 12);
    CHECK(*parse_integer("-5", -10, 10).value == -5);
    CHECK(*parse_integer("0x1F", 0, 100).value == 31);
    CHECK(*parse_integer("010", 0, 100).value == 8);  // leading 0 = octal, as in PgBouncer
    CHECK(*parse_integer("0", 0, 100).value == 0);
    CHECK_FALSE(parse_integer("08", 0, 100));  // PgBouncer refuses it too
    CHECK_FALSE(parse_integer("", 0, 100));
    CHECK_FALSE(parse_integer("12abc", 0, 100));
    CHECK_FALSE(parse_integer("0x", 0, 100));
    CHECK_FALSE(parse_integer(" 12", 0, 100));
    auto out = parse_integer("70000", 1, 65535);
    REQUIRE_FALSE(out);
    CHECK(contains(out.error, "out of range"));
    CHECK(contains(out.error, "1 to 65535"));
    CHECK_FALSE(parse_integer("99999999999999999999999", 0, 100));
}

TEST_CASE("decimal integers for connection strings") {
    CHECK(*parse_decimal("5433", 1, 65535).value == 5433);
    CHECK(*parse_decimal("010", 0, 100).value == 10);  // atoi() is decimal
    CHECK_FALSE(parse_decimal("0x10", 0, 100));
    CHECK_FALSE(parse_decimal("10x", 0, 100));  // atoi would read 10; refused
    CHECK_FALSE(parse_decimal("-1", 0, 100));
}

TEST_CASE("booleans are integers, as in PgBouncer") {
    CHECK(*parse_boolean("0").value == false);
    CHECK(*parse_boolean("1").value == true);
    CHECK(*parse_boolean("2").value == true);
    CHECK(*parse_boolean("-1").value == true);
    for (auto word : {"on", "off", "true", "false", "yes", "no", ""}) {
        auto b = parse_boolean(word);
        CHECK_FALSE(b);
        CHECK(contains(b.error, "0 (off) or 1 (on)"));
    }
}

TEST_CASE("time values are seconds with fractions, no units, truncated to microseconds") {
    CHECK(*parse_seconds("30").value == 30s);
    CHECK(*parse_seconds("1.5").value == 1500ms);
    CHECK(*parse_seconds(".25").value == 250ms);
    CHECK(*parse_seconds("5.").value == 5s);
    CHECK(*parse_seconds("+2").value == 2s);
    CHECK(*parse_seconds("2e3").value == 2000s);
    CHECK(*parse_seconds("1.5E-3").value == 1500us);
    CHECK(*parse_seconds("0.000001").value == 1us);
    CHECK(*parse_seconds("0.0000015").value == 1us);  // truncated like (usec_t)(USEC * v)
    CHECK(*parse_seconds("0").value == 0us);
    for (auto bad : {"10s", "1min", "-1", "", "abc", "1e", "inf", "nan", "0x10", "1,5", "1 5"}) {
        CHECK_MESSAGE(!parse_seconds(bad), bad);
    }
    CHECK(contains(parse_seconds("-1").error, "negative"));
    CHECK(contains(parse_seconds("1e10").error, "out of range"));
}

TEST_CASE("file modes must be octal with a leading 0") {
    CHECK(*parse_file_mode("0777").value == 0777);
    CHECK(*parse_file_mode("0660").value == 0660);
    CHECK(*parse_file_mode("00").value == 0);
    CHECK(*parse_file_mode("07777").value == 07777);
    CHECK_FALSE(parse_file_mode("777"));  // PgBouncer would read decimal 777 = 01411
    CHECK_FALSE(parse_file_mode("0999"));
    CHECK_FALSE(parse_file_mode("010000"));
    CHECK_FALSE(parse_file_mode(""));
    CHECK_FALSE(parse_file_mode("0x1ff"));
}

TEST_CASE("choices are case-insensitive like cf_set_lookup") {
    constexpr std::string_view modes[] = {"session", "transaction"};
    CHECK(*parse_choice("Transaction", modes).value == "transaction");
    auto bad = parse_choice("txn", modes);
    CHECK_FALSE(bad);
    CHECK(bad.error == "expected one of: session, transaction");
}

TEST_CASE("lists split on commas and whitespace") {
    CHECK(split_list("") == std::vector<std::string>{});
    CHECK(split_list("*") == std::vector<std::string>{"*"});
    CHECK(split_list("a, b,c  d,,") == std::vector<std::string>{"a", "b", "c", "d"});
    CHECK(split_list(" 127.0.0.1 ,::1 ") == std::vector<std::string>{"127.0.0.1", "::1"});
}

TEST_CASE("connection strings follow PgBouncer's cstr_get_pair") {
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    auto ok = [](std::string_view text) {
        auto p = parse_connstring(text);
        REQUIRE_MESSAGE(p, text << ": " << p.error);
        return *p.value;
    };
    CHECK(ok("") == Pairs{});
    CHECK(ok("host=x port=5") == Pairs{{"host", "x"}, {"port", "5"}});
    CHECK(ok("  host = x   port =5 ") == Pairs{{"host", "x"}, {"port", "5"}});
    CHECK(ok("host=x\tport=5") == Pairs{{"host", "x"}, {"port", "5"}});  // tab separates here
    CHECK(ok("password='it''s a secret'") == Pairs{{"password", "it's a secret"}});
    CHECK(ok("password='a\\b'") == Pairs{{"password", "a\\b"}});  // no backslash escapes
    CHECK(ok("q='''' x=1") == Pairs{{"q", "'"}, {"x", "1"}});
    CHECK(ok("a=b=c") == Pairs{{"a", "b=c"}});

    auto err = [](std::string_view text) {
        auto p = parse_connstring(text);
        REQUIRE_MESSAGE(!p, text);
        return p.error;
    };
    CHECK(contains(err("host='x y"), "unterminated quoted value"));
    CHECK(contains(err("password='a\\'b'"), "unexpected text after the closing quote"));
    CHECK(contains(err("host"), "missing '=' after \"host\""));
    CHECK(contains(err("host x"), "missing '='"));
    CHECK(contains(err("host="), "empty value"));
    CHECK(contains(err("host=''"), "empty value"));
    CHECK(contains(err("=x"), "missing parameter name"));
    CHECK(contains(err("host='x'y"), "unexpected text"));
}

// ---------------------------------------------------------------------------------------------
// The ini reader

TEST_CASE("ini reader: sections, keys, comments and line numbers") {
    auto entries = parse_ini_text(
        "; comment\n"
        "# another comment\n"
        "\n"
        "  [pgbouncer]  ; trailing comment\n"
        "listen_port=6432\n"
        "\tserver_reset_query =  DISCARD ALL   \r\n"
        "logfile = /var/log/x.log ; not a comment\n"
        "[databases]\n"
        "\"my db\" = host=x\n"
        "\"a\"\"b\" = \n"
        "my.db-1* =\n",
        "mem.ini");
    REQUIRE(entries.size() == 8);
    CHECK(entries[0].kind == IniEntry::Kind::Section);
    CHECK(entries[0].name == "pgbouncer");
    CHECK(entries[0].line == 4);
    CHECK(entries[1].name == "listen_port");
    CHECK(entries[1].value == "6432");
    CHECK(entries[2].name == "server_reset_query");
    CHECK(entries[2].value == "DISCARD ALL");
    CHECK(entries[2].line == 6);
    CHECK(entries[3].value == "/var/log/x.log ; not a comment");
    CHECK(entries[4].name == "databases");
    CHECK(entries[5].name == "my db");
    CHECK(entries[5].value == "host=x");
    CHECK(entries[6].name == "a\"b");
    CHECK(entries[6].value == "");
    CHECK(entries[7].name == "my.db-1*");
    for (const auto& e : entries)
        CHECK(e.file == "mem.ini");
}

TEST_CASE("ini reader: syntax errors name the file and line") {
    struct Case {
        const char* text;
        int line;
        const char* key;
        const char* message;
    };
    const Case cases[] = {
        {"[pgbouncer\n", 1, "", "missing ']'"},
        {"\n[pgbouncer] listen_port=1\n", 2, "", "unexpected text after section header"},
        {"[pgbouncer]\nlisten_port 6432\n", 2, "listen_port", "missing '='"},
        {"[databases]\nmy db = host=x\n", 2, "my", "must be written in double quotes"},
        {"[databases]\nmydb@x = host=x\n", 2, "mydb", "missing '='"},
        {"[databases]\n\"my db = host=x\n", 2, "", "unterminated quoted name"},
        {"[databases]\n\"\" = host=x\n", 2, "", "empty quoted name"},
        {"[pgbouncer]\n= 5\n", 2, "", "syntax error"},
        {"[pgbouncer]\n\n\n@x = 1\n", 4, "", "syntax error"},
        {"%define x\n", 1, "", "unknown directive"},
        {"%INCLUDE x.ini\n", 1, "", "unknown directive"},
        {"[pgbouncer]\n%include   \n", 2, "", "%include needs a file name"},
        {"%include\n", 1, "", "%include needs a file name"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        try {
            parse_ini_text(c.text, "mem.ini");
            FAIL("no error");
        } catch (const ConfigError& e) {
            CHECK(e.file() == "mem.ini");
            CHECK(e.line() == c.line);
            CHECK(e.key() == c.key);
            CHECK(contains(e.what(), c.message));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Whole files

TEST_CASE("Debian's commented example pgbouncer.ini loads with its values") {
    auto path = kData + "/debian-pgbouncer.ini";
    auto cfg = load_config(path);
    CHECK(cfg->config_file == fs::absolute(path).lexically_normal().string());
    CHECK(cfg->logfile == "/var/log/postgresql/pgbouncer.log");
    CHECK(cfg->pidfile == "/var/run/postgresql/pgbouncer.pid");
    CHECK(cfg->listen_addr == std::vector<std::string>{"localhost"});
    CHECK(cfg->listen_port == 6432);
    CHECK(cfg->unix_socket_dir == "/var/run/postgresql");
    CHECK(cfg->auth_type == AuthType::Md5);
    CHECK(cfg->auth_file == "/etc/pgbouncer/userlist.txt");
    CHECK(cfg->databases.empty());
    CHECK_FALSE(cfg->fallback_database);
    CHECK(cfg->users.empty());
    // Everything else is commented out: PgBouncer 1.18's defaults.
    CHECK(cfg->pool_mode == PoolMode::Session);
    CHECK(cfg->max_client_conn == 100);
    CHECK(cfg->default_pool_size == 20);
    CHECK(cfg->server_lifetime == 3600s);
}

TEST_CASE("a production-style pgbouncer.ini loads with its values and unsupported keys") {
    auto path = kData + "/production.ini";
    auto cfg = load_config(path);

    REQUIRE(cfg->databases.size() == 6);
    const auto* orders = cfg->find_database("orders");
    REQUIRE(orders != nullptr);
    CHECK(orders->host == "10.0.1.15");
    CHECK(orders->port == 5432);
    CHECK(orders->dbname == "orders_prod");
    CHECK(orders->pool_size == 40);
    CHECK(orders->reserve_pool_size == 5);
    CHECK(orders->connect_query == "SET statement_timeout = '30s'");
    CHECK_FALSE(orders->min_pool_size);
    CHECK_FALSE(orders->pool_mode);
    CHECK(orders->source_file == path);
    CHECK(orders->source_line == line_of(path, "orders = "));

    const auto* ro = cfg->find_database("orders_ro");
    REQUIRE(ro != nullptr);
    CHECK(ro->port == 5433);
    CHECK(ro->user == "readonly");
    CHECK(ro->password == "s3cr3t'pw\\x");
    CHECK(ro->pool_mode == PoolMode::Session);
    CHECK(ro->max_db_connections == 60);

    const auto* analytics = cfg->find_database("analytics");
    REQUIRE(analytics != nullptr);
    CHECK(analytics->host == "/var/run/postgresql");
    CHECK(analytics->application_name == "pgbouncer-analytics");
    CHECK(analytics->client_encoding == "UTF8");
    CHECK(analytics->datestyle == "ISO");
    CHECK(analytics->timezone == "UTC");

    const auto* legacy = cfg->find_database("legacy");
    REQUIRE(legacy != nullptr);
    CHECK(legacy->auth_user == "pgbouncer_auth");
    CHECK(legacy->min_pool_size == 2);
    CHECK(legacy->port == 6543);

    REQUIRE(cfg->fallback_database);
    CHECK(cfg->fallback_database->name == "*");
    CHECK(cfg->fallback_database->host == "10.0.1.15");
    CHECK(cfg->find_database("anything_else") == &*cfg->fallback_database);

    REQUIRE(cfg->users.size() == 3);
    CHECK(cfg->find_user("batch")->pool_mode == PoolMode::Session);
    CHECK(cfg->find_user("batch")->max_user_connections == 10);
    CHECK(cfg->find_user("web")->pool_mode == PoolMode::Transaction);
    CHECK_FALSE(cfg->find_user("web")->max_user_connections);
    CHECK(cfg->find_user("etl")->max_user_connections == 4);
    CHECK(cfg->find_user("etl")->query_timeout == std::chrono::seconds(300));  // 1.24
    CHECK(cfg->find_user("nobody") == nullptr);

    CHECK(cfg->logfile == "/var/log/pgbouncer/pgbouncer.log");
    CHECK(cfg->pidfile == "/run/pgbouncer/pgbouncer.pid");
    CHECK(cfg->listen_addr == std::vector<std::string>{"0.0.0.0", "::"});
    CHECK(cfg->listen_port == 6432);
    CHECK(cfg->unix_socket_dir == "/run/pgbouncer");
    CHECK(cfg->unix_socket_mode == 0770);
    CHECK(cfg->unix_socket_group == "postgres");
    CHECK(cfg->auth_type == AuthType::ScramSha256);
    CHECK(cfg->auth_file == "/etc/pgbouncer/userlist.txt");
    CHECK(cfg->auth_user == "pgbouncer_auth");
    CHECK(cfg->auth_query == "SELECT usename, passwd FROM pgbouncer.get_auth($1)");
    CHECK(cfg->client_tls_sslmode == SslMode::Require);
    CHECK(cfg->client_tls_key_file == "/etc/pgbouncer/server.key");
    CHECK(cfg->client_tls_cert_file == "/etc/pgbouncer/server.crt");
    CHECK(cfg->client_tls_ca_file == "/etc/ssl/certs/ca-certificates.crt");
    CHECK(cfg->client_tls_protocols == "secure");
    CHECK(cfg->server_tls_sslmode == SslMode::Disable);
    CHECK(cfg->admin_users == std::vector<std::string>{"postgres", "pgbouncer_admin"});
    CHECK(cfg->stats_users == std::vector<std::string>{"datadog", "prometheus"});
    CHECK(cfg->pool_mode == PoolMode::Transaction);
    CHECK(cfg->server_reset_query == "DISCARD ALL");
    CHECK_FALSE(cfg->server_reset_query_always);
    CHECK(cfg->ignore_startup_parameters ==
          std::vector<std::string>{"extra_float_digits", "options"});
    CHECK(cfg->server_check_query == "select 1");
    CHECK(cfg->server_check_delay == 10s);
    CHECK(cfg->max_client_conn == 5000);
    CHECK(cfg->default_pool_size == 25);
    CHECK(cfg->min_pool_size == 5);
    CHECK(cfg->reserve_pool_size == 5);
    CHECK(cfg->reserve_pool_timeout == 2500ms);
    CHECK(cfg->max_db_connections == 100);
    CHECK(cfg->max_user_connections == 200);
    CHECK(cfg->server_round_robin);
    CHECK_FALSE(cfg->log_connections);
    CHECK_FALSE(cfg->log_disconnections);
    CHECK(cfg->log_pooler_errors);
    CHECK(cfg->stats_period == 30s);
    CHECK(cfg->verbose == 1);
    CHECK(cfg->server_lifetime == 1800s);
    CHECK(cfg->server_idle_timeout == 300s);
    CHECK(cfg->server_connect_timeout == 5s);
    CHECK(cfg->server_login_retry == 3s);
    CHECK(cfg->query_timeout == 0s);
    CHECK(cfg->query_wait_timeout == 60s);
    CHECK(cfg->client_idle_timeout == 0s);
    CHECK(cfg->client_login_timeout == 30s);
    CHECK(cfg->idle_transaction_timeout == 120s);
    CHECK(cfg->pkt_buf == 8192);
    CHECK(cfg->max_packet_size == 1073741824);
    CHECK(cfg->listen_backlog == 4096);
    CHECK(cfg->tcp_keepalive);
    CHECK(cfg->tcp_keepcnt == 5);
    CHECK(cfg->tcp_keepidle == 60);
    CHECK(cfg->tcp_keepintvl == 10);
    CHECK(cfg->tcp_user_timeout == 30000);
    CHECK(cfg->application_name_add_host);
    CHECK(cfg->max_prepared_statements == 100);
    // pgtether's own keys keep their defaults.
    CHECK(cfg->advisory_lock_tracking == LockTracking::On);
    CHECK(cfg->advisory_lock_functions.empty());
    CHECK(cfg->advisory_lock_discovery);
    CHECK(cfg->advisory_lock_discovery_interval == 60s);
    CHECK(cfg->advisory_lock_catalog_check_interval == 1s);
    CHECK(cfg->tethered_idle_timeout == 0s);

    // Every key of it is acted on: nothing is reported as recognised but not supported.
    // With session_settings = replay (the default) every setting is replayed, search_path too.
    CHECK(cfg->track_extra_parameters == std::vector<std::string>{"IntervalStyle", "search_path"});
    REQUIRE(cfg->find_database("reporting") != nullptr);
    CHECK(cfg->find_database("reporting")->server_lifetime == std::optional<Duration>(600s));
    CHECK(server_lifetime_for(*cfg, *cfg->find_database("reporting")) == 600s);
}

TEST_CASE("conf/pgtether.ini loads and mentions every key") {
    auto path = kConf + "/pgtether.ini";
    auto cfg = load_config(path);
    CHECK(cfg->pool_mode == PoolMode::Transaction);
    CHECK(cfg->advisory_lock_tracking == LockTracking::On);
    CHECK(cfg->find_database("app") != nullptr);

    // Every [pgbouncer] key appears as a (possibly commented-out) `key =` line, so the example
    // stays a complete reference; docs/configuration.md names every key of every section.
    auto conf = read_text(path);
    auto docs = read_text(kDocs + "/configuration.md");
    for (const auto& k : recognised_config_keys()) {
        CAPTURE(k.section);
        CAPTURE(k.name);
        if (k.section == "pgbouncer") {
            std::string name(k.name);
            CHECK((contains(conf, "\n" + name + " =") || contains(conf, "\n;" + name + " =")));
        }
        CHECK(contains(docs, "`" + std::string(k.name) + "`"));
    }
}

TEST_CASE("the table honours exactly the keys pgtether implements") {
    std::set<std::string> honoured;
    for (const auto& k : recognised_config_keys()) {
        if (k.section == "pgbouncer" && k.supported) honoured.insert(std::string(k.name));
    }
    const std::set<std::string> expected = {"listen_addr",
                                            "listen_port",
                                            "unix_socket_dir",
                                            "unix_socket_mode",
                                            "auth_type",
                                            "auth_file",
                                            "auth_hba_file",
                                            "auth_ldap_options",
                                            "auth_ident_file",
                                            "auth_pam_service",
                                            "auth_user",
                                            "auth_query",
                                            "auth_dbname",
                                            "client_tls_sslmode",
                                            "client_tls_key_file",
                                            "client_tls_cert_file",
                                            "client_tls_ca_file",
                                            "client_tls_protocols",
                                            "client_tls_ciphers",
                                            "client_tls13_ciphers",
                                            "client_tls_dheparams",
                                            "client_tls_ecdhcurve",
                                            "server_tls_sslmode",
                                            "server_tls_key_file",
                                            "server_tls_cert_file",
                                            "server_tls_ca_file",
                                            "server_tls_protocols",
                                            "server_tls_ciphers",
                                            "server_tls13_ciphers",
                                            "server_require_auth",
                                            "pool_mode",
                                            "default_pool_size",
                                            "min_pool_size",
                                            "reserve_pool_size",
                                            "reserve_pool_timeout",
                                            "max_client_conn",
                                            "max_db_connections",
                                            "max_user_connections",
                                            "max_db_client_connections",
                                            "max_user_client_connections",
                                            "server_reset_query",
                                            "server_reset_query_always",
                                            "server_check_query",
                                            "server_check_delay",
                                            "server_lifetime",
                                            "server_idle_timeout",
                                            "server_connect_timeout",
                                            "server_login_retry",
                                            "query_timeout",
                                            "query_wait_timeout",
                                            "query_wait_notify",
                                            "cancel_wait_timeout",
                                            "client_idle_timeout",
                                            "client_login_timeout",
                                            "idle_transaction_timeout",
                                            "transaction_timeout",
                                            "logfile",
                                            "pidfile",
                                            "ignore_startup_parameters",
                                            "pkt_buf",
                                            "max_packet_size",
                                            "max_prepared_statements",
                                            "listen_backlog",
                                            "tcp_keepalive",
                                            "tcp_keepidle",
                                            "tcp_keepintvl",
                                            "tcp_keepcnt",
                                            "tcp_user_timeout",
                                            "log_connections",
                                            "log_disconnections",
                                            "log_format",
                                            "log_pooler_errors",
                                            "stats_period",
                                            "verbose",
                                            "server_round_robin",
                                            "advisory_lock_tracking",
                                            "advisory_lock_functions",
                                            "advisory_lock_discovery",
                                            "advisory_lock_discovery_interval",
                                            "advisory_lock_catalog_check_interval",
                                            "tethered_idle_timeout",
                                            "tether_probe_delay",
                                            "tether_reserve_size",
                                            "workers",
                                            "client_buffer_limit",
                                            "max_prepared_statement_bytes",
                                            "max_prepared_statement_bytes_total",
                                            "session_state_temp_tables",
                                            "session_state_listen",
                                            "listen_mode",
                                            "listen_client_buffer",
                                            "listen_stall_timeout",
                                            "session_state_cursors",
                                            "session_state_prepare",
                                            "session_state_load",
                                            "session_settings",
                                            "admin_users",
                                            "stats_users",
                                            "log_stats",
                                            "log_statement_text",
                                            "syslog",
                                            "syslog_ident",
                                            "syslog_facility",
                                            "metrics_listen_addr",
                                            "metrics_listen_port",
                                            "application_name_add_host",
                                            "disable_pqexec",
                                            "server_fast_close",
                                            "so_reuseport",
                                            "peer_id",
                                            "server_host_backoff",
                                            "scram_iterations",
                                            "unix_socket_group",
                                            "tcp_socket_buffer",
                                            "autodb_idle_timeout",
                                            "conffile",
                                            "dns_max_ttl",
                                            "dns_nxdomain_ttl",
                                            "job_name",
                                            "service_name",
                                            "tcp_defer_accept",
                                            "track_extra_parameters",
                                            "user"};
    CHECK(honoured == expected);
}

TEST_CASE("every [pgbouncer] key at its neutral value changes nothing") {
    // The table's neutral value of a supported key is its default, which must agree with
    // Config's initialiser; an unsupported key at its neutral value is not reported.
    std::string text = "[pgbouncer]\n";
    for (const auto& k : recognised_config_keys()) {
        if (k.section != "pgbouncer") continue;
        REQUIRE_MESSAGE(k.neutral_value, k.name);
        text += std::string(k.name) + " = " + std::string(*k.neutral_value) + "\n";
    }
    auto cfg = load_text(text);
    const Config d;
    CHECK(cfg->logfile == d.logfile);
    CHECK(cfg->pidfile == d.pidfile);
    CHECK(cfg->listen_addr == d.listen_addr);
    CHECK(cfg->listen_port == d.listen_port);
    CHECK(cfg->unix_socket_dir == d.unix_socket_dir);
    CHECK(cfg->unix_socket_mode == d.unix_socket_mode);
    CHECK(cfg->unix_socket_group == d.unix_socket_group);
    CHECK(cfg->auth_type == d.auth_type);
    CHECK(cfg->auth_file == d.auth_file);
    CHECK(cfg->auth_hba_file == d.auth_hba_file);
    CHECK(cfg->auth_user == d.auth_user);
    CHECK(cfg->auth_query == d.auth_query);
    CHECK(cfg->auth_dbname == d.auth_dbname);
    CHECK(cfg->pool_mode == d.pool_mode);
    CHECK(cfg->max_client_conn == d.max_client_conn);
    CHECK(cfg->default_pool_size == d.default_pool_size);
    CHECK(cfg->min_pool_size == d.min_pool_size);
    CHECK(cfg->reserve_pool_size == d.reserve_pool_size);
    CHECK(cfg->reserve_pool_timeout == d.reserve_pool_timeout);
    CHECK(cfg->max_db_connections == d.max_db_connections);
    CHECK(cfg->max_user_connections == d.max_user_connections);
    CHECK(cfg->server_round_robin == d.server_round_robin);
    CHECK(cfg->ignore_startup_parameters == d.ignore_startup_parameters);
    CHECK(cfg->application_name_add_host == d.application_name_add_host);
    CHECK(cfg->disable_pqexec == d.disable_pqexec);
    CHECK(cfg->stats_period == d.stats_period);
    CHECK(cfg->syslog == d.syslog);
    CHECK(cfg->syslog_ident == d.syslog_ident);
    CHECK(cfg->syslog_facility == d.syslog_facility);
    CHECK(cfg->log_connections == d.log_connections);
    CHECK(cfg->log_disconnections == d.log_disconnections);
    CHECK(cfg->log_pooler_errors == d.log_pooler_errors);
    CHECK(cfg->log_stats == d.log_stats);
    CHECK(cfg->verbose == d.verbose);
    CHECK(cfg->admin_users == d.admin_users);
    CHECK(cfg->stats_users == d.stats_users);
    CHECK(cfg->server_reset_query == d.server_reset_query);
    CHECK(cfg->server_reset_query_always == d.server_reset_query_always);
    CHECK(cfg->server_check_delay == d.server_check_delay);
    CHECK(cfg->server_check_query == d.server_check_query);
    CHECK(cfg->server_fast_close == d.server_fast_close);
    CHECK(cfg->server_lifetime == d.server_lifetime);
    CHECK(cfg->server_idle_timeout == d.server_idle_timeout);
    CHECK(cfg->server_connect_timeout == d.server_connect_timeout);
    CHECK(cfg->server_login_retry == d.server_login_retry);
    CHECK(cfg->client_login_timeout == d.client_login_timeout);
    CHECK(cfg->query_timeout == d.query_timeout);
    CHECK(cfg->query_wait_timeout == d.query_wait_timeout);
    CHECK(cfg->client_idle_timeout == d.client_idle_timeout);
    CHECK(cfg->idle_transaction_timeout == d.idle_transaction_timeout);
    CHECK(cfg->suspend_timeout == d.suspend_timeout);
    CHECK(cfg->pkt_buf == d.pkt_buf);
    CHECK(cfg->max_packet_size == d.max_packet_size);
    CHECK(cfg->listen_backlog == d.listen_backlog);
    CHECK(cfg->sbuf_loopcnt == d.sbuf_loopcnt);
    CHECK(cfg->so_reuseport == d.so_reuseport);
    CHECK(cfg->tcp_defer_accept == d.tcp_defer_accept);
    CHECK(cfg->tcp_socket_buffer == d.tcp_socket_buffer);
    CHECK(cfg->tcp_keepalive == d.tcp_keepalive);
    CHECK(cfg->tcp_keepcnt == d.tcp_keepcnt);
    CHECK(cfg->tcp_keepidle == d.tcp_keepidle);
    CHECK(cfg->tcp_keepintvl == d.tcp_keepintvl);
    CHECK(cfg->tcp_user_timeout == d.tcp_user_timeout);
    CHECK(cfg->advisory_lock_tracking == d.advisory_lock_tracking);
    CHECK(cfg->advisory_lock_functions == d.advisory_lock_functions);
    CHECK(cfg->tethered_idle_timeout == d.tethered_idle_timeout);
    CHECK(cfg->tether_reserve_size == d.tether_reserve_size);
    CHECK(cfg->client_buffer_limit == d.client_buffer_limit);
    CHECK(cfg->max_prepared_statement_bytes == d.max_prepared_statement_bytes);
}

TEST_CASE("an empty [pgbouncer] section gives PgBouncer 1.18's defaults") {
    auto cfg = load_text("[pgbouncer]\n");
    const Config defaults;
    CHECK(cfg->listen_addr.empty());
    CHECK(cfg->unix_socket_dir == "/tmp");
    CHECK(cfg->unix_socket_mode == 0777);
    CHECK(cfg->auth_type == AuthType::Md5);
    CHECK(cfg->auth_query == defaults.auth_query);
    CHECK(contains(cfg->auth_query, "pg_authid"));
    CHECK(cfg->query_wait_timeout == 120s);
    CHECK(cfg->tcp_defer_accept);
    CHECK(cfg->databases.empty());
}

// ---------------------------------------------------------------------------------------------
// %include

TEST_CASE("%include: nested, relative to the working directory, sections carry over") {
    CwdGuard cwd(kData + "/include");
    auto cfg = load_config("main.ini");
    CHECK(cfg->config_file == (fs::path(kData) / "include/main.ini").lexically_normal().string());
    REQUIRE(cfg->databases.size() == 3);
    CHECK(cfg->databases[0].name == "from_sub");
    CHECK(cfg->databases[0].source_file == "sub/databases.ini");
    CHECK(cfg->databases[0].source_line == 2);
    CHECK(cfg->databases[1].name == "from_deeper");
    CHECK(cfg->databases[1].port == 5433);
    CHECK(cfg->databases[1].source_file == "sub/deeper/users.ini");
    CHECK(cfg->databases[1].source_line == 2);
    CHECK(cfg->databases[2].name == "after_include");
    CHECK(cfg->databases[2].source_file == "main.ini");
    REQUIRE(cfg->find_user("deep_user") != nullptr);
    CHECK(cfg->find_user("deep_user")->pool_mode == PoolMode::Statement);
    CHECK(cfg->auth_type == AuthType::Trust);
    CHECK(cfg->listen_port == 6432);  // reset by the second [pgbouncer], as in PgBouncer
}

TEST_CASE("%include: a relative path is not resolved against the including file") {
    CwdGuard cwd(kData + "/include");
    auto err = error_of("with-dir-relative.ini");
    REQUIRE(err);
    CHECK(err->file() == "sub/dir-relative.ini");
    CHECK(err->line() == 3);
    CHECK(contains(err->what(), "cannot read included file \"sibling.ini\""));
    CHECK(contains(err->what(), "No such file or directory"));
}

TEST_CASE("%include: an error inside an included file names that file and line") {
    CwdGuard cwd(kData + "/include");
    auto err = error_of("with-bad-include.ini");
    REQUIRE(err);
    CHECK(err->file() == "sub/bad-value.ini");
    CHECK(err->line() == 4);
    CHECK(err->key() == "default_pool_size");
    CHECK(std::string(err->what()) ==
          "sub/bad-value.ini:4: default_pool_size: invalid value \"twenty\": expected an integer "
          ">= 0");
}

TEST_CASE("%include: loops and missing files are errors at the %include line") {
    CwdGuard cwd(kData + "/include");
    auto loop = error_of("loop/a.ini");
    REQUIRE(loop);
    CHECK(loop->file() == "loop/b.ini");
    CHECK(loop->line() == 2);
    CHECK(contains(loop->what(), "include loop"));
    CHECK(contains(loop->what(), "loop/a.ini -> loop/b.ini -> loop/a.ini"));

    auto self = error_of("loop/self.ini");
    REQUIRE(self);
    CHECK(self->file() == "loop/self.ini");
    CHECK(self->line() == 2);
    CHECK(contains(self->what(), "include loop"));

    auto missing = error_of("missing.ini");
    REQUIRE(missing);
    CHECK(missing->file() == "missing.ini");
    CHECK(missing->line() == 3);
    CHECK(contains(missing->what(), "cannot read included file \"sub/does-not-exist.ini\""));
}

TEST_CASE("%include: at most 10 levels, like PgBouncer's MAX_INCLUDE") {
    TempDir tmp;
    CwdGuard cwd(tmp.path());
    // f0 includes f1 ... includes fN; fN sets the port.
    auto chain = [&](int levels) {
        for (int i = 0; i < levels; ++i) {
            tmp.write(
                "f" + std::to_string(i) + ".ini",
                (i == 0 ? kMain : std::string()) + "%include f" + std::to_string(i + 1) + ".ini\n");
        }
        tmp.write("f" + std::to_string(levels) + ".ini", "listen_port = 7777\n");
    };
    chain(10);
    CHECK(load_config("f0.ini")->listen_port == 7777);
    chain(11);
    auto err = error_of("f0.ini");
    REQUIRE(err);
    CHECK(err->file() == "f10.ini");
    CHECK(contains(err->what(), "nested more than 10 levels"));
}

// ---------------------------------------------------------------------------------------------
// Errors: every class names file, line and key

TEST_CASE("unknown sections and keys") {
    auto e = error_from_text("[pgbouncer]\n[other]\n");
    CHECK(e.line() == 2);
    CHECK(e.key().empty());
    CHECK(contains(e.what(), ":2: unknown section [other]"));

    e = error_from_text("[PgBouncer]\n");
    CHECK(contains(e.what(), "section names are case-sensitive"));

    e = error_from_text("[pgbouncer]\nlisten_port = 6432\nfrobnicate = 1\n");
    CHECK(e.line() == 3);
    CHECK(e.key() == "frobnicate");
    CHECK(std::string(e.what()) == e.file() + ":3: frobnicate: unknown configuration key");

    e = error_from_text("[pgbouncer]\nListen_Port = 6432\n");
    CHECK(e.key() == "Listen_Port");
    CHECK(contains(e.what(), "did you mean \"listen_port\""));

    e = error_from_text("listen_port = 6432\n[pgbouncer]\n");
    CHECK(e.line() == 1);
    CHECK(contains(e.what(), "setting outside of any section"));
}

TEST_CASE("bad values of each type") {
    struct Case {
        const char* line;
        const char* key;
        const char* message;
    };
    const Case cases[] = {
        {"default_pool_size = 20x", "default_pool_size", "expected an integer >= 0"},
        {"default_pool_size = -1", "default_pool_size", "out of range"},
        {"listen_port = 0", "listen_port", "expected an integer from 1 to 65535"},
        {"listen_port = 70000", "listen_port", "out of range"},
        {"listen_port = ", "listen_port", "expected an integer"},
        {"max_client_conn = 0", "max_client_conn", "out of range"},
        {"workers = 0", "workers", "out of range"},
        {"scram_iterations = 0", "scram_iterations", "out of range"},
        {"scram_iterations = 100001", "scram_iterations", "out of range"},
        {"workers = 65", "workers", "out of range"},
        {"workers = many", "workers", "(or auto: one per CPU)"},
        {"log_connections = on", "log_connections", "0 (off) or 1 (on)"},
        {"server_round_robin = true", "server_round_robin", "0 (off) or 1 (on)"},
        {"pool_mode = txn", "pool_mode", "expected one of: session, transaction, statement"},
        {"auth_type = password", "auth_type", "expected one of: any, trust, plain, md5"},
        {"auth_ldap_options = ldapserver=h", "auth_ldap_options",
         "requires argument \"ldapbasedn\", \"ldapprefix\", or \"ldapsuffix\""},
        {"auth_ldap_options = ldapbasedn=dc=x ldapport=0", "auth_ldap_options",
         "invalid LDAP port number: \"0\""},
        {"auth_dbname = pgbouncer", "auth_dbname",
         "cannot use the reserved \"pgbouncer\" database as an auth_dbname"},
        {"client_tls_sslmode = maybe", "client_tls_sslmode", "expected one of: disable"},
        {"advisory_lock_tracking = sometimes", "advisory_lock_tracking",
         "expected one of: on, every_transaction, off"},
        {"advisory_lock_discovery = yes", "advisory_lock_discovery",
         "expected one of: on, off, 1, 0"},
        {"advisory_lock_discovery_interval = 0", "advisory_lock_discovery_interval",
         "out of range"},
        {"unix_socket_mode = 777", "unix_socket_mode", "octal file mode with a leading 0"},
        {"unix_socket_mode = 0789", "unix_socket_mode", "octal"},
        {"server_lifetime = 1h", "server_lifetime", "no unit suffix"},
        {"query_timeout = -5", "query_timeout", "negative"},
        {"stats_period = 0", "stats_period", "out of range"},
        {"stats_period = 1.5", "stats_period", "whole seconds"},
        {"peer_id = 20000", "peer_id", "from 0 to 16383"},
        {"advisory_lock_functions = my_lock, 1bad", "advisory_lock_functions",
         "\"1bad\" is not a function name"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.line);
        auto e = error_from_text(kMain + "\n" + c.line + "\n");
        CHECK(e.line() == 3);
        CHECK(e.key() == c.key);
        CHECK(contains(e.what(), c.message));
        CHECK(contains(e.what(), "invalid value"));
    }
}

TEST_CASE("bad [databases], [users] and [peers] entries") {
    struct Case {
        const char* text;
        const char* key;
        const char* message;
    };
    const Case cases[] = {
        {"[databases]\nmydb = host=x frob=1", "mydb", "unknown [databases] parameter \"frob\""},
        {"[databases]\nmydb = Host=x", "mydb", "did you mean \"host\""},
        {"[databases]\nmydb = host=x port=abc", "mydb", "invalid value \"abc\" for \"port\""},
        {"[databases]\nmydb = port=0", "mydb", "from 1 to 65535"},
        {"[databases]\nmydb = host=a,b port=5432,", "mydb", "from 1 to 65535"},
        {"[databases]\nmydb = host=a,b port=5432,5433,5434", "mydb",
         "lists 3 ports for 2 hosts: give one port for all hosts, or one per host"},
        {"[databases]\nmydb = host=a,b target_session_attrs=master", "mydb",
         "target_session_attrs"},
        {"[databases]\nmydb = pool_size=-1", "mydb", "out of range"},
        {"[databases]\nmydb = tether_reserve_size=-2", "mydb", "out of range"},
        {"[databases]\nmydb = pool_mode=txn", "mydb", "expected one of"},
        {"[databases]\nmydb = load_balance_hosts=random", "mydb", "expected one of"},
        {"[databases]\nmydb = host='x", "mydb", "unterminated quoted value"},
        {"[databases]\nmydb = host", "mydb", "missing '='"},
        {"[databases]\nmydb = host=", "mydb", "empty value"},
        {"[databases]\nmydb = host=a,,b", "mydb", "empty host name in the list"},
        {"[databases]\nmydb = host=a,", "mydb", "empty host name in the list"},
        {"[databases]\npgbouncer = host=x", "pgbouncer", "reserved for the admin console"},
        {"[databases]\npgtether = host=x", "pgtether", "reserved"},
        {"[users]\nbob = pool_mode=session frob=1", "bob", "unknown [users] parameter"},
        {"[users]\nbob = max_user_connections=many", "bob", "for \"max_user_connections\""},
        {"[peers]\nabc = host=x", "abc", "peer id"},
        {"[peers]\n1 = port=6432", "1", "a peer needs host="},
        {"[peers]\n16384 = host=x", "16384", "peer id"},
        {"[peers]\n1 = host=x dbname=y", "1", "unknown [peers] parameter"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        auto e = error_from_text(kMain + c.text + "\n");
        CHECK(e.line() == 3);
        CHECK(e.key() == c.key);
        CHECK(contains(e.what(), c.message));
    }
}

TEST_CASE("file-level errors") {
    auto e = error_from_text("[databases]\nfoo = host=x\n");
    CHECK(e.line() == 0);
    CHECK(contains(e.what(), "no [pgbouncer] section"));

    e = error_from_text("[pgbouncer]\nunix_socket_dir =\n");
    CHECK(contains(e.what(), "nowhere to listen"));

    auto missing = error_of("/nonexistent/pgtether.ini");
    REQUIRE(missing);
    CHECK(missing->line() == 0);
    CHECK(std::string(missing->what()) ==
          "/nonexistent/pgtether.ini: cannot read config file: No such file or directory");

    auto dir = error_of(kData);
    REQUIRE(dir);
    CHECK(contains(dir->what(), "cannot read config file"));
}

// ---------------------------------------------------------------------------------------------
// Duplicates, section re-entry, aliases

TEST_CASE("duplicate keys and entries: the last one wins") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "listen_port = 7000\n"
        "listen_port = 7001\n"
        "[databases]\n"
        "a = host=one port=5000\n"
        "b = host=two\n"
        "a = host=three\n"
        "[users]\n"
        "u = pool_mode=session max_user_connections=1\n"
        "u = pool_mode=statement\n");
    CHECK(cfg->listen_port == 7001);
    REQUIRE(cfg->databases.size() == 2);
    CHECK(cfg->databases[0].name == "a");  // keeps its first position
    CHECK(cfg->databases[0].host == "three");
    CHECK(cfg->databases[0].port == 5432);  // the whole entry is replaced
    CHECK(cfg->databases[0].source_line == 7);
    CHECK(cfg->databases[1].name == "b");
    CHECK(cfg->find_user("u")->pool_mode == PoolMode::Statement);
    CHECK_FALSE(cfg->find_user("u")->max_user_connections);
}

TEST_CASE("[pgtether] is the same section as [pgbouncer], and reopening it resets it") {
    auto cfg = load_text(
        "[pgtether]\n"
        "listen_port = 7000\n"
        "advisory_lock_tracking = every_transaction\n"
        "advisory_lock_functions = App.Take_Lock, take_other\n"
        "tethered_idle_timeout = 300\n"
        "tether_reserve_size = 4\n"
        "[databases]\n"
        "small = host=x pool_size=2 tether_reserve_size=0\n"
        "large = host=x\n");
    CHECK(cfg->listen_port == 7000);
    CHECK(cfg->advisory_lock_tracking == LockTracking::EveryTransaction);
    CHECK(cfg->advisory_lock_functions == std::vector<std::string>{"app.take_lock", "take_other"});
    CHECK(cfg->tethered_idle_timeout == 300s);
    CHECK(cfg->tether_reserve_size == 4);
    CHECK(cfg->find_database("small")->tether_reserve_size == 0);
    CHECK_FALSE(cfg->find_database("large")->tether_reserve_size);
    CHECK(error_from_text("[pgtether]\ntether_reserve_size = -2\n").key() ==
          "tether_reserve_size");

    // PgBouncer refills every [pgbouncer] default when the section starts again (checked with
    // PgBouncer 1.18: auth_type = hba before a second [pgbouncer] has no effect).
    cfg = load_text(
        "[pgbouncer]\n"
        "listen_port = 7000\n"
        "auth_type = hba\n"
        "admin_users = root\n"
        "[databases]\n"
        "kept = host=x\n"
        "[pgtether]\n"
        "pool_mode = transaction\n");
    CHECK(cfg->listen_port == 6432);
    CHECK(cfg->auth_type == AuthType::Md5);
    CHECK(cfg->admin_users.empty());
    CHECK(cfg->pool_mode == PoolMode::Transaction);
    CHECK(cfg->find_database("kept") != nullptr);
}

// ---------------------------------------------------------------------------------------------
// Unsupported-key report

TEST_CASE("keys pgtether does not act on: the neutral value loads, any other is refused") {
    // Nothing is accepted and then ignored: a value that asks for something pgtether does not
    // do stops the load with the file, line, key and what to do instead.
    struct Case {
        const char* line;
        const char* says;
    };
    const Case refused[] = {
        {"dns_zone_check_period = 60", "without serial checks"},
        {"resolv_conf = /etc/pgbouncer/resolv.conf", "system resolver"},
        {"sbuf_loopcnt = 0", "bounds each connection's turn"},
        {"suspend_timeout = 2.5", "SUSPEND and online restart"},
    };
    for (const auto& c : refused) {
        CAPTURE(c.line);
        const std::string key = std::string(c.line).substr(0, std::string(c.line).find(' '));
        const std::string error =
            error_from_text("[pgbouncer]\nlisten_port = 6432\n" + std::string(c.line) + "\n").what();
        CHECK(contains(error, ":3: " + key + ": \""));
        CHECK(contains(error, "is not supported by pgtether: "));
        CHECK(contains(error, c.says));
    }
    // Their neutral values (PgBouncer's defaults) load, and nothing is reported.
    auto cfg = load_text(
        "[pgbouncer]\n"
        "dns_zone_check_period = 0\n"
        "resolv_conf =\n"
        "sbuf_loopcnt = 5\n"
        "suspend_timeout = 10\n"
        // Acted on: upper bounds pgtether is always within, Windows-only names (as in
        // PgBouncer on Linux), the listener option, the auto-database timeout, reload's file.
        "dns_max_ttl = 30\n"
        "dns_nxdomain_ttl = 0\n"
        "job_name = pgb\n"
        "service_name = pgb\n"
        "tcp_defer_accept = 0\n"
        "autodb_idle_timeout = 60\n"
        "track_extra_parameters = IntervalStyle, search_path\n");
    CHECK_FALSE(cfg->tcp_defer_accept);
    // With session_settings = ignore pgtether keeps PgBouncer's five parameters and
    // IntervalStyle only: another name is refused rather than silently not tracked.
    CHECK(load_text("[pgbouncer]\nsession_settings = ignore\n"
                    "track_extra_parameters = IntervalStyle\n")
              ->track_extra_parameters == std::vector<std::string>{"IntervalStyle"});
    const std::string error =
        error_from_text(
            "[pgbouncer]\nsession_settings = ignore\ntrack_extra_parameters = search_path\n")
            .what();
    CHECK(contains(error, ":3: track_extra_parameters: \"search_path\" is not tracked"));
    CHECK(contains(error, "use session_settings = replay"));
}

TEST_CASE("disable_pqexec: off by default, a boolean fixed at start-up as PgBouncer's") {
    CHECK_FALSE(load_text("[pgbouncer]\n")->disable_pqexec);
    CHECK(load_text("[pgbouncer]\ndisable_pqexec = 1\n")->disable_pqexec);
    auto running = load_text("[pgbouncer]\ndisable_pqexec = 1\n");
    Config next = *load_text("[pgbouncer]\ndisable_pqexec = 0\n");
    CHECK(keep_fixed_settings(*running, next) == std::vector<std::string>{"disable_pqexec"});
    CHECK(next.disable_pqexec);
}

TEST_CASE("cancel_wait_timeout: PgBouncer 1.22's default of 10 s; 0 is no limit") {
    CHECK(load_text("[pgbouncer]\n")->cancel_wait_timeout == std::chrono::seconds(10));
    CHECK(load_text("[pgbouncer]\ncancel_wait_timeout = 2.5\n")->cancel_wait_timeout == 2500ms);
    CHECK(load_text("[pgbouncer]\ncancel_wait_timeout = 0\n")->cancel_wait_timeout.count() == 0);
}

TEST_CASE("unsupported keys: values stored where Config has a field") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "tcp_socket_buffer = 65536\n"
        "auth_hba_file = /etc/pgbouncer/hba.conf\n"
        "auth_dbname = authdb\n"
        "server_fast_close = 1\n");
    CHECK(cfg->tcp_socket_buffer == 65536);
    CHECK(cfg->auth_hba_file == "/etc/pgbouncer/hba.conf");
    CHECK(cfg->auth_dbname == "authdb");
    CHECK(cfg->server_fast_close);
    // auth_hba_file, auth_dbname, server_fast_close and tcp_socket_buffer are honoured.
}

TEST_CASE("newer PgBouncer keys are recognised") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "max_prepared_statements = 0\n"
        "track_extra_parameters =\n"
        "client_tls13_ciphers =\n"
        "server_tls13_ciphers =\n"
        "query_wait_notify = 0\n"
        "peer_id = 0\n"
        "scram_iterations = 4096\n"
        "auth_dbname =\n"
        "auth_ident_file =\n"
        "cancel_wait_timeout = 0\n"
        "transaction_timeout = 0\n"
        "max_db_client_connections = 0\n"
        "max_user_client_connections = 0\n"
        "[databases]\n"
        "d = host=x reserve_pool_size=3 load_balance_hosts=ROUND-ROBIN target_session_attrs=any\n"
        "[users]\n"
        "u = max_user_client_connections=0\n");
    CHECK(cfg->find_database("d")->reserve_pool_size == 3);
}

// ---------------------------------------------------------------------------------------------
// Small things

TEST_CASE("to_string gives the config spelling") {
    CHECK(std::string(to_string(PoolMode::Session)) == "session");
    CHECK(std::string(to_string(PoolMode::Transaction)) == "transaction");
    CHECK(std::string(to_string(PoolMode::Statement)) == "statement");
    CHECK(std::string(to_string(AuthType::Any)) == "any");
    CHECK(std::string(to_string(AuthType::Trust)) == "trust");
    CHECK(std::string(to_string(AuthType::Plain)) == "plain");
    CHECK(std::string(to_string(AuthType::Md5)) == "md5");
    CHECK(std::string(to_string(AuthType::ScramSha256)) == "scram-sha-256");
    CHECK(std::string(to_string(AuthType::Cert)) == "cert");
    CHECK(std::string(to_string(AuthType::Hba)) == "hba");
    CHECK(std::string(to_string(AuthType::Pam)) == "pam");
    CHECK(std::string(to_string(LockTracking::On)) == "on");
    CHECK(std::string(to_string(LockTracking::EveryTransaction)) == "every_transaction");
    CHECK(std::string(to_string(LockTracking::Off)) == "off");
    CHECK(std::string(to_string(SslMode::VerifyFull)) == "verify-full");

    // ... and that spelling loads back.
    for (auto mode : {PoolMode::Session, PoolMode::Transaction, PoolMode::Statement}) {
        CHECK(load_text(kMain + "pool_mode = " + to_string(mode) + "\n")->pool_mode == mode);
    }
    for (auto t : {AuthType::Any, AuthType::Trust, AuthType::Plain, AuthType::Md5,
                   AuthType::ScramSha256, AuthType::Cert, AuthType::Hba, AuthType::Pam}) {
        CHECK(load_text(kMain + "auth_type = " + to_string(t) + "\n")->auth_type == t);
    }
    for (auto m : {SslMode::Disable, SslMode::Allow, SslMode::Prefer, SslMode::Require,
                   SslMode::VerifyCa, SslMode::VerifyFull}) {
        auto mode = std::string(to_string(m)) + "\n";
        CHECK(load_text(kMain + "client_tls_sslmode = " + mode)->client_tls_sslmode == m);
        CHECK(load_text(kMain + "server_tls_sslmode = " + mode)->server_tls_sslmode == m);
    }
    for (auto t : {LockTracking::On, LockTracking::EveryTransaction, LockTracking::Off}) {
        CHECK(load_text(kMain + "advisory_lock_tracking = " + to_string(t) + "\n")
                  ->advisory_lock_tracking == t);
    }
}

TEST_CASE("ConfigError::what() format") {
    CHECK(std::string(ConfigError("a.ini", 3, "key", "bad").what()) == "a.ini:3: key: bad");
    CHECK(std::string(ConfigError("a.ini", 3, "", "bad").what()) == "a.ini:3: bad");
    CHECK(std::string(ConfigError("a.ini", 0, "", "bad").what()) == "a.ini: bad");
    ConfigError e("f", 7, "k", "m");
    CHECK(e.file() == "f");
    CHECK(e.line() == 7);
    CHECK(e.key() == "k");
}

TEST_CASE("quoted database names") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "[databases]\n"
        "\"my db\" = host=x\n"
        "\"we\"\"ird\" = host=y\n"
        "\"user@host\" = host=z\n");
    CHECK(cfg->find_database("my db")->host == "x");
    CHECK(cfg->find_database("we\"ird")->host == "y");
    CHECK(cfg->find_database("user@host")->host == "z");
}

TEST_CASE("databases: defaults and the fallback entry") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "[databases]\n"
        "foodb =\n");
    const auto* db = cfg->find_database("foodb");
    REQUIRE(db != nullptr);
    CHECK(db->host.empty());  // Unix socket
    CHECK(db->port == 5432);
    CHECK(db->dbname.empty());
    CHECK_FALSE(db->pool_size);
    CHECK(cfg->find_database("other") == nullptr);
}

// ---------------------------------------------------------------------------------------------
// SHOW CONFIG and SET (the admin console's view of the [pgbouncer] settings)

namespace {

const ConfigSetting& setting_of(const std::vector<ConfigSetting>& settings, const std::string& key) {
    for (const auto& s : settings) {
        if (s.key == key) return s;
    }
    FAIL("no setting " << key);
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("describe_settings: conffile is the main file as named on the command line") {
    TempDir tmp;
    const std::string absolute = tmp.write("t.ini", "[pgbouncer]\nlisten_port = 7000\n");
    CHECK(setting_of(describe_settings(*load_config(absolute)), "conffile").value == absolute);
    // A relative name stays relative, as PgBouncer shows it; config_file is made absolute.
    const auto cwd = fs::current_path();
    fs::current_path(tmp.path());
    auto relative = load_config("./t.ini");
    fs::current_path(cwd);
    CHECK(setting_of(describe_settings(*relative), "conffile").value == "./t.ini");
    CHECK(relative->config_file == (tmp.path() / "t.ini").string());
    // A conffile the file names is shown as written (PgBouncer's display; not acted on).
    const std::string naming = tmp.write("n.ini", "[pgbouncer]\nconffile = /etc/other.ini\n");
    CHECK(setting_of(describe_settings(*load_config(naming)), "conffile").value ==
          "/etc/other.ini");
}

TEST_CASE("describe_settings lists every key with a value the loader reads back") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1, ::1\n"
        "unix_socket_mode = 0750\n"
        "reserve_pool_timeout = 2.25\n"
        "server_lifetime = 120\n"
        "log_connections = 0\n"
        "pool_mode = transaction\n"
        "dns_max_ttl = 30\n"
        "syslog = 1\n"
        "syslog_facility = LOCAL3\n"
        "metrics_listen_port = 9127\n");
    auto settings = describe_settings(*cfg);
    std::set<std::string> keys;
    for (const auto& s : settings) keys.insert(s.key);
    // Every [pgbouncer] key of the table, sorted, once.
    std::size_t table_keys = 0;
    for (const auto& k : recognised_config_keys()) table_keys += k.section == "pgbouncer";
    CHECK(settings.size() == table_keys);
    CHECK(keys.size() == settings.size());
    CHECK(std::is_sorted(settings.begin(), settings.end(),
                         [](const auto& a, const auto& b) { return a.key < b.key; }));

    CHECK(setting_of(settings, "listen_addr").value == "127.0.0.1, ::1");
    CHECK_FALSE(setting_of(settings, "listen_addr").changeable);
    CHECK(setting_of(settings, "unix_socket_mode").value == "0750");
    CHECK(setting_of(settings, "unix_socket_mode").default_value == "0777");
    CHECK(setting_of(settings, "reserve_pool_timeout").value == "2.25");
    CHECK(setting_of(settings, "server_lifetime").value == "120");
    CHECK(setting_of(settings, "server_lifetime").default_value == "3600");
    CHECK(setting_of(settings, "server_lifetime").changeable);
    CHECK(setting_of(settings, "log_connections").value == "0");
    CHECK(setting_of(settings, "pool_mode").value == "transaction");
    CHECK(setting_of(settings, "syslog").value == "1");
    CHECK(setting_of(settings, "syslog_facility").value == "local3");
    CHECK(setting_of(settings, "metrics_listen_port").value == "9127");
    CHECK(setting_of(settings, "metrics_listen_addr").value == "127.0.0.1");
    // A recognised key without a Config field shows what the file said, else its default.
    CHECK(setting_of(settings, "dns_max_ttl").value == "30");
    CHECK(setting_of(settings, "dns_max_ttl").supported);
    CHECK(setting_of(settings, "dns_nxdomain_ttl").value == "15");

    // Every rendered value loads back to the same rendering (SHOW CONFIG output is valid ini).
    std::string text = "[pgbouncer]\n";
    for (const auto& s : settings) {
        if (s.value) text += s.key + " = " + *s.value + "\n";
    }
    auto again = describe_settings(*load_text(text));
    for (std::size_t i = 0; i < settings.size(); ++i) {
        CAPTURE(settings[i].key);
        CHECK(again[i].value == settings[i].value);
    }
}

TEST_CASE("syslog_facility takes PgBouncer's facility names only") {
    for (const char* name : {"auth", "authpriv", "daemon", "user", "local0", "local7"}) {
        CHECK(load_text(std::string("[pgbouncer]\nsyslog_facility = ") + name + "\n")
                  ->syslog_facility == name);
    }
    CHECK(error_from_text("[pgbouncer]\nsyslog_facility = kern\n").key() == "syslog_facility");
}

TEST_CASE("set_config_value changes one setting like the loader would") {
    auto loaded = load_text("[pgbouncer]\ndefault_pool_size = 5\n");
    Config cfg = *loaded;
    set_config_value(cfg, "default_pool_size", "30");
    CHECK(cfg.default_pool_size == 30);
    set_config_value(cfg, "server_check_query", "select 2");
    CHECK(cfg.server_check_query == "select 2");
    set_config_value(cfg, "query_wait_timeout", "1.5");
    CHECK(cfg.query_wait_timeout == 1500ms);
    set_config_value(cfg, "admin_users", "a, b");
    CHECK(cfg.admin_users == std::vector<std::string>{"a", "b"});
    set_config_value(cfg, "dns_max_ttl", "20");
    CHECK(setting_of(describe_settings(cfg), "dns_max_ttl").value == "20");
    // A key pgtether does not act on takes its neutral value only.
    CHECK_NOTHROW(set_config_value(cfg, "sbuf_loopcnt", "5"));

    auto error = [&](const char* key, const char* value) {
        try {
            set_config_value(cfg, key, value);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(error("nosuch", "1") == "SET: nosuch: unknown configuration key");
    CHECK(error("default_pool_size", "lots") ==
          "SET: default_pool_size: invalid value \"lots\": expected an integer >= 0");
    CHECK(error("listen_port", "7000").find("cannot be changed while pgtether runs") !=
          std::string::npos);
    CHECK(error("auth_type", "pam") == "no error");
    CHECK(error("sbuf_loopcnt", "0") ==
          "SET: sbuf_loopcnt: \"0\" is not supported by pgtether: pgtether's event loop bounds "
          "each connection's turn by itself (libuv reads), so no connection can stall the "
          "others; remove the key");
    CHECK(error("track_extra_parameters", "search_path").find("use session_settings = replay") ==
          std::string::npos);  // replay (the default) restores it
    set_config_value(cfg, "track_extra_parameters", "IntervalStyle");
    set_config_value(cfg, "session_settings", "ignore");
    CHECK(error("track_extra_parameters", "search_path").find("use session_settings = replay") !=
          std::string::npos);
    CHECK(cfg.default_pool_size == 30);  // failed SETs changed nothing
    CHECK(cfg.listen_port == 6432);
    CHECK(setting_is_changeable("default_pool_size"));
    CHECK_FALSE(setting_is_changeable("listen_port"));
    CHECK_FALSE(setting_is_changeable("nosuch"));
}

TEST_CASE("auth_ldap_options is kept parsed beside its text: load, SET, reload") {
    auto loaded = load_text(
        "[pgbouncer]\nauth_type = ldap\nauth_ldap_options = ldapserver=a ldapprefix=\"uid=\" "
        "ldapsuffix=\",dc=x\"\n");
    REQUIRE(loaded->auth_ldap.has_value());
    CHECK(loaded->auth_ldap->servers == std::vector<std::string>{"a"});
    CHECK(loaded->auth_ldap->prefix == "uid=");
    CHECK_FALSE(load_text("[pgbouncer]\n")->auth_ldap.has_value());

    Config cfg = *loaded;
    set_config_value(cfg, "auth_ldap_options", "ldapserver=b ldapbasedn=dc=y");
    REQUIRE(cfg.auth_ldap.has_value());
    CHECK(cfg.auth_ldap->servers == std::vector<std::string>{"b"});
    CHECK(cfg.auth_ldap->search_bind());
    // A refused SET leaves both as they were.
    CHECK_THROWS_AS(set_config_value(cfg, "auth_ldap_options", "ldapserver=c"), ConfigError);
    CHECK(cfg.auth_ldap->servers == std::vector<std::string>{"b"});
    // A reload that keeps a running value keeps its parsed form with it (whatever the key's
    // changeability: the parsed form always follows the text).
    Config next = *loaded;
    keep_fixed_settings(cfg, next);
    REQUIRE(next.auth_ldap.has_value());
    CHECK(std::get<LdapOptions>(parse_ldap_options(next.auth_ldap_options)).servers ==
          next.auth_ldap->servers);
}

TEST_CASE("keep_fixed_settings: a reload cannot move listeners or the pidfile") {
    auto running = load_text(
        "[pgbouncer]\nlisten_port = 7000\npidfile = /run/a.pid\nuser = pgb\n"
        "default_pool_size = 5\n");
    auto next_loaded = load_text(
        "[pgbouncer]\nlisten_port = 7001\npidfile = /run/a.pid\ndefault_pool_size = 9\n"
        "metrics_listen_port = 9127\n");
    Config next = *next_loaded;
    auto changed = keep_fixed_settings(*running, next);
    CHECK(changed == std::vector<std::string>{"listen_port", "user", "metrics_listen_port"});
    CHECK(next.listen_port == 7000);
    CHECK(next.metrics_listen_port == 0);
    CHECK(next.user == "pgb");
    CHECK(next.pidfile == "/run/a.pid");
    CHECK(next.default_pool_size == 9);  // changeable settings take the new value
}

TEST_CASE("keep_fixed_settings: listen_mode stays what it was at start-up") {
    // The listening connections hold the channels multiplex answered; under tether a client's
    // UNLISTEN would go to its backend and leave them there.
    auto running = load_text("[pgbouncer]\n");
    Config next = *load_text("[pgbouncer]\nlisten_mode = tether\n");
    CHECK(keep_fixed_settings(*running, next) == std::vector<std::string>{"listen_mode"});
    CHECK(next.multiplexes_listen());
    CHECK_FALSE(setting_is_changeable("listen_mode"));
}

TEST_CASE("server_require_auth: libpq's require_auth list, checked when read") {
    auto config = load_text("[pgbouncer]\nserver_require_auth = scram-sha-256, none\n");
    CHECK(config->server_require_auth == "scram-sha-256, none");
    CHECK(load_text("[pgbouncer]\n")->server_require_auth.empty());
    auto e = error_from_text("[pgbouncer]\n\nserver_require_auth = password,!md5\n");
    CHECK(e.line() == 3);
    CHECK(e.key() == "server_require_auth");
    CHECK(std::string(e.what()).find("cannot be mixed") != std::string::npos);
    e = error_from_text("[pgbouncer]\nserver_require_auth = scram\n");
    CHECK(e.key() == "server_require_auth");
}

TEST_CASE("host lists: split_host_list, and a list in [databases]") {
    CHECK(split_host_list("").empty());
    CHECK(split_host_list("db1") == std::vector<std::string>{"db1"});
    CHECK(split_host_list("127.0.0.1,::1") == std::vector<std::string>{"127.0.0.1", "::1"});
    CHECK(split_host_list(" a , b,c ") == std::vector<std::string>{"a", "b", "c"});
    CHECK(split_host_list("/run/pg,10.0.0.1") ==
          std::vector<std::string>{"/run/pg", "10.0.0.1"});
    CHECK(split_host_list("a,,b") == std::vector<std::string>{"a", "", "b"});
    auto cfg = load_text("[pgbouncer]\n[databases]\nhl = host=127.0.0.1,::1 port=5432\n");
    REQUIRE(cfg->find_database("hl"));
    CHECK(cfg->find_database("hl")->host == "127.0.0.1,::1");
    CHECK(cfg->find_database("hl")->port == 5432);
    CHECK(cfg->find_database("hl")->ports.empty());  // one port for every host
    CHECK(cfg->find_database("hl")->target_session_attrs == "any");
    CHECK(cfg->find_database("hl")->load_balance_hosts == "round-robin");
    // libpq style: one port per host, target_session_attrs, load_balance_hosts (1.24).
    auto roles = load_text(
        "[pgbouncer]\nserver_host_backoff = 2.5\n[databases]\n"
        "rw = host=a,b port=5432,5433 target_session_attrs=read-write "
        "load_balance_hosts=disable\n");
    const DatabaseConfig* rw = roles->find_database("rw");
    REQUIRE(rw);
    CHECK(rw->port == 5432);
    CHECK(rw->ports == std::vector<int>{5432, 5433});
    CHECK(rw->target_session_attrs == "read-write");
    CHECK(rw->load_balance_hosts == "disable");
    CHECK(roles->server_host_backoff == std::chrono::milliseconds(2500));
}

TEST_CASE("configuration_warnings: options in ignore_startup_parameters") {
    auto plain = load_text("[pgbouncer]\nignore_startup_parameters = extra_float_digits\n");
    CHECK(configuration_warnings(*plain).empty());
    auto with_options =
        load_text("[pgbouncer]\nignore_startup_parameters = extra_float_digits,OPTIONS\n");
    auto warnings = configuration_warnings(*with_options);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("not replayed") != std::string::npos);
    // With session_settings = ignore there is nothing to replay anyway.
    auto ignoring = load_text(
        "[pgbouncer]\nignore_startup_parameters = options\nsession_settings = ignore\n");
    CHECK(configuration_warnings(*ignoring).empty());
}

TEST_CASE("typo hints: the closest key, not only a case difference") {
    const std::vector<std::string_view> keys = {"max_client_conn", "max_db_connections",
                                                "default_pool_size", "server_tls_sslmode",
                                                "listen_port", "pool_mode"};
    struct Case {
        const char* typed;
        const char* hint;  // "" for none
    };
    const Case cases[] = {
        {"max_client_connections", "max_client_conn"},
        {"max_clients_conn", "max_client_conn"},
        {"default_poolsize", "default_pool_size"},
        {"Listen_Prot", "listen_port"},
        {"server_tls_ssl", "server_tls_sslmode"},
        {"pool_mod", "pool_mode"},
        {"completely_unrelated", ""},
        {"port", ""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.typed);
        auto hint = suggest_name(c.typed, keys);
        CHECK(hint.value_or("") == c.hint);
    }
    try {
        load_text("[pgbouncer]\nmax_client_connections = 10\n");
        FAIL("loaded");
    } catch (const ConfigError& e) {
        CHECK(contains(e.what(), "did you mean \"max_client_conn\"?"));
    }
}

TEST_CASE("peering: peer_id and the [peers] entries are stored") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "peer_id = 2\n"
        "so_reuseport = 1\n"
        "[peers]\n"
        "1 = host=10.0.0.1\n"
        "2 = host=/var/run/pgtether port=6433\n"
        "3 = host=peer3.example port=7000\n"
        "3 = host=peer3.example port=7001\n");
    CHECK(cfg->peer_id == 2);
    CHECK(cfg->so_reuseport);
    REQUIRE(cfg->peers.size() == 3);
    CHECK(cfg->peers.at(1).host == "10.0.0.1");
    CHECK(cfg->peers.at(1).port == 6432);  // PgBouncer's default
    CHECK(cfg->peers.at(2).host == "/var/run/pgtether");
    CHECK(cfg->peers.at(2).port == 6433);
    CHECK(cfg->peers.at(3).port == 7001);  // a repeated id: the last entry wins
    CHECK_FALSE(setting_is_changeable("peer_id"));
    CHECK_FALSE(setting_is_changeable("so_reuseport"));
}

// ---------------------------------------------------------------------------------------------
// Every problem at once (pgtether --check)

TEST_CASE("check_config lists every problem in reading order and keeps the rest") {
    TempDir tmp;
    tmp.write("inc.ini", "pool_mode = sometimes\n");
    const std::string path = tmp.write("t.ini",
                                       "[pgbouncer]\n"               // 1
                                       "listen_port = 6433\n"        // 2
                                       "default_pool_size = many\n"  // 3
                                       "nosuchkey = 1\n"             // 4
                                       "this is not a line\n"        // 5
                                       "%include " +
                                           (tmp.path() / "inc.ini").string() +
                                           "\n"                                          // 6
                                           "[wrong]\n"                                   // 7
                                           "skipped = as part of the unknown section\n"  // 8
                                           "[databases]\n"                               // 9
                                           "app = host=127.0.0.1 colour=blue\n"          // 10
                                           "ok = host=127.0.0.1 port=5433\n");           // 11
    auto check = check_config(path);
    std::vector<std::string> got;
    for (const auto& e : check.errors)
        got.push_back(e.file() + ":" + std::to_string(e.line()) + ":" + e.key());
    const std::string inc = (tmp.path() / "inc.ini").string();
    // The ini reader's problems come first (it reads everything before the loader looks at
    // keys), then the loader's, each in file order.
    const std::vector<std::string> expected = {
        path + ":5:this",      path + ":3:default_pool_size",
        path + ":4:nosuchkey", inc + ":1:pool_mode",
        path + ":7:",          path + ":10:app",
    };
    std::string got_text;
    for (const auto& g : got)
        got_text += g + "\n";
    CAPTURE(got_text);
    CHECK(got == expected);
    REQUIRE(check.config);
    CHECK(check.config->listen_port == 6433);
    REQUIRE(check.config->databases.size() == 1);
    CHECK(check.config->databases[0].name == "ok");
    // load_config throws the first of them.
    auto first = error_of(path);
    REQUIRE(first.has_value());
    CHECK(first->line() == 5);

    // Whole-file problems come last; a valid file has none.
    const std::string no_main = tmp.write("n.ini", "[databases]\nx = host=a colour=1\n");
    auto none = check_config(no_main);
    REQUIRE(none.errors.size() == 2);
    CHECK(none.errors[0].line() == 2);
    CHECK(contains(none.errors[1].what(), "no [pgbouncer] section"));
    CHECK(
        check_config(tmp.write("v.ini", "[pgbouncer]\n[databases]\nx = host=a\n")).errors.empty());
}

TEST_CASE("per-user timeouts (1.24) and query_wait_timeout per database and user (1.26) load") {
    auto cfg = load_text(
        "[pgbouncer]\n"
        "[databases]\n"
        "d = host=x query_wait_timeout=5\n"
        "[users]\n"
        "u = query_timeout=3 idle_transaction_timeout=4 client_idle_timeout=6 "
        "query_wait_timeout=-1\n"
        "v = query_wait_timeout=0\n");
    CHECK(cfg->find_database("d")->query_wait_timeout == std::chrono::seconds(5));
    const UserConfig* u = cfg->find_user("u");
    REQUIRE(u != nullptr);
    CHECK(u->query_timeout == std::chrono::seconds(3));
    CHECK(u->idle_transaction_timeout == std::chrono::seconds(4));
    CHECK(u->client_idle_timeout == std::chrono::seconds(6));
    CHECK(u->query_wait_timeout == std::chrono::seconds(-1));  // "not set"
    CHECK(cfg->find_user("v")->query_wait_timeout == std::chrono::seconds(0));
    auto err = error_from_text("[pgbouncer]\n[users]\nu = query_wait_timeout=-2\n");
    CHECK(contains(err.what(), "for \"query_wait_timeout\""));
    // transaction_timeout (1.25), globally and per user.
    auto tt = load_text(
        "[pgbouncer]\ntransaction_timeout = 2.5\n[users]\nu = transaction_timeout=5\n");
    CHECK(tt->transaction_timeout == std::chrono::milliseconds(2500));
    CHECK(tt->find_user("u")->transaction_timeout == std::chrono::seconds(5));
}

TEST_CASE("a configured time in the loop clock's milliseconds") {
    CHECK(duration_ms(Duration{0}) == 0);
    CHECK(duration_ms(Duration{999}) == 0);
    CHECK(duration_ms(Duration{1'500}) == 1);
    CHECK(duration_ms(std::chrono::seconds(3600)) == 3'600'000);
    CHECK(duration_ms(Duration{-5'000}) == 0);  // never a wrapped-around huge timeout
}

TEST_CASE("SET auth_dbname: the console's name is refused, as PgBouncer's cf_set_authdb") {
    Config config;
    CHECK_THROWS_WITH_AS(set_config_value(config, "auth_dbname", "pgbouncer"),
                         doctest::Contains("cannot use the reserved \"pgbouncer\" database"),
                         ConfigError);
    CHECK(config.auth_dbname.empty());
    set_config_value(config, "auth_dbname", "authdb");
    CHECK(config.auth_dbname == "authdb");
}
