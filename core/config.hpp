// The immutable configuration snapshot, loaded from a PgBouncer-format ini file.
//
// A Config is built once by load_config() and then only read; reload builds a new one and swaps the
// shared pointer, so a worker never sees a half-applied change.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/ldap_options.hpp"

namespace pgtether {

// The most workers (`workers`) one process runs.
inline constexpr int kMaxWorkers = 64;

using Duration = std::chrono::microseconds;
// A configured time in whole milliseconds, the unit of the loop's clock (negative: 0).
[[nodiscard]] inline std::uint64_t duration_ms(Duration d) {
    return d.count() > 0 ? static_cast<std::uint64_t>(d.count() / 1000) : 0;
}

enum class PoolMode { Session, Transaction, Statement };
// PgBouncer's auth_type values (docs/tls-and-auth.md).
enum class AuthType { Any, Trust, Plain, Md5, ScramSha256, Cert, Hba, Pam, Ldap };
// client_tls_sslmode / server_tls_sslmode (docs/tls-and-auth.md), in increasing strictness.
enum class SslMode { Disable, Allow, Prefer, Require, VerifyCa, VerifyFull };
// advisory_lock_tracking: when the tether probes a backend for session advisory locks.
enum class LockTracking { On, EveryTransaction, Off };
// session_state_*: keep a kind of session state correct ("tether" for state that lives on a
// backend, "replay" for settings), or "ignore" it as PgBouncer does.
enum class StateHandling { Keep, Ignore };

const char* to_string(PoolMode mode);
const char* to_string(AuthType type);
const char* to_string(LockTracking tracking);
const char* to_string(SslMode mode);

// A problem in a config or auth file. what() is "FILE:LINE: KEY: message" (KEY omitted when the
// problem is not about one key, LINE 0 when it is about the whole file).
class ConfigError : public std::runtime_error {
public:
    ConfigError(std::string file, int line, std::string key, const std::string& message);
    const std::string& file() const { return file_; }
    int line() const { return line_; }
    const std::string& key() const { return key_; }

private:
    std::string file_;
    int line_;
    std::string key_;
};

// One [databases] entry. Unset optionals fall back to the [pgbouncer] defaults.
struct DatabaseConfig {
    std::string name;     // the name clients connect to; "*" for the fallback entry
    // Empty or starting with '/': Unix socket (directory); else host name / IP. May be a
    // comma-separated list (split_host_list): new connections go to its hosts in turn.
    std::string host;
    // The port, or (libpq style) a comma-separated list of one port per host of the host list;
    // `port` is the first, `ports` the whole list (empty when there is a single port, which then
    // serves every host): server_port_for (proxy/net/server_address.hpp).
    int port = 5432;
    std::vector<int> ports;
    std::string port_text = "5432";  // as written
    // Which servers of the host list serve this database (core/host_choice.hpp): libpq's
    // target_session_attrs; load_balance_hosts: round-robin or disable.
    std::string target_session_attrs = "any";
    std::string load_balance_hosts = "round-robin";
    std::string dbname;   // the database on the server; empty = same as name
    std::string user;     // forced server user; empty = the client's user
    std::string password; // password for `user` (or for the client's user) on the server
    std::string auth_user;    // per-database auth_user; empty = the global one
    std::string auth_query;   // per-database auth_query; empty = the global one
    std::string auth_dbname;  // per-database auth_dbname; empty = the global one
    std::string connect_query;
    std::optional<int> pool_size;
    std::optional<int> min_pool_size;
    std::optional<int> reserve_pool_size;  // key "reserve_pool"
    std::optional<PoolMode> pool_mode;
    std::optional<int> max_db_connections;
    // Client connections to this database (PgBouncer 1.24); unset or <= 0: the global one.
    std::optional<int> max_db_client_connections;
    // query_wait_timeout for this database's clients (PgBouncer 1.26); negative: not set.
    std::optional<Duration> query_wait_timeout;
    std::optional<int> tether_reserve_size;  // pgtether's own (docs/advisory-locks.md)
    // server_lifetime of this database's servers (PgBouncer 1.24); unset or 0: the global one.
    std::optional<Duration> server_lifetime;
    // Startup parameters PgBouncer lets a database entry preset for its server connections.
    std::optional<std::string> client_encoding;
    std::optional<std::string> datestyle;
    std::optional<std::string> timezone;
    std::optional<std::string> application_name;
    std::string definition;  // the connection string as written (core/config_diff.hpp)
    std::string source_file;
    int source_line = 0;
};

// The hosts of a host= value: PgBouncer (since 1.17) takes a comma-separated list and makes new
// connections to its hosts round robin ("a,b" gives {"a", "b"}; "" gives {}). Spaces around a
// name are dropped; an empty name is kept as "" (the loader refuses it).
std::vector<std::string> split_host_list(std::string_view host);

// One [users] entry.
struct UserConfig {
    std::string name;
    std::optional<PoolMode> pool_mode;
    std::optional<int> max_user_connections;
    // This user's pools' pool_size and reserve_pool_size, over the database's and the global
    // ones (PgBouncer 1.23 and 1.24).
    std::optional<int> pool_size;
    std::optional<int> reserve_pool_size;
    // This user's timeouts (PgBouncer 1.24; query_wait_timeout 1.26), over the global ones
    // (core/client_timeouts.hpp).
    std::optional<Duration> query_timeout;
    std::optional<Duration> idle_transaction_timeout;
    std::optional<Duration> transaction_timeout;  // 1.25
    std::optional<Duration> client_idle_timeout;
    std::optional<Duration> query_wait_timeout;
    // Client connections of this user (PgBouncer 1.24); unset or <= 0: the global one.
    std::optional<int> max_user_client_connections;
    std::string definition;  // as written
};

// One [peers] entry (PgBouncer 1.19 peering): another pgtether or PgBouncer process whose cancel
// keys carry `id` (core/peering.hpp). host is a name, an IP address or a Unix socket directory.
struct PeerConfig {
    int id = 0;
    std::string host;
    int port = 6432;
    // Cancel requests in flight to the peer at once (proxy/server/peer_cancels.hpp).
    std::optional<int> pool_size;
    std::string definition;  // as written
    std::string source_file;
    int source_line = 0;
};

struct Config {
    std::string config_file;  // absolute path of the main file
    // The main file as named on the command line, relative or not: SHOW CONFIG's conffile, which
    // PgBouncer shows that way.
    std::string config_file_as_given;

    // --- [pgbouncer] (also accepted as [pgtether]); defaults are PgBouncer 1.18's ---
    std::string logfile;
    std::string pidfile;
    std::string user;  // the Unix user to switch to when started as root (-u overrides it)
    std::vector<std::string> listen_addr;  // empty: Unix socket only; "*" = all IPv4 and IPv6
    int listen_port = 6432;
    std::string unix_socket_dir = "/tmp";  // empty: no Unix socket
    int unix_socket_mode = 0777;
    std::string unix_socket_group;
    AuthType auth_type = AuthType::Md5;
    std::string auth_file;
    std::string auth_hba_file;
    std::string auth_pam_service = "pgbouncer";  // auth_type = pam: the PAM service name
    std::string auth_ldap_options;  // auth_type = ldap: core/ldap_options.hpp (checked at load)
    // auth_ldap_options parsed, kept with it (load, SET, a reload keeping it): what an LDAP login
    // uses. nullopt while the text is empty.
    std::optional<LdapOptions> auth_ldap;
    std::string auth_ident_file;  // 1.23: user name maps for hba peer and cert lines
    std::string auth_user;
    std::string auth_query =
        "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM "
        "pg_authid WHERE rolname=$1 AND rolcanlogin";
    std::string auth_dbname;
    PoolMode pool_mode = PoolMode::Session;
    int max_client_conn = 100;
    int default_pool_size = 20;
    int min_pool_size = 0;
    int reserve_pool_size = 0;
    Duration reserve_pool_timeout = std::chrono::seconds(5);
    int max_db_connections = 0;    // 0 = unlimited
    int max_user_connections = 0;  // 0 = unlimited
    // Client connections per database and per user, the whole process (PgBouncer 1.24;
    // core/client_limits.hpp); 0 = unlimited.
    int max_db_client_connections = 0;
    int max_user_client_connections = 0;
    bool server_round_robin = false;
    std::vector<std::string> ignore_startup_parameters;
    bool application_name_add_host = false;
    // A client's simple Query message ends its connection (PgBouncer's disable_pqexec): only the
    // extended protocol, which carries one statement per Parse, is served. Fixed at start-up.
    bool disable_pqexec = false;
    Duration stats_period = std::chrono::seconds(60);
    bool syslog = false;
    std::string syslog_ident = "pgbouncer";
    std::string syslog_facility = "daemon";
    std::string log_format = "text";  // "text" (PgBouncer's lines) or "json" (docs/admin.md)
    bool log_connections = true;
    bool log_disconnections = true;
    bool log_pooler_errors = true;
    bool log_stats = true;
    // pgtether's own: log lines that quote a client's statement keep its literals (strings,
    // numbers, dollar bodies); off, they show `?` (protocol/statement_redaction.hpp).
    bool log_statement_text = false;
    int verbose = 0;
    std::vector<std::string> admin_users;
    std::vector<std::string> stats_users;
    std::string server_reset_query = "DISCARD ALL";
    bool server_reset_query_always = false;
    Duration server_check_delay = std::chrono::seconds(30);
    std::string server_check_query = "select 1";  // empty: no check
    bool server_fast_close = false;
    Duration server_lifetime = std::chrono::seconds(3600);
    Duration server_idle_timeout = std::chrono::seconds(600);
    // A database the "*" entry made is dropped after this long without a client or server
    // (Worker::drop_idle_auto_databases); 0 = never.
    Duration autodb_idle_timeout = std::chrono::seconds(3600);
    Duration server_connect_timeout = std::chrono::seconds(15);
    Duration server_login_retry = std::chrono::seconds(15);
    // A host of a host list that refused, timed out or had the wrong role (target_session_attrs)
    // is skipped this long (core/host_choice.hpp). pgtether's own.
    Duration server_host_backoff = std::chrono::seconds(1);
    Duration client_login_timeout = std::chrono::seconds(60);
    Duration query_timeout{0};
    Duration query_wait_timeout = std::chrono::seconds(120);
    // Whole seconds a logged-in client waits for a server before it is told, once, that it is
    // queued (PgBouncer 1.23's NOTICE); 0 = never.
    int query_wait_notify = 5;
    Duration cancel_wait_timeout = std::chrono::seconds(10);  // 1.22; a cancel not yet forwarded
    Duration client_idle_timeout{0};
    Duration idle_transaction_timeout{0};
    // A client in a transaction longer than this is disconnected (PgBouncer 1.25); 0 = off.
    Duration transaction_timeout{0};
    Duration suspend_timeout = std::chrono::seconds(10);
    int pkt_buf = 4096;
    int max_packet_size = 2147483647;
    int max_prepared_statements = 200;  // per backend; 0 disables statement translation
    int listen_backlog = 128;
    int sbuf_loopcnt = 5;
    // Iterations of the SCRAM secrets pgtether makes from plain-text auth_file passwords (and of
    // the mock secrets of unknown users, which must look the same).
    int scram_iterations = 4096;
    bool so_reuseport = false;  // SO_REUSEPORT on the TCP listeners (docs/deployment.md)
    int peer_id = 0;            // this process's id among its [peers]; 0 = no peering
    // Event loops on threads of their own (docs/architecture.md, "Workers"); fixed at start-up.
    int workers = 1;
    bool tcp_defer_accept = true;  // TCP_DEFER_ACCEPT on the TCP listeners (1 s, PgBouncer's)
    // PgBouncer 1.20's parameters tracked per client on top of its five. pgtether tracks
    // IntervalStyle too; with session_settings = replay every setting is replayed anyway
    // (core/config.cpp, track_extra_refusal).
    std::vector<std::string> track_extra_parameters = {"IntervalStyle"};
    int tcp_socket_buffer = 0;
    bool tcp_keepalive = true;
    int tcp_keepcnt = 0;
    int tcp_keepidle = 0;
    int tcp_keepintvl = 0;
    int tcp_user_timeout = 0;

    // --- TLS (docs/tls-and-auth.md); defaults are PgBouncer's ---
    SslMode client_tls_sslmode = SslMode::Disable;
    std::string client_tls_key_file;
    std::string client_tls_cert_file;
    std::string client_tls_ca_file;
    std::string client_tls_protocols = "secure";
    std::string client_tls_ciphers = "fast";
    std::string client_tls13_ciphers;
    std::string client_tls_dheparams = "auto";
    std::string client_tls_ecdhcurve = "auto";
    SslMode server_tls_sslmode = SslMode::Prefer;  // PgBouncer 1.20+
    std::string server_tls_key_file;
    std::string server_tls_cert_file;
    std::string server_tls_ca_file;
    std::string server_tls_protocols = "secure";
    std::string server_tls_ciphers = "fast";
    std::string server_tls13_ciphers;
    // Which authentication requests a server may send (libpq's require_auth; empty: any).
    std::string server_require_auth;

    // --- pgtether's own keys (in the same section) ---
    LockTracking advisory_lock_tracking = LockTracking::On;
    std::vector<std::string> advisory_lock_functions;  // extra names, lower-cased
    // Lock-wrapper discovery from each database's catalog (docs/advisory-locks.md).
    bool advisory_lock_discovery = true;
    Duration advisory_lock_discovery_interval = std::chrono::seconds(60);
    // How often each database's catalog watch asks whether the catalog moved (0: no watch).
    Duration advisory_lock_catalog_check_interval{std::chrono::seconds(1)};
    Duration tethered_idle_timeout{0};                 // 0 = never
    // How long a tethered client whose locks pgtether could not count stays idle before its
    // backend is probed (docs/advisory-locks.md); 0 = probe at every such transaction's end.
    Duration tether_probe_delay{std::chrono::seconds(1)};
    // Servers a pool may open on top of pool_size for tethered clients; -1 = as many as the
    // pool's size (core/pool_capacity.hpp).
    int tether_reserve_size = -1;
    // What one client can make pgtether hold (issue 15, docs/configuration.md): the largest
    // message assembled whole from its input (larger ones are streamed or refused,
    // core/message_budget.hpp), and the bytes of statement text one client may keep prepared
    // and one server connection may hold prepared.
    int client_buffer_limit = 1048576;
    int max_prepared_statement_bytes = 8388608;
    // The bytes of statement text the whole process keeps for named prepared statements, all
    // clients and workers together (a Parse that would pass it is refused with 54000).
    int max_prepared_statement_bytes_total = 134217728;
    // Other session state (docs/session-state.md).
    StateHandling session_state_temp_tables = StateHandling::Keep;
    StateHandling session_state_listen = StateHandling::Keep;
    // LISTEN (docs/session-state.md, "LISTEN and NOTIFY"): "multiplex" answers a client's lone
    // LISTEN/UNLISTEN itself and delivers through one listening connection per pool; "tether"
    // lets the backend run them and tethers the listener to it.
    std::string listen_mode = "multiplex";
    [[nodiscard]] bool multiplexes_listen() const { return listen_mode == "multiplex"; }
    // The notification bytes one client may leave unread (held or unsent) before it is
    // disconnected, as PostgreSQL would drop a listener that never reads.
    int listen_client_buffer = 1048576;
    // A listener whose socket stays backed up this long without taking anything is disconnected:
    // meanwhile its pool's listening connection waits for it (0: never).
    Duration listen_stall_timeout = std::chrono::seconds(10);
    StateHandling session_state_cursors = StateHandling::Keep;
    StateHandling session_state_prepare = StateHandling::Keep;  // SQL-level PREPARE
    StateHandling session_state_load = StateHandling::Keep;
    StateHandling session_settings = StateHandling::Keep;       // SET / startup parameters
    // The OpenMetrics/Prometheus endpoint (docs/admin.md); off while the port is 0.
    std::vector<std::string> metrics_listen_addr = {"127.0.0.1"};
    int metrics_listen_port = 0;

    // Recognised [pgbouncer] keys that have no field above, as written (for SHOW CONFIG).
    std::map<std::string, std::string> other_settings;

    // --- [databases] and [users] ---
    std::vector<DatabaseConfig> databases;  // in file order, without the "*" entry
    std::optional<DatabaseConfig> fallback_database;
    std::map<std::string, UserConfig> users;
    // --- [peers], by peer id ---
    std::map<int, PeerConfig> peers;

    // The entry for `name`, else the "*" fallback entry (whose empty dbname means "the name the
    // client asked for"), else nullptr.
    const DatabaseConfig* find_database(const std::string& name) const;
    const UserConfig* find_user(const std::string& name) const;
};

// The name among `known` that `name` most likely meant: a few typing mistakes away (edit
// distance, case ignored), or a longer or shorter spelling of it; nullopt if none is close.
std::optional<std::string> suggest_name(std::string_view name,
                                        const std::vector<std::string_view>& known);

// Settings that work, but probably not as their author expects; logged at start-up and reload.
// Today: "options" in ignore_startup_parameters while session_settings = keep (the client's
// options are then accepted and ignored, not replayed: ignore_startup_parameters wins).
std::vector<std::string> configuration_warnings(const Config& config);

// The server_lifetime of `database`'s servers, as PgBouncer 1.24's pool_server_lifetime resolves
// it: the entry's value when set and not 0, else the global one. 0 there means a server is used
// once and closed when released.
[[nodiscard]] Duration server_lifetime_for(const Config& config, const DatabaseConfig& database);

// One [pgbouncer] setting as the admin console's SHOW CONFIG lists it.
struct ConfigSetting {
    std::string key;
    std::optional<std::string> value;          // nullopt: not set and no default (NULL)
    std::optional<std::string> default_value;  // the key's default
    bool changeable = true;                    // RELOAD / SET can change it while running
    bool supported = true;                     // pgtether acts on it
};

// Every [pgbouncer] key of the table with its value in `config`, in alphabetical order.
std::vector<ConfigSetting> describe_settings(const Config& config);

// Whether `key` names a [pgbouncer] setting a running pgtether can change.
[[nodiscard]] bool setting_is_changeable(std::string_view key);

// The admin console's SET: parses `value` as the ini loader would and stores it in `config`.
// Throws ConfigError (file "SET") for an unknown key, a bad value or a key that cannot change at
// runtime, and for a value pgtether does not act on (a key's refusal, as at load).
void set_config_value(Config& config, std::string_view key, std::string_view value);

// Reload: settings a running pgtether cannot change (listeners, pidfile, ...) keep their running
// values in `next`. Returns the names of those whose value `next` wanted to change.
std::vector<std::string> keep_fixed_settings(const Config& running, Config& next);

// Reads `path` and everything it %includes. Throws ConfigError on any problem: unreadable file,
// syntax error, unknown section or key, invalid value, include loop (the first one, in reading
// order).
std::shared_ptr<const Config> load_config(const std::string& path);

// The same, with every problem (pgtether --check): `errors` in reading order, each line with a
// problem skipped, whole-file problems last; `config` is what the rest of the file says.
struct ConfigCheck {
    std::shared_ptr<Config> config;
    std::vector<ConfigError> errors;
};
ConfigCheck check_config(const std::string& path);

}  // namespace pgtether
