// A client's way in: TLS negotiation (SSLRequest or PostgreSQL 17's direct TLS), the TLS policy
// of client_tls_sslmode, and choosing and running the authentication method (auth_type, or the
// auth_hba_file line that matches), including auth_query lookups, client certificates and peer
// credentials. The rest of Client is in client.cpp. docs/tls-and-auth.md describes the behaviour.
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "proxy/net/log.hpp"

#include "core/client_limits.hpp"
#include "core/hba.hpp"
#include "core/ident_map.hpp"
#include "core/ldap_options.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/client_auth.hpp"
#include "proxy/client/client_context.hpp"
#include "proxy/client/console_session.hpp"
#include "proxy/client/login_work.hpp"
#include "proxy/client/pam_check.hpp"
#include "proxy/net/security.hpp"
#include "proxy/net/tls.hpp"
#include "proxy/server/auth_lookups.hpp"

namespace pgtether {

using protocol::ByteSpan;

namespace {

// The client's address without the port, as PostgreSQL names it in authentication errors.
std::string host_of(const Stream& stream, bool tcp) {
    if (!tcp) return "[local]";
    std::string host = stream.peer_host();
    return host.empty() ? "?" : host;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// TLS

std::size_t Client::handle_encryption_request(protocol::StartupKind kind, ByteSpan data,
                                              std::size_t request_size) {
    const bool ssl = kind == protocol::StartupKind::SslRequest;
    if (request_size < data.size()) {
        // The client must wait for our one-byte answer before it says anything else. Bytes
        // already behind the request were sent unencrypted before any handshake, so anyone on the
        // path could have injected them (CVE-2021-23214): PostgreSQL refuses the connection, and
        // so do we -- in plaintext, before answering, so they can never reach a login.
        fail(protocol::sqlstate::kProtocolViolation,
             ssl ? "received unencrypted data after SSL request"
                 : "received unencrypted data after GSSAPI encryption request");
        return data.size();
    }
    if (!ssl) {
        // No GSSAPI encryption: 'N', and the client continues in plaintext or tries TLS next
        // (protocol §55.2.11).
        if (gss_answered_ || stream_.tls_active()) {
            // PostgreSQL takes a second request for a protocol version it does not know.
            fail(protocol::sqlstate::kFeatureNotSupported,
                 protocol::unsupported_protocol_message(protocol::kGssEncRequestCode));
            return data.size();
        }
        gss_answered_ = true;
        stream_.write(std::string_view("N"));
        return request_size;
    }
    if (ssl_answered_ || stream_.tls_active()) {
        fail(protocol::sqlstate::kFeatureNotSupported,
             protocol::unsupported_protocol_message(protocol::kSslRequestCode));
        return data.size();
    }
    ssl_answered_ = true;
    const auto& context = context_.security().client_tls;
    if (!tcp_ || !context) {
        // TLS is off, or this is a Unix socket (as PostgreSQL and PgBouncer, no TLS there):
        // the client continues in plaintext or gives up (protocol §55.2.10).
        stream_.write(std::string_view("N"));
        return request_size;
    }
    stream_.write(std::string_view("S"));
    if (!stream_.start_tls(*context, {})) {
        spdlog::warn("{}: cannot start TLS: {}", describe(), stream_.tls_error());
        close("cannot start TLS: " + stream_.tls_error());
        return data.size();
    }
    return request_size;
}

std::size_t Client::start_direct_tls(ByteSpan data) {
    const auto& context = context_.security().client_tls;
    if (!tcp_ || !context) {
        // Nothing useful can be said in plaintext to a client that speaks TLS.
        if (context_.config().log_pooler_errors) {
            spdlog::info("{}: closing: direct TLS connection, but client_tls_sslmode = disable",
                         describe());
        }
        close("direct TLS connection without TLS configured");
        return data.size();
    }
    direct_tls_ = true;
    ssl_answered_ = true;
    // The bytes are the start of the ClientHello: the TLS session takes them all.
    if (!stream_.start_tls(*context, {}, data)) {
        if (context_.config().log_pooler_errors) {
            spdlog::info("{}: closing: TLS handshake failed: {}", describe(), stream_.tls_error());
        }
        close("TLS handshake failed: " + stream_.tls_error());
    }
    return data.size();
}

void Client::on_stream_tls_ready(const std::string& error) {
    if (state_ == State::Closing) return;
    const bool log = context_.config().log_pooler_errors;
    if (!error.empty()) {
        if (log) spdlog::info("{}: closing: TLS handshake failed: {}", describe(), error);
        close("TLS handshake failed: " + error);
        return;
    }
    const TlsSession& tls = *stream_.tls();
    if (direct_tls_ && tls.alpn() != "postgresql") {
        // PostgreSQL 17 insists on ALPN for direct TLS: it proves the client meant to speak the
        // PostgreSQL protocol (not, say, HTTPS sent to the wrong port).
        if (log) {
            spdlog::info("{}: closing: direct TLS connection without ALPN \"postgresql\"",
                         describe());
        }
        close("direct TLS connection without ALPN \"postgresql\"");
        return;
    }
    spdlog::debug("{}: TLS established: {} {}{}", describe(), tls.protocol_version(), tls.cipher(),
                  tls.peer_certificate_verified() ? ", verified client certificate" : "");
}

bool Client::tls_policy_allows_startup() {
    const auto mode = context_.config().client_tls_sslmode;
    if (tcp_ && mode >= SslMode::Require && !stream_.tls_active()) {
        fail(protocol::sqlstate::kInvalidAuthorization,
             std::string("SSL/TLS connection required (client_tls_sslmode = ") + to_string(mode) +
                 "): connect with sslmode=require or stronger");
        return false;
    }
    return true;
}

std::string Client::tls_description() const {
    const TlsSession* tls = stream_.tls();
    if (!tls || !tls->established()) return "no";
    return std::string(tls->protocol_version()) + "/" + tls->cipher();
}

// ---------------------------------------------------------------------------------------------
// Client limits per database and user

bool Client::admit_within_client_limits() {
    const auto& config = context_.config();
    // Counted before authentication, as PgBouncer counts at set_pool: clients still logging in
    // hold their place too.
    auto [database_clients, user_clients] =
        context_.client_counts().add(database_, user_);
    counted_for_limits_ = true;
    // PgBouncer lets admin_users into its console whatever the limits say, so an operator can
    // still look at a full pooler (they are counted all the same).
    if (is_console_database(database_) &&
        std::find(config.admin_users.begin(), config.admin_users.end(), user_) !=
            config.admin_users.end()) {
        return true;
    }
    auto limits = resolve_client_limits(config, config.find_database(database_),
                                        config.find_user(user_));
    if (auto refusal = client_limit_refusal(limits, database_clients, user_clients)) {
        spdlog::debug("{}: {} clients of database {} and {} of user {} now", describe(),
                      database_clients, database_, user_clients, user_);
        fail(protocol::sqlstate::kTooManyConnections, *refusal);
        return false;
    }
    return true;
}

void Client::uncount_for_limits() {
    if (!counted_for_limits_) return;
    counted_for_limits_ = false;
    context_.client_counts().remove(database_, user_);
}

// ---------------------------------------------------------------------------------------------
// Choosing the method

bool Client::is_own_user_console_login() {
    if (user_ != "pgbouncer" || !is_console_database(database_)) return false;
    auto peer = stream_.peer_credentials();
    return peer && peer->uid == getuid();
}

void Client::start_authentication() {
    const auto& config = context_.config();
    if (is_own_user_console_login()) {
        // Before auth_type and auth_hba_file, as PgBouncer does: whoever can connect as
        // pgtether's own OS user could read its configuration and userlist anyway.
        own_user_ = true;
        spdlog::info("{}: pgbouncer access from unix socket", describe());
        set_state(State::Auth);
        on_authenticated();
        return;
    }
    if (!admit_within_client_limits()) return;
    AuthType method = config.auth_type;
    if (method == AuthType::Hba) {
        const auto& rules = context_.security().hba;
        sockaddr_storage address{};
        bool have_address = tcp_ && stream_.peer_address(address);
        HbaClient who;
        who.unix_socket = !tcp_;
        who.tls = stream_.tls_active();
        who.address = have_address ? reinterpret_cast<const sockaddr*>(&address) : nullptr;
        who.database = database_;
        who.user = user_;
        who.replication = replication();
        const HbaRule* rule = rules ? match_hba(*rules, who) : nullptr;
        // PostgreSQL's wording: a physical replication connection names no database.
        std::string target =
            who.replication == ReplicationMode::Physical
                ? "replication connection from host \"" + host_of(stream_, tcp_) +
                      "\", user \"" + user_ + "\", "
                : "host \"" + host_of(stream_, tcp_) + "\", user \"" + user_ +
                      "\", database \"" + database_ + "\", ";
        target += who.tls ? "SSL encryption" : "no encryption";
        if (!rule) {
            fail(protocol::sqlstate::kInvalidAuthorization, "no auth_hba_file entry for " + target);
            return;
        }
        spdlog::debug("{}: {}:{} decides: {}", describe(), rule->file, rule->line,
                      to_string(rule->method));
        switch (rule->method) {
            case HbaMethod::Reject:
                fail(protocol::sqlstate::kInvalidAuthorization,
                     "auth_hba_file rejects connection for " + target);
                return;
            case HbaMethod::Cert:
                authenticate_by_certificate(rule->ident_map);
                return;
            case HbaMethod::Peer:
                authenticate_by_peer(rule->ident_map);
                return;
            case HbaMethod::Trust:
                method = AuthType::Trust;
                break;
            case HbaMethod::Md5:
                method = AuthType::Md5;
                break;
            case HbaMethod::Password:
                method = AuthType::Plain;
                break;
            case HbaMethod::ScramSha256:
                method = AuthType::ScramSha256;
                break;
            case HbaMethod::Ldap:
                // The line's own options (checked when the file was read).
                method = AuthType::Ldap;
                hba_ldap_ = std::make_unique<LdapOptions>(*rule->ldap);
                break;
        }
    }
    if (method == AuthType::Cert) {
        authenticate_by_certificate("");
        return;
    }
    start_password_authentication(method);
}

// ---------------------------------------------------------------------------------------------
// Passwords, with auth_query for users not in auth_file

void Client::start_password_authentication(AuthType method) {
    const auto& config = context_.config();
    // trust too: a user missing from auth_file is looked up with auth_query, and logged in when
    // found (PgBouncer does; the server login then uses the secret found).
    const bool wants_secret = method == AuthType::Plain || method == AuthType::Md5 ||
                              method == AuthType::ScramSha256 || method == AuthType::Trust;
    // The admin console has no server to ask: its users not in auth_file are looked up in the
    // global auth_dbname, when one is set (PgBouncer 1.24).
    const bool console = is_console_database(database_);
    if (wants_secret && context_.auth_file().count(user_) == 0 &&
        (!console || !config.auth_dbname.empty())) {
        // auth_user, auth_query and auth_dbname: per database, else global. The lookup has to
        // know the database before authentication (PgBouncer too); an unknown database simply
        // means no lookup, and the exchange below fails like a wrong password.
        auto db = console ? std::nullopt : context_.resolve_database(database_);
        if (db || console) {
            const std::string& auth_user =
                db && !db->auth_user.empty() ? db->auth_user : config.auth_user;
            if (!auth_user.empty()) {
                const std::string& auth_dbname =
                    db && !db->auth_dbname.empty() ? db->auth_dbname : config.auth_dbname;
                // A configuration that cannot work: PgBouncer's words in the log and to the
                // client ("bouncer config error").
                if (is_console_database(auth_dbname)) {
                    spdlog::warn("{}: cannot use the reserved \"{}\" database as an auth_dbname",
                                 describe(), auth_dbname);
                    fail(protocol::sqlstate::kConnectionFailure, "bouncer config error");
                    return;
                }
                auto target_db = auth_dbname.empty() ? db : context_.resolve_database(auth_dbname);
                if (!target_db) {
                    spdlog::warn("{}: authentication database \"{}\" is not configured",
                                 describe(), auth_dbname);
                    fail(protocol::sqlstate::kConnectionFailure, "bouncer config error");
                    return;
                }
                // DISABLE of the database the lookup runs in (PgBouncer's words).
                if (!auth_dbname.empty() && context_.database_disabled(target_db->name)) {
                    fail(protocol::sqlstate::kObjectNotInPrerequisiteState,
                         "authentication database \"" + auth_dbname + "\" is disabled");
                    return;
                }
                AuthQuery::Target target;
                target.query = db && !db->auth_query.empty() ? db->auth_query : config.auth_query;
                target.credentials.user = auth_user;
                target.credentials.require_auth = context_.security().server_require_auth;
                const auto& auth_file = context_.auth_file();
                if (target_db->user == auth_user && !target_db->password.empty()) {
                    target.credentials.password = target_db->password;
                } else if (auto it = auth_file.find(auth_user); it != auth_file.end()) {
                    if (it->second.kind == SecretKind::Plain) {
                        target.credentials.password = it->second.secret;
                    } else if (it->second.kind == SecretKind::Md5) {
                        target.credentials.md5_secret = it->second.secret;
                    }
                    // A SCRAM secret cannot log auth_user in: the server login says so.
                }
                target.database = std::move(*target_db);
                // Input stays on (what arrives is held, up to pkt_buf, like a waiting client's):
                // a client that gives up while its lookup waits in the queue is noticed at once
                // and leaves the queue, instead of holding a place until its turn.
                set_state(State::AuthLookup);
                auto ticket = context_.auth_lookups().lookup(
                    std::move(target), user_, [this, method](AuthQuery::Result&& result) {
                        on_secret_fetched(method, std::move(result));
                    });
                if (!ticket) {
                    // Every auth_user connection is busy and the queue is full: refuse now, as
                    // PgBouncer refuses clients beyond max_client_conn, instead of holding on.
                    spdlog::warn("{}: auth_query: {} lookups already wait for {}: login refused",
                                 describe(), AuthLookups::kMaxQueued, database_);
                    fail(protocol::sqlstate::kTooManyConnections,
                         "too many clients waiting for an authentication lookup");
                    return;
                }
                // The lookup may have failed at once (the callback already ran).
                if (state_ == State::AuthLookup) auth_lookup_ = *ticket;
                return;
            }
        }
    }
    if (method != AuthType::Any && context_.auth_file().count(user_) == 0) {
        // PgBouncer's words; the exchange still runs (against a mock secret) and fails.
        spdlog::info("{}: no such user: {}", describe(), user_);
    }
    auth_ = std::make_unique<ClientAuth>(method, context_.auth_file(), !config.auth_file.empty(),
                                         user_, config.scram_iterations);
    run_password_authentication();
}

void Client::on_secret_fetched(AuthType method, AuthQuery::Result&& result) {
    auth_lookup_ = 0;
    if (state_ != State::AuthLookup) return;
    using Outcome = AuthQuery::Result::Outcome;
    switch (result.outcome) {
        case Outcome::Found:
            break;
        case Outcome::NoPassword:
            // trust asks for no password: the user exists, which is all it needs.
            if (method == AuthType::Trust) break;
            // The default auth_query returns NULL once VALID UNTIL has passed (CVE-2025-2291).
            // The client hears what PostgreSQL would say; the reason goes to the log only.
            spdlog::info(
                "{}: auth_query: user \"{}\" has no valid password (expired VALID "
                "UNTIL, or none set): login refused",
                describe(), user_);
            break;
        case Outcome::NotFound:
            spdlog::info("{}: auth_query: no such user \"{}\" (or NOLOGIN): login refused",
                         describe(), user_);
            auth_query_found_no_user_ = true;
            break;
        case Outcome::Failed:
            // The reason stays in the log (it may name the query's tables, or a database an
            // unauthenticated client should not learn about); the client gets PgBouncer's words.
            spdlog::warn("{}: auth_query lookup failed: {}", describe(), result.error);
            fail(protocol::sqlstate::kConnectionFailure, "bouncer config error");
            return;
    }
    // Without a secret the exchange runs against a mock one and ends in the same 28P01 as a
    // wrong password: no way to tell a missing user from a wrong guess.
    const bool user_found = result.outcome != Outcome::NotFound;
    auth_ = std::make_unique<ClientAuth>(method, std::move(result.secret), user_found, user_,
                                         context_.config().scram_iterations);
    run_password_authentication();
    if (state_ == State::Auth) {
        stream_.start_reading();
        stream_.redeliver_pending_input();
    }
}

void Client::run_password_authentication() {
    auto step = auth_->start();
    set_state(State::Auth);
    carry_out(std::move(step));
}

void Client::carry_out(ClientAuth::Step step) {
    if (!step.reply.empty()) stream_.write(step.reply);
    switch (step.outcome) {
        case ClientAuth::Outcome::Failure:
            if (!auth_->failure_log().empty()) {
                spdlog::warn("{}: login refused: {}", describe(), auth_->failure_log());
            }
            fail_authentication(step.sqlstate, step.message);
            return;
        case ClientAuth::Outcome::Success:
            on_authenticated();
            return;
        case ClientAuth::Outcome::Continue:
            break;
    }
    std::optional<std::uint64_t> ticket;
    if (step.derive) {
        // PBKDF2 on a pool thread; the loop goes on serving everyone else meanwhile.
        ticket = context_.login_work().derive(
            std::move(*step.derive), [this](const protocol::ScramSecret& derived) {
                resume_authentication([&] { return auth_->on_derived(derived); });
            });
    } else if (step.external_check) {
        // PAM and LDAP on a pool thread too: they may read files or wait on a network service.
        const auto& config = context_.config();
        const bool ldap = auth_->type() == AuthType::Ldap;
        auto checked = [this, ldap](const PasswordVerdict& v) {
            if (!v.ok) spdlog::warn("{}: {}: {}", describe(), ldap ? "LDAP" : "PAM", v.failure);
            resume_authentication([&] { return auth_->on_external_check(v.ok); });
        };
        if (ldap) {
            // An auth_hba_file line's options, else auth_ldap_options (both parsed and checked
            // when read; a file without auth_ldap_options is refused at load).
            const LdapOptions* options =
                hba_ldap_ ? hba_ldap_.get() : (config.auth_ldap ? &*config.auth_ldap : nullptr);
            if (options == nullptr) {
                spdlog::warn("{}: auth_type = ldap without auth_ldap_options", describe());
                fail(protocol::sqlstate::kConnectionFailure, "bouncer config error");
                return;
            }
            LdapRequest request{*options, user_, std::move(*step.external_check)};
            ticket = context_.login_work().check_ldap(std::move(request), checked);
        } else {
            PamRequest request;
            request.service = config.auth_pam_service;
            request.user = user_;
            request.password = std::move(*step.external_check);
            if (tcp_) request.remote_host = stream_.peer_host();
            ticket = context_.login_work().check_pam(std::move(request), checked);
        }
    } else {
        return;
    }
    if (!ticket) {
        fail(protocol::sqlstate::kTooManyConnections,
             "too many logins waiting for password checks");
        return;
    }
    login_work_ticket_ = *ticket;
}

void Client::resume_authentication(const std::function<ClientAuth::Step()>& next_step) {
    login_work_ticket_ = 0;
    if (state_ != State::Auth || !auth_) return;
    carry_out(next_step());
    // What the client sent meanwhile was held (handle_auth).
    if (state_ != State::Closing && login_work_ticket_ == 0) {
        stream_.start_reading();
        stream_.redeliver_pending_input();
    }
}

void Client::fail_authentication(const std::string& sqlstate, const std::string& message) {
    const std::string words = auth_->failure_reason();
    // A wrong password or an unknown user: the client is told in PgBouncer's words where they
    // differ from PostgreSQL's ("trust" authentication failed, SASL authentication failed),
    // which tools and runbooks match; PostgreSQL's "password authentication failed for user
    // ..." contains PgBouncer's text for the other methods and stays. A user auth_query did not
    // find gets the same words as a wrong password (PgBouncer says "no such user" there, which
    // tells an attacker which users exist); only the log says so.
    const bool pgbouncer_words = sqlstate == protocol::sqlstate::kInvalidPassword &&
                                 words != "password authentication failed";
    protocol::ErrorFields error{"FATAL", sqlstate, pgbouncer_words ? words : message, {}, {}};
    close(auth_query_found_no_user_ ? "no such user" : words, &error);
}

// ---------------------------------------------------------------------------------------------
// Certificates and peer credentials

void Client::authenticate_by_certificate(const std::string& ident_map) {
    const TlsSession* tls = stream_.tls();
    if (!tls || !tls->established() || !tls->peer_certificate_verified()) {
        fail(protocol::sqlstate::kInvalidAuthorization,
             "connection requires a valid client certificate");
        return;
    }
    auto name = tls->peer_common_name();
    if (!external_name_allows(context_.security().ident_maps.get(), ident_map,
                              name ? *name : std::string(), user_)) {
        if (ident_map.empty()) {
            spdlog::info(
                "{}: certificate authentication failed: certificate name \"{}\" is not the "
                "user name \"{}\"",
                describe(), name ? *name : std::string("(none)"), user_);
        } else {
            spdlog::info(
                "{}: certificate authentication failed: ident map \"{}\" does not let "
                "certificate name \"{}\" log in as \"{}\"",
                describe(), ident_map, name ? *name : std::string("(none)"), user_);
        }
        fail(protocol::sqlstate::kInvalidAuthorization,
             "certificate authentication failed for user \"" + user_ + "\"");
        return;
    }
    set_state(State::Auth);
    on_authenticated();
}

void Client::authenticate_by_peer(const std::string& ident_map) {
    auto peer = stream_.peer_credentials();
    std::optional<uid_t> uid;
    if (peer) uid = peer->uid;
    std::string os_user;
    if (uid) {
        passwd entry{};
        passwd* found = nullptr;
        std::vector<char> buffer(16 * 1024);
        if (getpwuid_r(*uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
            os_user = found->pw_name;
        }
    }
    if (!external_name_allows(context_.security().ident_maps.get(), ident_map, os_user, user_)) {
        if (ident_map.empty()) {
            spdlog::info(
                "{}: peer authentication failed: operating-system user \"{}\" (uid {}) is "
                "not \"{}\"",
                describe(), os_user, uid ? std::to_string(*uid) : "?", user_);
        } else {
            spdlog::info(
                "{}: peer authentication failed: ident map \"{}\" does not let "
                "operating-system user \"{}\" (uid {}) log in as \"{}\"",
                describe(), ident_map, os_user, uid ? std::to_string(*uid) : "?", user_);
        }
        fail(protocol::sqlstate::kInvalidAuthorization,
             "Peer authentication failed for user \"" + user_ + "\"");
        return;
    }
    set_state(State::Auth);
    on_authenticated();
}

}  // namespace pgtether
