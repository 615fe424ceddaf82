// Loads a PgBouncer-format ini file into a Config.
//
// Behaviour follows PgBouncer (src/main.c's key table, src/loader.c's [databases]/[users]/[peers]
// parsers, libusual's cfparser.c); docs/configuration.md is the user-facing reference and lists
// every place where pgtether is deliberately stricter. The tables below are the single place that
// says which keys exist and which ones pgtether honours.
#include "core/config.hpp"
#include "core/ldap_options.hpp"

#include <algorithm>
#include <cctype>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/peering.hpp"
#include "core/config_keys.hpp"
#include "core/config_values.hpp"
#include "core/ini_file.hpp"
#include "core/require_auth.hpp"
#include "core/session_params.hpp"
#include "protocol/scram.hpp"
#include "protocol/ascii.hpp"

namespace pgtether {

// ---------------------------------------------------------------------------------------------
// ConfigError, to_string, lookups

namespace {

std::string format_error(const std::string& file, int line, const std::string& key,
                         const std::string& message) {
    std::string text = file;
    if (line > 0) text += ":" + std::to_string(line);
    text += ": ";
    if (!key.empty()) text += key + ": ";
    return text + message;
}

}  // namespace

ConfigError::ConfigError(std::string file, int line, std::string key, const std::string& message)
    : std::runtime_error(format_error(file, line, key, message)),
      file_(std::move(file)),
      line_(line),
      key_(std::move(key)) {}

const char* to_string(PoolMode mode) {
    switch (mode) {
        case PoolMode::Session:
            return "session";
        case PoolMode::Transaction:
            return "transaction";
        case PoolMode::Statement:
            return "statement";
    }
    return "?";
}

const char* to_string(AuthType type) {
    switch (type) {
        case AuthType::Any:
            return "any";
        case AuthType::Trust:
            return "trust";
        case AuthType::Plain:
            return "plain";
        case AuthType::Md5:
            return "md5";
        case AuthType::ScramSha256:
            return "scram-sha-256";
        case AuthType::Cert:
            return "cert";
        case AuthType::Hba:
            return "hba";
        case AuthType::Pam:
            return "pam";
        case AuthType::Ldap:
            return "ldap";
    }
    return "?";
}

const char* to_string(LockTracking tracking) {
    switch (tracking) {
        case LockTracking::On:
            return "on";
        case LockTracking::EveryTransaction:
            return "every_transaction";
        case LockTracking::Off:
            return "off";
    }
    return "?";
}

const char* to_string(SslMode mode) {
    switch (mode) {
        case SslMode::Disable:
            return "disable";
        case SslMode::Allow:
            return "allow";
        case SslMode::Prefer:
            return "prefer";
        case SslMode::Require:
            return "require";
        case SslMode::VerifyCa:
            return "verify-ca";
        case SslMode::VerifyFull:
            return "verify-full";
    }
    return "?";
}

std::vector<std::string> split_host_list(std::string_view host) {
    std::vector<std::string> hosts;
    if (host.empty()) return hosts;
    for (std::size_t start = 0;;) {
        std::size_t comma = host.find(',', start);
        std::string_view item = host.substr(start, comma == std::string_view::npos ? host.npos
                                                                                 : comma - start);
        auto blank = [](char c) { return c == ' ' || c == '\t'; };
        while (!item.empty() && blank(item.front())) item.remove_prefix(1);
        while (!item.empty() && blank(item.back())) item.remove_suffix(1);
        hosts.emplace_back(item);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return hosts;
}

namespace {

// Levenshtein distance (insertions, deletions, substitutions), two rows.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> previous(b.size() + 1);
    std::vector<std::size_t> current(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        current[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
        }
        std::swap(previous, current);
    }
    return previous[b.size()];
}

}  // namespace

std::optional<std::string> suggest_name(std::string_view name,
                                        const std::vector<std::string_view>& known) {
    std::string low;
    for (char c : name) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::size_t allowed = std::max<std::size_t>(2, low.size() / 4);
    std::optional<std::string> best;
    std::pair<bool, std::size_t> best_rank;  // (not an extension, distance): smaller is better
    for (auto candidate : known) {
        std::size_t distance = edit_distance(low, candidate);
        // A longer or shorter spelling of a key ("max_client_connections" for max_client_conn,
        // "server_tls_ssl" for server_tls_sslmode) is the likeliest meaning, before typos.
        const std::size_t shorter = std::min(low.size(), candidate.size());
        bool extends = shorter >= 6 && (low.starts_with(candidate) || candidate.starts_with(low));
        if (distance > allowed && !extends) continue;
        std::pair<bool, std::size_t> rank{!extends, distance};
        if (!best || rank < best_rank) {
            best = std::string(candidate);
            best_rank = rank;
        }
    }
    return best;
}

Duration server_lifetime_for(const Config& config, const DatabaseConfig& database) {
    if (database.server_lifetime && database.server_lifetime->count() != 0) {
        return *database.server_lifetime;
    }
    return config.server_lifetime;
}

std::vector<std::string> configuration_warnings(const Config& config) {
    std::vector<std::string> warnings;
    bool ignores_options = false;
    for (const auto& name : config.ignore_startup_parameters) {
        std::string lower = name;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        ignores_options = ignores_options || lower == "options";
    }
    if (ignores_options && config.session_settings == StateHandling::Keep) {
        warnings.emplace_back(
            "ignore_startup_parameters lists \"options\": settings clients send in options "
            "(-c name=value) are accepted and ignored, not replayed on the servers, except "
            "client_encoding, DateStyle, TimeZone, IntervalStyle, standard_conforming_strings "
            "and application_name, which are applied as PgBouncer does "
            "(session_settings = replay replays all of them only when options is not listed; "
            "docs/session-state.md)");
    }
    return warnings;
}

const DatabaseConfig* Config::find_database(const std::string& name) const {
    for (const auto& db : databases) {
        if (db.name == name) return &db;
    }
    return fallback_database ? &*fallback_database : nullptr;
}

const UserConfig* Config::find_user(const std::string& name) const {
    auto it = users.find(name);
    return it == users.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------------------------
// Key tables

namespace {

constexpr auto kIntMax = std::int64_t{std::numeric_limits<int>::max()};

enum class Kind {
    Int,             // cf_set_int: strtol base 0 (decimal, 0x hex, 0 octal), within [min, max]
    Decimal,         // atoi-style value in a connection string, within [min, max]
    Bool,            // an integer, non-zero = on (PgBouncer's booleans are CF_INT)
    Seconds,         // cf_set_time_usec: seconds, fractions allowed
    IntSeconds,      // whole seconds read like Int (stats_period)
    DecimalSeconds,  // whole seconds in a connection string (atoi(val) * USEC)
    String,          // verbatim
    List,            // comma/space separated
    FunctionList,    // List of SQL function names, lower-cased
    Mode,            // octal file mode
    Choice,          // one of `choices`, case-insensitive
    RequireAuth,     // libpq's require_auth list (core/require_auth.hpp), kept as written
    Workers,         // an Int within [min, max], or "auto": one per CPU (workers)
};

// Parsed values. Bool and Mode are stored as integers so that comparison with a key's neutral
// value is plain equality.
using Value = std::variant<std::int64_t, Duration, std::string, std::vector<std::string>>;

template <typename Owner>
using Target =
    std::variant<std::monostate, int Owner::*, bool Owner::*, Duration Owner::*,
                 std::string Owner::*, std::vector<std::string> Owner::*, PoolMode Owner::*,
                 AuthType Owner::*, LockTracking Owner::*, SslMode Owner::*,
                 StateHandling Owner::*,
                 std::optional<int> Owner::*, std::optional<Duration> Owner::*,
                 std::optional<PoolMode> Owner::*, std::optional<std::string> Owner::*>;

template <typename Owner>
struct KeySpec {
    std::string_view name;
    Kind kind = Kind::String;
    // Whether pgtether acts on the key (kHonoured). A key it does not act on is refused (with
    // `refusal`) unless its value equals `neutral`, which asks for nothing.
    bool supported = false;
    Target<Owner> target = {};
    // The value that changes nothing. Honoured keys: the default (PgBouncer 1.18's, matching
    // Config's initialiser). Unsupported keys: the value that asks for nothing pgtether lacks --
    // PgBouncer 1.18's default, or for keys added later the value that leaves the feature off.
    // nullopt: no such value (per-database/per-user overrides); every use is reported.
    std::optional<std::string_view> neutral = std::nullopt;
    std::int64_t min = 0;
    std::int64_t max = kIntMax;
    std::span<const std::string_view> choices = {};
    // Whether a running pgtether can take a new value (RELOAD, SET). Fixed keys (listeners,
    // pidfile, ...) keep the value they had at start-up; PgBouncer's SHOW CONFIG lists the same
    // ones as changeable = no.
    bool changeable = true;
    // Why pgtether refuses every value but `neutral` (supported = false): what it does instead,
    // what to use. No key is accepted and then ignored.
    std::string_view refusal = {};

    KeySpec fixed() const {
        KeySpec k = *this;
        k.changeable = false;
        return k;
    }
    KeySpec range(std::int64_t lo, std::int64_t hi) const {
        KeySpec k = *this;
        k.min = lo;
        k.max = hi;
        return k;
    }
    KeySpec refused(std::string_view why) const {
        KeySpec k = *this;
        k.supported = false;
        k.refusal = why;
        return k;
    }
    KeySpec among(std::span<const std::string_view> c) const {
        KeySpec k = *this;
        k.choices = c;
        return k;
    }
};

constexpr bool kHonoured = true;

template <typename Owner>
KeySpec<Owner> key(std::string_view name, Kind kind, bool supported,
                   std::optional<std::string_view> neutral, Target<Owner> target = {}) {
    return KeySpec<Owner>{name, kind, supported, target, neutral};
}

constexpr std::array<std::string_view, 3> kPoolModes = {"session", "transaction", "statement"};
constexpr std::array<std::string_view, 9> kAuthTypes = {
    "any", "trust", "plain", "md5", "scram-sha-256", "cert", "hba", "pam", "ldap"};
constexpr std::array<std::string_view, 6> kSslModes = {"disable", "allow",     "prefer",
                                                       "require", "verify-ca", "verify-full"};
// log_format (pgtether's own): PgBouncer's text lines, or one JSON object per line.
constexpr std::array<std::string_view, 2> kLogFormats = {"text", "json"};

// syslog_facility: the names PgBouncer (libusual's logging.c) maps to LOG_* facilities.
constexpr std::array<std::string_view, 12> kSyslogFacilities = {
    "auth",   "authpriv", "daemon", "user",   "local0", "local1",
    "local2", "local3",   "local4", "local5", "local6", "local7"};
constexpr std::array<std::string_view, 3> kLockTracking = {"on", "every_transaction", "off"};
constexpr std::array<std::string_view, 2> kTetherChoices = {"tether", "ignore"};
constexpr std::array<std::string_view, 2> kListenModes = {"multiplex", "tether"};
// A boolean spelt like pgtether's other switches (advisory_lock_tracking = on | off), with
// PgBouncer's 1 and 0 accepted too.
constexpr std::array<std::string_view, 4> kOnOff = {"on", "off", "1", "0"};
constexpr std::array<std::string_view, 2> kReplayChoices = {"replay", "ignore"};
constexpr std::array<std::string_view, 2> kLoadBalanceHosts = {"disable", "round-robin"};
constexpr std::array<std::string_view, 6> kTargetSessionAttrs = {
    "any", "read-write", "read-only", "primary", "standby", "prefer-standby"};

// The global auth_dbname may not name the admin console (PgBouncer's cf_set_authdb, its words).
// Values of a valid form that cannot work: a reserved auth_dbname, LDAP options that do not
// parse (core/ldap_options.hpp; checked here, not at the first LDAP login).
std::optional<std::string> value_refusal(std::string_view name, std::string_view value) {
    if (name == "auth_ldap_options" && !value.empty()) {
        auto parsed = parse_ldap_options(value);
        if (auto* error = std::get_if<std::string>(&parsed)) return *error;
        return std::nullopt;
    }
    if (name != "auth_dbname" || (value != "pgbouncer" && value != "pgtether")) return std::nullopt;
    return "cannot use the reserved \"" + std::string(value) + "\" database as an auth_dbname";
}

// The settings kept parsed beside their text (Config::auth_ldap), brought in line with it after
// every change of the text: a load, a SET, a reload that keeps the running value.
void refresh_parsed_settings(Config& config) {
    config.auth_ldap.reset();
    if (config.auth_ldap_options.empty()) return;
    auto parsed = parse_ldap_options(config.auth_ldap_options);
    if (auto* options = std::get_if<LdapOptions>(&parsed)) config.auth_ldap = std::move(*options);
}

// track_extra_parameters asks for parameters to be kept per client and restored on whichever
// backend serves it. With session_settings = replay every setting is; with ignore (PgBouncer's
// behaviour) pgtether keeps the parameters of core/session_params.hpp, PgBouncer's five and
// IntervalStyle, and refuses to promise others.
std::optional<std::string> track_extra_refusal(const std::vector<std::string>& names,
                                               StateHandling session_settings) {
    if (session_settings == StateHandling::Keep) return std::nullopt;
    for (const auto& name : names) {
        if (!find_tracked_param(name)) {
            return "\"" + name + "\" is not tracked with session_settings = ignore (pgtether " +
                   "keeps client_encoding, DateStyle, TimeZone, IntervalStyle, " +
                   "standard_conforming_strings and application_name); use session_settings = " +
                   "replay, which restores every setting a client made";
        }
    }
    return std::nullopt;
}

// auth_type values pgtether can run; the others load (a real pgbouncer.ini must load) and are
// reported as unsupported.

using GlobalKey = KeySpec<Config>;
using C = Config;

// Every [pgbouncer] key of PgBouncer 1.18 and of later releases up to 1.25, plus pgtether's own.
// kHonoured rows are acted on by pgtether; .refused() rows refuse any value but the neutral one,
// saying why.
const std::vector<GlobalKey>& global_keys() {
    static const std::vector<GlobalKey> keys = {
        key<C>("admin_users", Kind::List, kHonoured, "", &C::admin_users),
        key<C>("application_name_add_host", Kind::Bool, kHonoured, "0",
               &C::application_name_add_host),
        key<C>("auth_dbname", Kind::String, kHonoured, "", &C::auth_dbname),  // 1.20
        key<C>("auth_file", Kind::String, kHonoured, "", &C::auth_file),
        key<C>("auth_hba_file", Kind::String, kHonoured, "", &C::auth_hba_file),
        key<C>("auth_ident_file", Kind::String, kHonoured, "", &C::auth_ident_file),  // 1.23
        key<C>("auth_ldap_options", Kind::String, kHonoured, "", &C::auth_ldap_options),  // 1.25
        // pgtether's own: the PAM service of auth_type = pam (PgBouncer's is fixed, "pgbouncer";
        // PostgreSQL's pg_hba.conf says it with pamservice=).
        key<C>("auth_pam_service", Kind::String, kHonoured, "pgbouncer", &C::auth_pam_service),
        key<C>("auth_query", Kind::String, kHonoured,
               "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword "
               "END FROM pg_authid WHERE rolname=$1 AND rolcanlogin",
               &C::auth_query),
        key<C>("auth_type", Kind::Choice, kHonoured, "md5", &C::auth_type).among(kAuthTypes),
        key<C>("auth_user", Kind::String, kHonoured, "", &C::auth_user),
        key<C>("autodb_idle_timeout", Kind::Seconds, kHonoured, "3600", &C::autodb_idle_timeout),
        key<C>("cancel_wait_timeout", Kind::Seconds, kHonoured, "10",
               &C::cancel_wait_timeout),  // 1.22
        key<C>("client_idle_timeout", Kind::Seconds, kHonoured, "0", &C::client_idle_timeout),
        key<C>("client_login_timeout", Kind::Seconds, kHonoured, "60", &C::client_login_timeout),
        key<C>("client_tls13_ciphers", Kind::String, kHonoured, "",
               &C::client_tls13_ciphers),  // 1.21
        key<C>("client_tls_ca_file", Kind::String, kHonoured, "", &C::client_tls_ca_file),
        key<C>("client_tls_cert_file", Kind::String, kHonoured, "", &C::client_tls_cert_file),
        key<C>("client_tls_ciphers", Kind::String, kHonoured, "fast", &C::client_tls_ciphers),
        key<C>("client_tls_dheparams", Kind::String, kHonoured, "auto", &C::client_tls_dheparams),
        key<C>("client_tls_ecdhcurve", Kind::String, kHonoured, "auto", &C::client_tls_ecdhcurve),
        key<C>("client_tls_key_file", Kind::String, kHonoured, "", &C::client_tls_key_file),
        key<C>("client_tls_protocols", Kind::String, kHonoured, "secure", &C::client_tls_protocols),
        key<C>("client_tls_sslmode", Kind::Choice, kHonoured, "disable", &C::client_tls_sslmode)
            .among(kSslModes),
        key<C>("conffile", Kind::String, kHonoured, ""),
        key<C>("default_pool_size", Kind::Int, kHonoured, "20", &C::default_pool_size),
        key<C>("disable_pqexec", Kind::Bool, kHonoured, "0", &C::disable_pqexec).fixed(),
        // Upper bounds on how long a DNS answer is reused: pgtether resolves every host name at
        // each connect (getaddrinfo, so the system's own cache applies), within any bound.
        key<C>("dns_max_ttl", Kind::Seconds, kHonoured, "15"),
        key<C>("dns_nxdomain_ttl", Kind::Seconds, kHonoured, "15"),
        key<C>("dns_zone_check_period", Kind::Seconds, kHonoured, "0")
            .refused("pgtether resolves host names at every connect (getaddrinfo), so a changed "
                     "zone is seen at the next connection without serial checks; remove the key"),
        key<C>("idle_transaction_timeout", Kind::Seconds, kHonoured, "0",
               &C::idle_transaction_timeout),
        key<C>("ignore_startup_parameters", Kind::List, kHonoured, "",
               &C::ignore_startup_parameters),
        // Windows service names: PgBouncer uses them only on Windows; no effect on Linux there
        // either.
        key<C>("job_name", Kind::String, kHonoured, "pgbouncer").fixed(),
        key<C>("listen_addr", Kind::List, kHonoured, "", &C::listen_addr).fixed(),
        key<C>("listen_backlog", Kind::Int, kHonoured, "128", &C::listen_backlog).fixed(),
        key<C>("listen_port", Kind::Int, kHonoured, "6432", &C::listen_port)
            .range(1, 65535)
            .fixed(),
        key<C>("log_connections", Kind::Bool, kHonoured, "1", &C::log_connections),
        key<C>("log_disconnections", Kind::Bool, kHonoured, "1", &C::log_disconnections),
        key<C>("log_format", Kind::Choice, kHonoured, "text", &C::log_format).among(kLogFormats),
        key<C>("log_pooler_errors", Kind::Bool, kHonoured, "1", &C::log_pooler_errors),
        key<C>("log_stats", Kind::Bool, kHonoured, "1", &C::log_stats),
        key<C>("logfile", Kind::String, kHonoured, "", &C::logfile),
        key<C>("max_client_conn", Kind::Int, kHonoured, "100", &C::max_client_conn)
            .range(1, kIntMax),
        key<C>("max_db_client_connections", Kind::Int, kHonoured, "0",  // 1.24
               &C::max_db_client_connections),
        key<C>("max_db_connections", Kind::Int, kHonoured, "0", &C::max_db_connections),
        key<C>("max_packet_size", Kind::Int, kHonoured, "2147483647", &C::max_packet_size)
            .range(1, kIntMax),
        key<C>("max_prepared_statements", Kind::Int, kHonoured, "200", &C::max_prepared_statements)
            .range(0, kIntMax),                                           // 1.21
        key<C>("max_user_client_connections", Kind::Int, kHonoured, "0",  // 1.24
               &C::max_user_client_connections),
        key<C>("max_user_connections", Kind::Int, kHonoured, "0", &C::max_user_connections),
        key<C>("min_pool_size", Kind::Int, kHonoured, "0", &C::min_pool_size),
        key<C>("peer_id", Kind::Int, kHonoured, "0", &C::peer_id).range(0, 16383).fixed(),  // 1.19
        key<C>("pidfile", Kind::String, kHonoured, "", &C::pidfile).fixed(),
        key<C>("pkt_buf", Kind::Int, kHonoured, "4096", &C::pkt_buf).range(1, kIntMax).fixed(),
        key<C>("pool_mode", Kind::Choice, kHonoured, "session", &C::pool_mode).among(kPoolModes),
        key<C>("query_timeout", Kind::Seconds, kHonoured, "0", &C::query_timeout),
        key<C>("query_wait_notify", Kind::Int, kHonoured, "5",  // 1.23; PgBouncer 1.25's default
               &C::query_wait_notify),
        key<C>("query_wait_timeout", Kind::Seconds, kHonoured, "120", &C::query_wait_timeout),
        key<C>("reserve_pool_size", Kind::Int, kHonoured, "0", &C::reserve_pool_size),
        key<C>("reserve_pool_timeout", Kind::Seconds, kHonoured, "5", &C::reserve_pool_timeout),
        key<C>("resolv_conf", Kind::String, kHonoured, "")
            .refused("pgtether resolves host names with the system resolver (getaddrinfo), which "
                     "reads /etc/resolv.conf; put the name servers there and remove the key")
            .fixed(),
        key<C>("sbuf_loopcnt", Kind::Int, kHonoured, "5", &C::sbuf_loopcnt)
            .refused("pgtether's event loop bounds each connection's turn by itself (libuv "
                     "reads), so no connection can stall the others; remove the key"),
        // 1.21. At most protocol::kScramMaxIterations: one login's PBKDF2 stays bounded.
        key<C>("scram_iterations", Kind::Int, kHonoured, "4096", &C::scram_iterations)
            .range(1, protocol::kScramMaxIterations),
        key<C>("server_check_delay", Kind::Seconds, kHonoured, "30", &C::server_check_delay),
        key<C>("server_check_query", Kind::String, kHonoured, "select 1", &C::server_check_query),
        key<C>("server_connect_timeout", Kind::Seconds, kHonoured, "15",
               &C::server_connect_timeout),
        key<C>("server_fast_close", Kind::Bool, kHonoured, "0", &C::server_fast_close),
        key<C>("server_idle_timeout", Kind::Seconds, kHonoured, "600", &C::server_idle_timeout),
        key<C>("server_lifetime", Kind::Seconds, kHonoured, "3600", &C::server_lifetime),
        key<C>("server_login_retry", Kind::Seconds, kHonoured, "15", &C::server_login_retry),
        key<C>("server_host_backoff", Kind::Seconds, kHonoured, "1",
               &C::server_host_backoff),  // pgtether's own
        key<C>("server_reset_query", Kind::String, kHonoured, "DISCARD ALL",
               &C::server_reset_query),
        key<C>("server_reset_query_always", Kind::Bool, kHonoured, "0",
               &C::server_reset_query_always),
        key<C>("server_require_auth", Kind::RequireAuth, kHonoured, "",
               &C::server_require_auth),  // pgtether
        key<C>("server_round_robin", Kind::Bool, kHonoured, "0", &C::server_round_robin),
        key<C>("server_tls13_ciphers", Kind::String, kHonoured, "",
               &C::server_tls13_ciphers),  // 1.21
        key<C>("server_tls_ca_file", Kind::String, kHonoured, "", &C::server_tls_ca_file),
        key<C>("server_tls_cert_file", Kind::String, kHonoured, "", &C::server_tls_cert_file),
        key<C>("server_tls_ciphers", Kind::String, kHonoured, "fast", &C::server_tls_ciphers),
        key<C>("server_tls_key_file", Kind::String, kHonoured, "", &C::server_tls_key_file),
        key<C>("server_tls_protocols", Kind::String, kHonoured, "secure", &C::server_tls_protocols),
        key<C>("server_tls_sslmode", Kind::Choice, kHonoured, "prefer", &C::server_tls_sslmode)
            .among(kSslModes),
        key<C>("service_name", Kind::String, kHonoured, "pgbouncer").fixed(),  // as job_name
        key<C>("so_reuseport", Kind::Bool, kHonoured, "0", &C::so_reuseport).fixed(),
        key<C>("stats_period", Kind::IntSeconds, kHonoured, "60", &C::stats_period)
            .range(1, kIntMax),
        key<C>("stats_users", Kind::List, kHonoured, "", &C::stats_users),
        key<C>("suspend_timeout", Kind::Seconds, kHonoured, "10", &C::suspend_timeout)
            .refused("SUSPEND and online restart (-R) are not supported: restart with PAUSE, or "
                     "with so_reuseport and SHUTDOWN WAIT_FOR_CLIENTS; remove the key"),
        key<C>("syslog", Kind::Bool, kHonoured, "0", &C::syslog),
        key<C>("syslog_facility", Kind::Choice, kHonoured, "daemon", &C::syslog_facility)
            .among(kSyslogFacilities),
        key<C>("syslog_ident", Kind::String, kHonoured, "pgbouncer", &C::syslog_ident),
        key<C>("tcp_defer_accept", Kind::Bool, kHonoured, "1", &C::tcp_defer_accept),
        key<C>("tcp_keepalive", Kind::Bool, kHonoured, "1", &C::tcp_keepalive),
        key<C>("tcp_keepcnt", Kind::Int, kHonoured, "0", &C::tcp_keepcnt).range(0, kIntMax),
        key<C>("tcp_keepidle", Kind::Int, kHonoured, "0", &C::tcp_keepidle).range(0, kIntMax),
        key<C>("tcp_keepintvl", Kind::Int, kHonoured, "0", &C::tcp_keepintvl).range(0, kIntMax),
        key<C>("tcp_socket_buffer", Kind::Int, kHonoured, "0", &C::tcp_socket_buffer)
            .range(0, kIntMax),
        key<C>("tcp_user_timeout", Kind::Int, kHonoured, "0", &C::tcp_user_timeout)
            .range(0, kIntMax),
        key<C>("track_extra_parameters", Kind::List, kHonoured, "IntervalStyle",  // 1.20
               &C::track_extra_parameters),
        key<C>("transaction_timeout", Kind::Seconds, kHonoured, "0",  // 1.25
               &C::transaction_timeout),
        key<C>("unix_socket_dir", Kind::String, kHonoured, "/tmp", &C::unix_socket_dir).fixed(),
        key<C>("unix_socket_group", Kind::String, kHonoured, "", &C::unix_socket_group).fixed(),
        key<C>("unix_socket_mode", Kind::Mode, kHonoured, "0777", &C::unix_socket_mode).fixed(),
        key<C>("user", Kind::String, kHonoured, "", &C::user).fixed(),
        key<C>("verbose", Kind::Int, kHonoured, "0", &C::verbose),
        // pgtether's own keys.
        key<C>("advisory_lock_tracking", Kind::Choice, kHonoured, "on", &C::advisory_lock_tracking)
            .among(kLockTracking),
        key<C>("advisory_lock_functions", Kind::FunctionList, kHonoured, "",
               &C::advisory_lock_functions),
        key<C>("advisory_lock_discovery", Kind::Choice, kHonoured, "on",
               &C::advisory_lock_discovery)
            .among(kOnOff),
        key<C>("advisory_lock_discovery_interval", Kind::IntSeconds, kHonoured, "60",
               &C::advisory_lock_discovery_interval)
            .range(1, kIntMax),
        key<C>("advisory_lock_catalog_check_interval", Kind::Seconds, kHonoured, "1",
               &C::advisory_lock_catalog_check_interval),
        key<C>("workers", Kind::Workers, kHonoured, "1", &C::workers).range(1, kMaxWorkers).fixed(),
        key<C>("tethered_idle_timeout", Kind::Seconds, kHonoured, "0", &C::tethered_idle_timeout),
        key<C>("tether_probe_delay", Kind::Seconds, kHonoured, "1", &C::tether_probe_delay),
        key<C>("tether_reserve_size", Kind::Int, kHonoured, "-1", &C::tether_reserve_size)
            .range(-1, kIntMax),
        key<C>("client_buffer_limit", Kind::Int, kHonoured, "1048576", &C::client_buffer_limit)
            .range(16384, kIntMax),
        key<C>("max_prepared_statement_bytes", Kind::Int, kHonoured, "8388608",
               &C::max_prepared_statement_bytes)
            .range(1024, kIntMax),
        key<C>("max_prepared_statement_bytes_total", Kind::Int, kHonoured, "134217728",
               &C::max_prepared_statement_bytes_total)
            .range(1024, kIntMax),
        key<C>("session_state_temp_tables", Kind::Choice, kHonoured, "tether",
               &C::session_state_temp_tables)
            .among(kTetherChoices),
        key<C>("session_state_listen", Kind::Choice, kHonoured, "tether", &C::session_state_listen)
            .among(kTetherChoices),
        // Fixed: the listening connections hold the channels of the clients multiplex answered;
        // under tether a client's UNLISTEN would go to its backend and leave them there.
        key<C>("listen_mode", Kind::Choice, kHonoured, "multiplex", &C::listen_mode)
            .among(kListenModes)
            .fixed(),
        key<C>("listen_client_buffer", Kind::Int, kHonoured, "1048576", &C::listen_client_buffer)
            .range(8192, kIntMax),
        key<C>("listen_stall_timeout", Kind::Seconds, kHonoured, "10", &C::listen_stall_timeout),
        key<C>("session_state_cursors", Kind::Choice, kHonoured, "tether",
               &C::session_state_cursors)
            .among(kTetherChoices),
        key<C>("session_state_prepare", Kind::Choice, kHonoured, "tether",
               &C::session_state_prepare)
            .among(kTetherChoices),
        key<C>("session_state_load", Kind::Choice, kHonoured, "tether", &C::session_state_load)
            .among(kTetherChoices),
        key<C>("session_settings", Kind::Choice, kHonoured, "replay", &C::session_settings)
            .among(kReplayChoices),
        key<C>("log_statement_text", Kind::Bool, kHonoured, "0", &C::log_statement_text),
        key<C>("metrics_listen_addr", Kind::List, kHonoured, "127.0.0.1", &C::metrics_listen_addr)
            .fixed(),
        key<C>("metrics_listen_port", Kind::Int, kHonoured, "0", &C::metrics_listen_port)
            .range(0, 65535)
            .fixed(),
    };
    return keys;
}

using D = DatabaseConfig;

// Connection-string keys of a [databases] entry (PgBouncer's parse_database).
const std::vector<KeySpec<D>>& database_keys() {
    static const std::vector<KeySpec<D>> keys = {
        key<D>("dbname", Kind::String, kHonoured, std::nullopt, &D::dbname),
        key<D>("host", Kind::String, kHonoured, std::nullopt, &D::host),
        key<D>("port", Kind::String, kHonoured, "5432", &D::port_text),  // parse_port_list
        key<D>("user", Kind::String, kHonoured, std::nullopt, &D::user),
        key<D>("password", Kind::String, kHonoured, std::nullopt, &D::password),
        key<D>("auth_user", Kind::String, kHonoured, std::nullopt, &D::auth_user),
        key<D>("pool_size", Kind::Decimal, kHonoured, std::nullopt, &D::pool_size),
        key<D>("min_pool_size", Kind::Decimal, kHonoured, std::nullopt, &D::min_pool_size),
        key<D>("reserve_pool", Kind::Decimal, kHonoured, std::nullopt, &D::reserve_pool_size),
        key<D>("reserve_pool_size", Kind::Decimal, kHonoured, std::nullopt,
               &D::reserve_pool_size),  // 1.24 alias
        key<D>("connect_query", Kind::String, kHonoured, std::nullopt, &D::connect_query),
        key<D>("pool_mode", Kind::Choice, kHonoured, std::nullopt, &D::pool_mode).among(kPoolModes),
        key<D>("max_db_connections", Kind::Decimal, kHonoured, std::nullopt,
               &D::max_db_connections),
        // pgtether's own.
        key<D>("tether_reserve_size", Kind::Decimal, kHonoured, std::nullopt,
               &D::tether_reserve_size)
            .range(-1, kIntMax),
        key<D>("client_encoding", Kind::String, kHonoured, std::nullopt, &D::client_encoding),
        key<D>("datestyle", Kind::String, kHonoured, std::nullopt, &D::datestyle),
        key<D>("timezone", Kind::String, kHonoured, std::nullopt, &D::timezone),
        key<D>("application_name", Kind::String, kHonoured, std::nullopt, &D::application_name),
        key<D>("auth_query", Kind::String, kHonoured, std::nullopt, &D::auth_query),    // 1.23
        key<D>("auth_dbname", Kind::String, kHonoured, std::nullopt, &D::auth_dbname),  // 1.20
        key<D>("server_lifetime", Kind::DecimalSeconds, kHonoured, std::nullopt,  // 1.24
               &D::server_lifetime),
        key<D>("load_balance_hosts", Kind::Choice, kHonoured, "round-robin",  // 1.24
               &D::load_balance_hosts)
            .among(kLoadBalanceHosts),
        key<D>("max_db_client_connections", Kind::Decimal, kHonoured, "0",  // 1.24
               &D::max_db_client_connections),
        // 1.26; -1: not set (PgBouncer's spelling), 0: no limit.
        key<D>("query_wait_timeout", Kind::DecimalSeconds, kHonoured, std::nullopt,
               &D::query_wait_timeout)
            .range(-1, kIntMax),
        key<D>("target_session_attrs", Kind::Choice, kHonoured, "any",  // after 1.25
               &D::target_session_attrs)
            .among(kTargetSessionAttrs),
    };
    return keys;
}

using U = UserConfig;

// Keys of a [users] entry (PgBouncer's parse_user).
const std::vector<KeySpec<U>>& user_keys() {
    static const std::vector<KeySpec<U>> keys = {
        key<U>("pool_mode", Kind::Choice, kHonoured, std::nullopt, &U::pool_mode).among(kPoolModes),
        key<U>("max_user_connections", Kind::Decimal, kHonoured, std::nullopt,
               &U::max_user_connections),
        key<U>("pool_size", Kind::Decimal, kHonoured, std::nullopt, &U::pool_size),  // 1.23
        key<U>("reserve_pool_size", Kind::Decimal, kHonoured, std::nullopt,           // 1.24
               &U::reserve_pool_size),
        key<U>("max_user_client_connections", Kind::Decimal, kHonoured, "0",  // 1.24
               &U::max_user_client_connections),
        key<U>("query_timeout", Kind::DecimalSeconds, kHonoured, std::nullopt,  // 1.24
               &U::query_timeout),
        key<U>("idle_transaction_timeout", Kind::DecimalSeconds, kHonoured, std::nullopt,  // 1.24
               &U::idle_transaction_timeout),
        key<U>("transaction_timeout", Kind::DecimalSeconds, kHonoured, std::nullopt,  // 1.25
               &U::transaction_timeout),
        key<U>("client_idle_timeout", Kind::DecimalSeconds, kHonoured, std::nullopt,  // 1.24
               &U::client_idle_timeout),
        // 1.26; -1: not set (PgBouncer's spelling), 0: no limit.
        key<U>("query_wait_timeout", Kind::DecimalSeconds, kHonoured, std::nullopt,
               &U::query_wait_timeout)
            .range(-1, kIntMax),
    };
    return keys;
}

// [peers] entries (PgBouncer 1.19): where CancelRequests for another peer's keys go. pool_size
// bounds the cancel requests in flight to the peer (proxy/server/peer_cancels.hpp), as it bounds
// PgBouncer's connections to it.
const std::vector<KeySpec<PeerConfig>>& peer_keys() {
    using P = PeerConfig;
    static const std::vector<KeySpec<P>> keys = {
        key<P>("host", Kind::String, kHonoured, std::nullopt, &P::host),
        key<P>("port", Kind::Decimal, kHonoured, "6432", &P::port).range(1, 65535),
        key<P>("pool_size", Kind::Decimal, kHonoured, std::nullopt, &P::pool_size).range(1, 10000),
    };
    return keys;
}

// ---------------------------------------------------------------------------------------------
// Parsing and storing one value

std::string lowered(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        c = protocol::ascii_lower(c);
    return out;
}

// Builds the variant in place inside the optional: moving a Value temporary through
// Parsed::ok() trips GCC 12's -Wmaybe-uninitialized (a false positive) in sanitizer builds.
template <typename T>
Parsed<Value> value_of(T&& v) {
    Parsed<Value> out;
    out.value.emplace(std::in_place_type<std::decay_t<T>>, std::forward<T>(v));
    return out;
}

template <typename Owner>
Parsed<Value> parse_value(const KeySpec<Owner>& spec, std::string_view text) {
    auto from = [](auto parsed) -> Parsed<Value> {
        if (!parsed) return Parsed<Value>::fail(parsed.error);
        return value_of(*parsed.value);
    };
    switch (spec.kind) {
        case Kind::Int:
            return from(parse_integer(text, spec.min, spec.max));
        case Kind::Decimal:
            return from(parse_decimal(text, spec.min, spec.max));
        case Kind::Workers:
            return from(parse_worker_count(text, std::thread::hardware_concurrency(), spec.max));
        case Kind::Bool: {
            auto b = parse_boolean(text);
            if (!b) return Parsed<Value>::fail(b.error);
            return value_of(std::int64_t{*b.value ? 1 : 0});
        }
        case Kind::Seconds:
            return from(parse_seconds(text));
        case Kind::IntSeconds:
        case Kind::DecimalSeconds: {
            auto n = spec.kind == Kind::IntSeconds ? parse_integer(text, spec.min, spec.max)
                                                   : parse_decimal(text, spec.min, spec.max);
            if (!n) return Parsed<Value>::fail(n.error + " (whole seconds)");
            return value_of(Duration(std::chrono::seconds(*n.value)));
        }
        case Kind::String:
            return value_of(std::string(text));
        case Kind::RequireAuth: {
            auto parsed = parse_require_auth(text);
            if (!parsed) return Parsed<Value>::fail(parsed.error);
            return value_of(std::string(text));
        }
        case Kind::List:
            return value_of(split_list(text));
        case Kind::FunctionList: {
            auto names = split_list(text);
            for (auto& name : names) {
                bool ok =
                    !(name[0] >= '0' && name[0] <= '9') && name[0] != '.' && name.back() != '.';
                for (char c : name) {
                    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '.');
                }
                if (!ok) {
                    return Parsed<Value>::fail("\"" + name +
                                               "\" is not a function name: expected a comma "
                                               "separated list such as my_lock, app.take_lock");
                }
                name = lowered(name);
            }
            return value_of(std::move(names));
        }
        case Kind::Mode: {
            auto m = parse_file_mode(text);
            if (!m) return Parsed<Value>::fail(m.error);
            return value_of(std::int64_t{*m.value});
        }
        case Kind::Choice:
            return from(parse_choice(text, spec.choices));
    }
    return Parsed<Value>::fail("internal error: unknown value kind");
}

template <typename E, std::size_t N>
E enum_from(const std::array<std::string_view, N>& names, const std::string& value) {
    for (std::size_t i = 0; i < N; ++i) {
        if (names[i] == value) return static_cast<E>(i);
    }
    return static_cast<E>(0);  // unreachable: parse_choice only yields listed spellings
}

// The choice arrays are in enum order, so the index is the enumerator.
static_assert(static_cast<int>(PoolMode::Statement) == 2);
static_assert(static_cast<int>(AuthType::Pam) == 7 && static_cast<int>(AuthType::Hba) == 6 &&
              static_cast<int>(AuthType::Ldap) == 8);
static_assert(static_cast<int>(LockTracking::Off) == 2);
static_assert(static_cast<int>(SslMode::VerifyFull) == 5);

template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

template <typename Owner>
void store(Owner& owner, const Target<Owner>& target, const Value& v) {
    auto as_int = [&] { return static_cast<int>(std::get<std::int64_t>(v)); };
    auto as_string = [&]() -> const std::string& { return std::get<std::string>(v); };
    std::visit(
        Overloaded{
            [](std::monostate) {},
            [&](int Owner::*m) { owner.*m = as_int(); },
            [&](bool Owner::*m) {
                // Kind::Bool gives 0 or 1; a Kind::Choice among kOnOff gives its spelling.
                owner.*m = std::holds_alternative<std::string>(v)
                               ? as_string() == "on" || as_string() == "1"
                               : std::get<std::int64_t>(v) != 0;
            },
            [&](Duration Owner::*m) { owner.*m = std::get<Duration>(v); },
            [&](std::string Owner::*m) { owner.*m = as_string(); },
            [&](std::vector<std::string> Owner::*m) {
                owner.*m = std::get<std::vector<std::string>>(v);
            },
            [&](PoolMode Owner::*m) { owner.*m = enum_from<PoolMode>(kPoolModes, as_string()); },
            [&](AuthType Owner::*m) { owner.*m = enum_from<AuthType>(kAuthTypes, as_string()); },
            [&](LockTracking Owner::*m) {
                owner.*m = enum_from<LockTracking>(kLockTracking, as_string());
            },
            [&](SslMode Owner::*m) { owner.*m = enum_from<SslMode>(kSslModes, as_string()); },
            [&](StateHandling Owner::*m) {
                owner.*m = as_string() == "ignore" ? StateHandling::Ignore : StateHandling::Keep;
            },
            [&](std::optional<int> Owner::*m) { owner.*m = as_int(); },
            [&](std::optional<Duration> Owner::*m) { owner.*m = std::get<Duration>(v); },
            [&](std::optional<PoolMode> Owner::*m) {
                owner.*m = enum_from<PoolMode>(kPoolModes, as_string());
            },
            [&](std::optional<std::string> Owner::*m) { owner.*m = as_string(); },
        },
        target);
}

template <typename Owner>
const KeySpec<Owner>* find_key(const std::vector<KeySpec<Owner>>& keys, std::string_view name) {
    for (const auto& k : keys) {
        if (k.name == name) return &k;
    }
    return nullptr;
}

// "unknown ..." with a hint: the key differing only in case (PgBouncer's keys are
// case-sensitive), else the closest key (suggest_name).
template <typename Owner>
std::string unknown_key_message(const std::vector<KeySpec<Owner>>& keys, std::string_view name,
                                std::string what) {
    std::string low = lowered(name);
    std::vector<std::string_view> names;
    for (const auto& k : keys) {
        if (k.name == low) {
            return what + " (names are case-sensitive: did you mean \"" + std::string(k.name) +
                   "\"?)";
        }
        names.push_back(k.name);
    }
    if (auto hint = suggest_name(name, names)) return what + " (did you mean \"" + *hint + "\"?)";
    return what;
}

template <typename Owner>
bool is_neutral(const KeySpec<Owner>& spec, const Value& value) {
    if (!spec.neutral) return false;
    auto neutral = parse_value(spec, *spec.neutral);
    return neutral && *neutral.value == value;
}

// The error for a value of a key pgtether does not act on, or nullopt (a key it acts on, or the
// neutral value, which asks for nothing).
template <typename Owner>
std::optional<std::string> key_refusal(const KeySpec<Owner>& spec, std::string_view text,
                                       const Value& value) {
    if (spec.supported || is_neutral(spec, value)) return std::nullopt;
    return "\"" + std::string(text) + "\" is not supported by pgtether: " + std::string(spec.refusal);
}

// ---------------------------------------------------------------------------------------------
// The loader

// Where a setting checked after the whole file was read (track_extra_parameters) was made.
struct Note {
    std::string file;
    int line = 0;
    std::string key;  // as it appears in the report
};

// A [databases] entry's port: one port for every host, or (libpq style) one per host of its
// host list. PgBouncer 1.24 takes a single port; a list is libpq's, for hosts on other ports.
void apply_port_list(DatabaseConfig& db, std::size_t host_count, const IniEntry& e) {
    const auto items = split_host_list(db.port_text);
    std::vector<int> ports;
    for (const auto& item : items) {
        int port = 0;
        const bool digits = !item.empty() && item.size() <= 5 &&
                            item.find_first_not_of("0123456789") == std::string::npos;
        if (digits) port = std::stoi(item);
        if (port < 1 || port > 65535) {
            throw ConfigError(e.file, e.line, e.name,
                              "invalid value \"" + db.port_text +
                                  "\" for \"port\": a number from 1 to 65535, or a "
                                  "comma-separated list of them, one per host");
        }
        ports.push_back(port);
    }
    if (ports.empty()) {
        throw ConfigError(e.file, e.line, e.name, "port: empty value");
    }
    if (ports.size() > 1 && ports.size() != std::max<std::size_t>(host_count, 1)) {
        throw ConfigError(e.file, e.line, e.name,
                          "port \"" + db.port_text + "\" lists " + std::to_string(ports.size()) +
                              " ports for " + std::to_string(host_count) +
                              " hosts: give one port for all hosts, or one per host");
    }
    db.port = ports.front();
    if (ports.size() > 1) db.ports = std::move(ports);
}

class Loader {
  public:
    explicit Loader(std::string main_file) : main_file_(std::move(main_file)) {}

    // Every problem goes to `errors` and loading goes on with the next entry: the result is
    // the configuration without the entries in error.
    Config load(const std::vector<IniEntry>& entries, std::vector<ConfigError>& errors) {
        for (const auto& entry : entries) {
            try {
                load_entry(entry);
            } catch (const ConfigError& e) {
                errors.push_back(e);
            }
        }
        finish(errors);
        refresh_parsed_settings(cfg_);
        return std::move(cfg_);
    }

  private:
    // Unknown: the entries under an unknown section header, which was reported; they are
    // skipped rather than reported once more each.
    enum class Section { None, Main, Databases, Users, Peers, Unknown };

    void load_entry(const IniEntry& e) {
        if (e.kind == IniEntry::Kind::Section) {
            start_section(e);
            return;
        }
        switch (section_) {
            case Section::None:
                throw ConfigError(e.file, e.line, e.name, "setting outside of any section");
            case Section::Main:
                set_global(e);
                break;
            case Section::Databases:
                set_database(e);
                break;
            case Section::Users:
                set_user(e);
                break;
            case Section::Peers:
                set_peer(e);
                break;
            case Section::Unknown:
                break;
        }
    }

    void start_section(const IniEntry& e) {
        const std::string& name = e.name;
        if (name == "pgbouncer" || name == "pgtether") {
            if (saw_main_) reset_global_settings();
            saw_main_ = true;
            section_ = Section::Main;
        } else if (name == "databases") {
            section_ = Section::Databases;
        } else if (name == "users") {
            section_ = Section::Users;
        } else if (name == "peers") {
            section_ = Section::Peers;
        } else {
            section_ = Section::Unknown;
            std::string low = lowered(name);
            bool case_only = low == "pgbouncer" || low == "pgtether" || low == "databases" ||
                             low == "users" || low == "peers";
            throw ConfigError(e.file, e.line, "",
                              "unknown section [" + name + "]" +
                                  (case_only ? " (section names are case-sensitive)"
                                             : " (expected [pgbouncer], [pgtether], "
                                               "[databases], [users] or [peers])"));
        }
    }

    // PgBouncer fills in every [pgbouncer] default each time that section starts (cfparser.c
    // fill_defaults), so a second [pgbouncer] header -- say in an included file -- undoes all
    // earlier settings of that section. pgtether does the same so one file means the same thing
    // to both. The other sections' entries stay, [peers] included.
    void reset_global_settings() {
        Config fresh;
        fresh.databases = std::move(cfg_.databases);
        fresh.fallback_database = std::move(cfg_.fallback_database);
        fresh.users = std::move(cfg_.users);
        fresh.peers = std::move(cfg_.peers);
        cfg_ = std::move(fresh);
        track_extra_note_.reset();
    }

    void set_global(const IniEntry& e) {
        const auto* spec = find_key(global_keys(), e.name);
        if (spec == nullptr) {
            throw ConfigError(
                e.file, e.line, e.name,
                unknown_key_message(global_keys(), e.name, "unknown configuration key"));
        }
        auto parsed = parse_value(*spec, e.value);
        if (!parsed) {
            std::string message = parsed.error;
            throw ConfigError(e.file, e.line, e.name,
                              "invalid value \"" + e.value + "\": " + message);
        }
        if (auto refusal = value_refusal(spec->name, e.value)) {
            throw ConfigError(e.file, e.line, e.name,
                              "invalid value \"" + e.value + "\": " + *refusal);
        }
        store(cfg_, spec->target, *parsed.value);
        if (std::holds_alternative<std::monostate>(spec->target)) {
            cfg_.other_settings[std::string(spec->name)] = e.value;
        }
        if (auto refusal = key_refusal(*spec, e.value, *parsed.value)) {
            throw ConfigError(e.file, e.line, e.name, *refusal);
        }
        if (spec->name == "track_extra_parameters") {
            track_extra_note_ = Note{e.file, e.line, e.name};
        }
    }

    // Applies a connection string to `owner` using `keys`. Returns the key/value pairs for checks
    // across keys.
    template <typename Owner>
    std::vector<std::pair<std::string, std::string>> apply_connstring(
        Owner& owner, const std::vector<KeySpec<Owner>>& keys, const IniEntry& e,
        std::string_view section) {
        auto pairs = parse_connstring(e.value);
        if (!pairs) {
            throw ConfigError(e.file, e.line, e.name,
                              "invalid " + std::string(section) + " entry: " + pairs.error);
        }
        for (std::size_t i = 0; i < pairs.value->size(); ++i) {
            const auto& [key, value] = (*pairs.value)[i];
            const auto* spec = find_key(keys, key);
            if (spec == nullptr) {
                throw ConfigError(e.file, e.line, e.name,
                                  unknown_key_message(keys, key,
                                                      "unknown " + std::string(section) +
                                                          " parameter \"" + key + "\""));
            }
            auto parsed = parse_value(*spec, value);
            if (!parsed) {
                throw ConfigError(
                    e.file, e.line, e.name,
                    "invalid value \"" + value + "\" for \"" + key + "\": " + parsed.error);
            }
            store(owner, spec->target, *parsed.value);
            if (auto refusal = key_refusal(*spec, value, *parsed.value)) {
                throw ConfigError(e.file, e.line, e.name, key + ": " + *refusal);
            }
        }
        return std::move(*pairs.value);
    }

    void set_database(const IniEntry& e) {
        // PgBouncer reserves "pgbouncer" for its admin console; pgtether's console answers to
        // both names.
        if (e.name == "pgbouncer" || e.name == "pgtether") {
            throw ConfigError(e.file, e.line, e.name,
                              "database name \"" + e.name + "\" is reserved for the admin console");
        }
        DatabaseConfig db;
        db.name = e.name;
        db.source_file = e.file;
        db.source_line = e.line;
        db.definition = e.value;
        apply_connstring(db, database_keys(), e, "[databases]");
        const auto hosts = split_host_list(db.host);
        for (const auto& host : hosts) {
            if (host.empty()) {
                throw ConfigError(e.file, e.line, e.name,
                                  "host \"" + db.host + "\": empty host name in the list");
            }
        }
        apply_port_list(db, hosts.size(), e);
        // A repeated name replaces the earlier entry, as in PgBouncer (last wins).
        if (db.name == "*") {
            cfg_.fallback_database = std::move(db);
            return;
        }
        for (auto& existing : cfg_.databases) {
            if (existing.name == db.name) {
                existing = std::move(db);
                return;
            }
        }
        cfg_.databases.push_back(std::move(db));
    }

    void set_user(const IniEntry& e) {
        UserConfig user;
        user.name = e.name;
        user.definition = e.value;
        apply_connstring(user, user_keys(), e, "[users]");
        cfg_.users[user.name] = std::move(user);
    }

    void set_peer(const IniEntry& e) {
        auto id = parse_decimal(e.name, 1, kMaxPeerId);
        if (!id) {
            throw ConfigError(e.file, e.line, e.name, "a [peers] key is a peer id: " + id.error);
        }
        PeerConfig peer;
        peer.id = static_cast<int>(*id.value);
        peer.source_file = e.file;
        peer.source_line = e.line;
        peer.definition = e.value;
        auto pairs = apply_connstring(peer, peer_keys(), e, "[peers]");
        bool has_host = std::any_of(pairs.begin(), pairs.end(),
                                    [](const auto& kv) { return kv.first == "host"; });
        if (!has_host) throw ConfigError(e.file, e.line, e.name, "a peer needs host=");
        cfg_.peers[peer.id] = std::move(peer);  // a repeated id: the last entry wins
    }

    void finish(std::vector<ConfigError>& errors) {
        if (!saw_main_) {
            errors.emplace_back(main_file_, 0, "",
                                "no [pgbouncer] section (PgBouncer refuses such a file too)");
        } else if (cfg_.listen_addr.empty() && cfg_.unix_socket_dir.empty()) {
            // PgBouncer dies with "nowhere to listen on" in this case.
            errors.emplace_back(main_file_, 0, "",
                                "nowhere to listen: listen_addr and unix_socket_dir are both "
                                "empty");
        }

        if (auto refusal = track_extra_refusal(cfg_.track_extra_parameters, cfg_.session_settings)) {
            const Note where = track_extra_note_.value_or(Note{main_file_, 0, "session_settings"});
            errors.emplace_back(where.file, where.line, where.key, *refusal);
        }
        if (cfg_.auth_type == AuthType::Ldap && cfg_.auth_ldap_options.empty()) {
            errors.emplace_back(main_file_, 0, "auth_ldap_options",
                                "auth_type = ldap needs auth_ldap_options (the LDAP server and "
                                "how to find the user)");
        }
    }

    std::string main_file_;
    Config cfg_;
    Section section_ = Section::None;
    bool saw_main_ = false;
    std::optional<Note> track_extra_note_;
};

}  // namespace

namespace {

// Seconds as the ini file writes them: "30", "0.5", "2.25" (microsecond precision).
std::string format_seconds(Duration d) {
    auto us = d.count();
    std::string out = std::to_string(us / 1'000'000);
    if (auto fraction = us % 1'000'000; fraction != 0) {
        std::string digits = std::to_string(fraction);
        digits.insert(0, 6 - digits.size(), '0');
        while (digits.back() == '0') digits.pop_back();
        out += "." + digits;
    }
    return out;
}

std::string join_list(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += ", ";
        out += item;
    }
    return out;
}

// The value of a stored setting, spelled so that the ini loader reads it back unchanged.
std::optional<std::string> render_value(const Config& config, const GlobalKey& spec) {
    return std::visit(
        Overloaded{
            [](std::monostate) -> std::optional<std::string> { return std::nullopt; },
            [&](int C::*m) -> std::optional<std::string> {
                if (spec.kind == Kind::Mode) {
                    char buf[16];
                    std::snprintf(buf, sizeof buf, "0%o", static_cast<unsigned>(config.*m));
                    return std::string(buf);
                }
                return std::to_string(config.*m);
            },
            [&](bool C::*m) -> std::optional<std::string> {
                if (spec.kind == Kind::Choice) return config.*m ? "on" : "off";
                return config.*m ? "1" : "0";
            },
            [&](Duration C::*m) -> std::optional<std::string> {
                return format_seconds(config.*m);
            },
            [&](std::string C::*m) -> std::optional<std::string> { return config.*m; },
            [&](std::vector<std::string> C::*m) -> std::optional<std::string> {
                return join_list(config.*m);
            },
            [&](PoolMode C::*m) -> std::optional<std::string> { return to_string(config.*m); },
            [&](AuthType C::*m) -> std::optional<std::string> { return to_string(config.*m); },
            [&](LockTracking C::*m) -> std::optional<std::string> {
                return to_string(config.*m);
            },
            [&](SslMode C::*m) -> std::optional<std::string> { return to_string(config.*m); },
            [&](StateHandling C::*m) -> std::optional<std::string> {
                // "tether" or "replay" (the key's first choice), or "ignore".
                if (config.*m == StateHandling::Ignore) return std::string("ignore");
                return std::string(spec.choices[0]);
            },
            [&](std::optional<int> C::*m) -> std::optional<std::string> {
                if (!(config.*m)) return std::nullopt;
                return std::to_string(*(config.*m));
            },
            [&](std::optional<Duration> C::*m) -> std::optional<std::string> {
                if (!(config.*m)) return std::nullopt;
                return format_seconds(*(config.*m));
            },
            [&](std::optional<PoolMode> C::*m) -> std::optional<std::string> {
                if (!(config.*m)) return std::nullopt;
                return to_string(*(config.*m));
            },
            [&](std::optional<std::string> C::*m) -> std::optional<std::string> {
                return config.*m;
            },
        },
        spec.target);
}

}  // namespace

std::vector<ConfigSetting> describe_settings(const Config& config) {
    std::vector<ConfigSetting> out;
    for (const auto& spec : global_keys()) {
        ConfigSetting setting;
        setting.key = std::string(spec.name);
        if (spec.neutral) setting.default_value = std::string(*spec.neutral);
        setting.value = render_value(config, spec);
        if (std::holds_alternative<std::monostate>(spec.target)) {
            auto it = config.other_settings.find(setting.key);
            setting.value = it != config.other_settings.end() ? std::optional(it->second)
                                                              : setting.default_value;
            // PgBouncer's conffile defaults to the file it was started with; a conffile the
            // file or a SET names is shown instead, and the next RELOAD reads it
            // (ConfigReloader::file_to_read).
            if (setting.key == "conffile" && it == config.other_settings.end() &&
                !config.config_file_as_given.empty()) {
                setting.value = config.config_file_as_given;
            }
        }
        setting.changeable = spec.changeable;
        setting.supported = spec.supported;
        out.push_back(std::move(setting));
    }
    std::sort(out.begin(), out.end(),
              [](const ConfigSetting& a, const ConfigSetting& b) { return a.key < b.key; });
    return out;
}

bool setting_is_changeable(std::string_view key) {
    const auto* spec = find_key(global_keys(), key);
    return spec != nullptr && spec->changeable;
}

void set_config_value(Config& config, std::string_view key, std::string_view value) {
    const std::string name(key);
    const auto* spec = find_key(global_keys(), key);
    if (spec == nullptr) {
        throw ConfigError("SET", 0, name,
                          unknown_key_message(global_keys(), key, "unknown configuration key"));
    }
    if (!spec->changeable) {
        throw ConfigError("SET", 0, name,
                          "cannot be changed while pgtether runs (change the configuration file "
                          "and restart)");
    }
    auto parsed = parse_value(*spec, value);
    if (!parsed) {
        throw ConfigError("SET", 0, name,
                          "invalid value \"" + std::string(value) + "\": " + parsed.error);
    }
    if (auto refusal = value_refusal(spec->name, value)) {
        throw ConfigError("SET", 0, name,
                          "invalid value \"" + std::string(value) + "\": " + *refusal);
    }
    if (auto refusal = key_refusal(*spec, value, *parsed.value)) {
        throw ConfigError("SET", 0, name, *refusal);
    }
    Config changed = config;
    store(changed, spec->target, *parsed.value);
    if (auto refusal = track_extra_refusal(changed.track_extra_parameters, changed.session_settings)) {
        throw ConfigError("SET", 0, name, *refusal);
    }
    store(config, spec->target, *parsed.value);
    if (std::holds_alternative<std::monostate>(spec->target)) {
        config.other_settings[name] = std::string(value);
    }
    refresh_parsed_settings(config);
}

std::vector<std::string> keep_fixed_settings(const Config& running, Config& next) {
    std::vector<std::string> changed;
    for (const auto& spec : global_keys()) {
        if (spec.changeable) continue;
        const std::string name(spec.name);
        if (std::holds_alternative<std::monostate>(spec.target)) {
            auto was = running.other_settings.find(name);
            auto now = next.other_settings.find(name);
            bool had = was != running.other_settings.end();
            bool has = now != next.other_settings.end();
            if (had != has || (had && was->second != now->second)) changed.push_back(name);
            if (had) {
                next.other_settings[name] = was->second;
            } else if (has) {
                next.other_settings.erase(now);
            }
            continue;
        }
        if (render_value(running, spec) != render_value(next, spec)) changed.push_back(name);
        std::visit([&](auto member) {
            if constexpr (!std::is_same_v<decltype(member), std::monostate>) {
                next.*member = running.*member;
            }
        }, spec.target);
    }
    refresh_parsed_settings(next);
    return changed;
}

std::vector<ConfigKeyInfo> recognised_config_keys() {
    std::vector<ConfigKeyInfo> out;
    auto add = [&](std::string_view section, const auto& keys) {
        for (const auto& k : keys)
            out.push_back({section, k.name, k.supported, k.neutral, k.changeable});
    };
    add("pgbouncer", global_keys());
    add("databases", database_keys());
    add("users", user_keys());
    add("peers", peer_keys());
    return out;
}

ConfigCheck check_config(const std::string& path) {
    ConfigCheck check;
    auto entries = read_ini_file(path, check.errors);
    if (!entries) {
        check.config = std::make_shared<Config>();
        return check;
    }
    Loader loader(path);
    check.config = std::make_shared<Config>(loader.load(*entries, check.errors));
    std::error_code ec;
    auto absolute = std::filesystem::absolute(path, ec);
    check.config->config_file = ec ? path : absolute.lexically_normal().string();
    check.config->config_file_as_given = path;
    return check;
}

std::shared_ptr<const Config> load_config(const std::string& path) {
    auto check = check_config(path);
    if (!check.errors.empty()) throw check.errors.front();
    return check.config;
}

}  // namespace pgtether
