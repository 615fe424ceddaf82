#include "proxy/net/log_sqlstate.hpp"
#include "proxy/client/client.hpp"

#include <unistd.h>

#include <algorithm>

#include "proxy/net/log.hpp"

#include "core/departure.hpp"
#include "core/peering.hpp"
#include "core/server_loss.hpp"
#include "protocol/framing.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sql_scanner.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/cancel_registry.hpp"
#include "proxy/client/client_auth.hpp"
#include "proxy/client/client_context.hpp"
#include "proxy/client/console_session.hpp"
#include "proxy/client/login_work.hpp"
#include "proxy/net/forward_batch.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/server/auth_lookups.hpp"
#include "proxy/server/peer_cancels.hpp"

namespace pgtether {

namespace fe = protocol::fe;
using protocol::ByteSpan;
using protocol::Frame;
using protocol::FrameStatus;
using protocol::MessageReader;

Client::Client(ClientContext& context, bool tcp)
    : context_(context), stream_(context, *this), tcp_(tcp), id_(context.next_id()) {
    context_.register_client(*this);
    connected_at_ms_ = state_since_ms_ = context_.now_ms();
}

Client::~Client() {
    uncount_for_limits();
    release_client_slot();
    context_.unregister_client(*this);
}

void Client::release_client_slot() {
    if (!holds_client_slot_) return;
    holds_client_slot_ = false;
    context_.release_client_slot();
}

bool Client::accept(int fd) {
    int rc = tcp_ ? stream_.init_tcp() : stream_.init_pipe();
    if (rc != 0) {
        ::close(fd);
        // The handle was never initialized: Stream::close() calls on_stream_closed() at once,
        // which frees this client (the caller's contract: closed and freed by the client).
        stream_.close();
        return false;
    }
    if (stream_.adopt(fd) != 0) {
        stream_.close();
        return false;
    }
    stream_.apply_tcp_settings();
    peer_ = stream_.peer_name();
    stream_.start_reading();
    return true;
}

std::string Client::describe() const {
    std::string out = "C-" + std::to_string(id_);
    if (!database_.empty() || !user_.empty()) out += " " + database_ + "/" + user_;
    out += "@" + peer_;
    return out;
}

const std::string& Client::logged_in_description() {
    if (!logged_in_description_)
        logged_in_description_ = std::make_unique<const std::string>(describe());
    return *logged_in_description_;
}

void Client::set_state(State state) {
    state_ = state;
    state_since_ms_ = context_.now_ms();
}

// ---------------------------------------------------------------------------------------------
// Input dispatch

std::size_t Client::on_stream_data(ByteSpan data) {
    std::size_t consumed = 0;
    // Once TLS starts, the rest of this plaintext must not be read (Stream refuses it).
    while (consumed < data.size() && !stream_.tls_handshaking()) {
        ByteSpan rest = data.subspan(consumed);
        std::size_t n = 0;
        switch (state_) {
            case State::Startup: n = handle_startup(rest); break;
            case State::Auth: n = handle_auth(rest); break;
            case State::Idle:
            case State::Active:
                n = replication_ ? relay_to_server(rest) : handle_requests(rest);
                break;
            case State::AuthLookup:
            case State::WelcomeWait:
            case State::Waiting:
                // Held until the user's secret, a server or its parameters are available.
                hold_input(data.size() - consumed);
                return consumed;
            case State::Closing: return data.size();
        }
        if (n == 0) break;
        consumed += n;
    }
    return consumed;
}

void Client::hold_input(std::size_t held) {
    // Input that must wait for a server, or for its server's internal query: keep reading while
    // little is held. Stopping and restarting a read costs libuv two epoll_ctl calls, which would
    // be paid by every transaction that queues for a server; stopping once more than pkt_buf
    // bytes wait still bounds what one client can make us buffer (PgBouncer's bound, too).
    if (held >= context_.scratch().size()) stream_.stop_reading();
}

void Client::on_stream_end(int status) {
    // PgBouncer's words for a client that goes without Terminate.
    std::string why = status == UV_EOF
                          ? "client unexpected eof"
                          : "client unexpected eof: " + std::string(uv_strerror(status));
    if (!stream_.tls_error().empty()) why += " (TLS: " + stream_.tls_error() + ")";
    close(why);
}

void Client::on_stream_drained() {
    on_listener_drained();
    if (server_) server_->resume_input_from_client();
    if (admin_) admin_->on_output_drained();
}

void Client::on_stream_closed() { delete this; }

void Client::pause_input() {
    input_paused_ = true;
    stream_.stop_reading();
}

void Client::resume_input() {
    if (!input_paused_ || state_ == State::Closing) return;
    input_paused_ = false;
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

bool Client::send(std::string_view bytes) { return stream_.write(bytes); }

bool Client::send_from_server(const uv_buf_t* bufs, unsigned count) {
    return stream_.writev(bufs, count);
}

// ---------------------------------------------------------------------------------------------
// Start-up and authentication

std::size_t Client::handle_startup(ByteSpan data) {
    // A TLS record (handshake, 0x16) instead of a length word: PostgreSQL 17's direct TLS.
    if (data[0] == 0x16 && !stream_.tls_active() && !ssl_answered_) return start_direct_tls(data);
    // What PostgreSQL only logs (a COMMERROR in ProcessStartupPacket), the client does not hear
    // about from us either: the connection just closes. A driver that sends Terminate before its
    // start-up packet (its length word reads as 1.4 GB) must see what PostgreSQL shows it.
    auto close_unanswered = [&](const std::string& why) {
        spdlog::info("{}: closing because: {} (nothing sent, as PostgreSQL)", describe(), why);
        close(why);
        return data.size();
    };
    Frame frame = protocol::frame_startup_packet(data);
    if (frame.status == FrameStatus::Invalid) {
        return close_unanswered("invalid length of startup packet");
    }
    if (frame.status == FrameStatus::NeedMore) return 0;
    auto parsed = protocol::parse_startup_packet(data.first(frame.total));
    if (!parsed.packet) {
        if (!parsed.tell_client) return close_unanswered(parsed.error);
        fail(protocol::sqlstate::kProtocolViolation, parsed.error);
        return data.size();
    }
    const auto& packet = *parsed.packet;
    const bool encryption_request = packet.kind == protocol::StartupKind::SslRequest ||
                                    packet.kind == protocol::StartupKind::GssEncRequest;
    // A start-up packet is refused once it names its database (handle_startup_packet).
    if (over_client_limit_ && !encryption_request &&
        packet.kind != protocol::StartupKind::Startup) {
        refuse_over_client_limit_now();
        return data.size();
    }
    switch (packet.kind) {
        case protocol::StartupKind::SslRequest:
        case protocol::StartupKind::GssEncRequest:
            return handle_encryption_request(packet.kind, data, frame.total);
        case protocol::StartupKind::CancelRequest:
            handle_cancel_request(packet.cancel_key);
            return data.size();
        case protocol::StartupKind::UnsupportedVersion:
            if ((packet.code >> 16) < 3) {
                // PostgreSQL answers a protocol 2.0 client in its own protocol.
                std::string out;
                protocol::append_v2_fatal_error(
                    out, protocol::unsupported_protocol_message(packet.code));
                stream_.write(out);
                close(protocol::unsupported_protocol_message(packet.code), nullptr, true);
                return data.size();
            }
            fail(protocol::sqlstate::kFeatureNotSupported,
                 protocol::unsupported_protocol_message(packet.code));
            return data.size();
        case protocol::StartupKind::Startup:
            handle_startup_packet(packet);
            return frame.total;
    }
    return data.size();
}

void Client::handle_startup_packet(const protocol::StartupPacket& packet) {
    if (!tls_policy_allows_startup()) return;
    if (!take_replication_startup(packet)) return;
    const auto& config = context_.config();
    const bool replay = config.session_settings == StateHandling::Keep;
    std::vector<std::string> unknown_protocol_options;
    auto ignored = [&](const std::string& name) {
        return std::find(config.ignore_startup_parameters.begin(),
                         config.ignore_startup_parameters.end(),
                         name) != config.ignore_startup_parameters.end();
    };
    // A setting from the start-up packet: the six reported parameters are tracked with
    // ParameterStatus, every other one is replayed on each backend that serves the client.
    auto take_setting = [&](const std::string& name, const std::string& value) {
        if (auto tracked = find_tracked_param(name)) {
            params_.set(*tracked, value);
        } else {
            settings_state().startup.set(name, value);
        }
    };
    for (const auto& [name, value] : packet.parameters) {
        if (name == "user") {
            user_ = value;
        } else if (name == "database") {
            database_ = value;
        } else if (name.starts_with("_pq_.")) {
            unknown_protocol_options.push_back(name);
        } else if (replication_) {
            // Kept whole for the client's own backend (take_replication_startup); the reported
            // ones also for SHOW CLIENTS.
            if (auto tracked = find_tracked_param(name)) params_.set(*tracked, value);
        } else if (name == "replication") {
            // replication=false (take_replication_startup): an ordinary connection.
        } else if (name == "options") {
            // Read even when ignore_startup_parameters lists it, as PgBouncer does: what each
            // setting inside becomes is startup_option_use's decision.
            auto options = parse_startup_options(value);
            if (auto* error = std::get_if<std::string>(&options)) {
                fail(protocol::sqlstate::kProtocolViolation, *error);
                return;
            }
            for (const auto& [setting, setting_value] :
                 std::get<std::vector<SettingsMap::Entry>>(options)) {
                const auto use =
                    startup_option_use({.tracked = find_tracked_param(setting).has_value(),
                                        .listed = ignored(setting),
                                        .options_listed = ignored("options"),
                                        .replay = replay});
                if (use == StartupOptionUse::Refuse) {
                    // PgBouncer's words (client.c, set_startup_options).
                    fail(protocol::sqlstate::kProtocolViolation,
                         "unsupported startup parameter in options: " + setting);
                    return;
                }
                if (use == StartupOptionUse::Apply) take_setting(setting, setting_value);
            }
        } else if (find_tracked_param(name)) {
            // Before the ignore list, as in PgBouncer (application_name and its varcache come
            // first): listing a parameter PostgreSQL reports does not drop the client's value.
            take_setting(name, value);
        } else if (ignored(name)) {
            // ignore_startup_parameters keeps PgBouncer's meaning: accepted, not applied.
        } else if (!replay) {
            // session_settings = ignore: PgBouncer's behaviour, a parameter it cannot keep
            // consistent across servers is refused unless listed in ignore_startup_parameters.
            fail(protocol::sqlstate::kProtocolViolation, "unsupported startup parameter: " + name);
            return;
        } else {
            take_setting(name, value);
        }
    }
    if (settings_) note_search_path();
    if (user_.empty()) {
        fail(protocol::sqlstate::kInvalidAuthorization,
             "no PostgreSQL user name specified in startup packet");
        return;
    }
    if (database_.empty()) database_ = user_;
    // PgBouncer's decide_startup_pool ("don't limit admin db"): max_client_conn does not keep
    // anyone from the console, so an operator can still look at a full pooler. The console's
    // own authentication still applies.
    // Counted again now: a client that left since the accept (on another worker, say) has
    // freed its place meanwhile, as PgBouncer's single loop would have seen.
    if (over_client_limit_ && !is_console_database(database_) && context_.over_client_limit()) {
        refuse_over_client_limit_now();
        return;
    }
    // A replication client's parameters go to its backend as it sent them.
    if (context_.config().application_name_add_host && !replication_) {
        add_host_to_application_name();
    }
    // A newer minor protocol version or protocol options: tell the client what we speak
    // (NegotiateProtocolVersion, protocol §55.2.1).
    if ((packet.code & 0xffff) != 0 || !unknown_protocol_options.empty()) {
        std::string out;
        protocol::MessageWriter w(out);
        w.begin(protocol::be::kNegotiateProtocolVersion)
            .i32(static_cast<std::int32_t>(protocol::kProtocolVersion3))
            .i32(static_cast<std::int32_t>(unknown_protocol_options.size()));
        for (const auto& option : unknown_protocol_options) w.cstring(option);
        w.end();
        stream_.write(out);
    }
    start_authentication();
}

void Client::refuse_over_client_limit_now() {
    context_.stats().clients_refused++;
    fail(protocol::sqlstate::kTooManyConnections, "no more connections allowed (max_client_conn)");
}

void Client::add_host_to_application_name() {
    // PgBouncer's format: "NAME - 1.2.3.4:5678", "NAME - [::1]:5678", or for the Unix socket
    // "NAME - unix(PID@HOST):PORT"; "app" when the client gave no name. Only at start-up: a later
    // SET application_name is the client's own business.
    std::string details = peer_;
    if (!tcp_) {
        auto peer = stream_.peer_credentials();
        char host[256] = "";
        (void)gethostname(host, sizeof host - 1);
        details = "unix(" + std::to_string(peer ? peer->pid : 0) + "@" + host +
                  "):" + std::to_string(context_.config().listen_port);
    }
    auto name = params_.get(TrackedParam::ApplicationName);
    params_.set(TrackedParam::ApplicationName,
                std::string(name && !name->empty() ? *name : "app") + " - " + details);
}

std::size_t Client::handle_auth(ByteSpan data) {
    if (login_work_ticket_ != 0) {
        // The exchange waits for its keys (carry_out): held, like input during a lookup.
        hold_input(data.size());
        return 0;
    }
    // Like PostgreSQL, the type byte is judged before the rest is waited for: anything but a
    // password message -- a second StartupMessage, whose first length byte reads as type 0 --
    // is refused at once, not waited for until client_login_timeout.
    if (static_cast<char>(data[0]) != fe::kPassword) {
        fail(protocol::sqlstate::kProtocolViolation,
             std::string("expected ") + (auth_ ? auth_->expected_response() : "password response") +
                 ", got message type " + std::to_string(static_cast<int>(data[0])));
        return data.size();
    }
    const MessageReader::Next message = MessageReader::examine(data, kMaxAuthMessage);
    if (message.step == MessageReader::Step::Invalid) {
        fail(protocol::sqlstate::kProtocolViolation, "invalid authentication message length");
        return data.size();
    }
    if (message.step != MessageReader::Step::Message) return 0;
    carry_out(auth_->on_password_message(message.body()));
    return state_ == State::Closing ? data.size() : message.total;
}

void Client::on_authenticated() {
    const auto& config = context_.config();
    if (is_console_database(database_)) {
        if (replication_) {
            fail(protocol::sqlstate::kFeatureNotSupported,
                 "replication connections to the admin console are not supported");
            return;
        }
        start_admin_session();
        return;
    }
    // SHUTDOWN WAIT_FOR_CLIENTS keeps the Unix socket open for the admin console only, as
    // PgBouncer does.
    if (console_only_) {
        fail(protocol::sqlstate::kCannotConnectNow, "pgtether is shutting down");
        return;
    }
    // The database is looked up only after authentication, as PostgreSQL does, so that an
    // unauthenticated client cannot probe which databases exist.
    auto found = context_.resolve_database(database_);
    if (!found) {
        // PgBouncer's words, which its tools match (PgBouncer 1.24's suite checks the client's
        // message too), with PostgreSQL's SQLSTATE for an unknown database.
        const std::string reason = "no such database: " + database_;
        protocol::ErrorFields error{"FATAL", protocol::sqlstate::kInvalidCatalogName, reason, {},
                                    {}};
        close(reason, &error);
        return;
    }
    const DatabaseConfig& resolved = *found;
    if (context_.database_disabled(resolved.name)) {
        // DISABLE on the admin console; PgBouncer's message, which its tools look for.
        fail(protocol::sqlstate::kObjectNotInPrerequisiteState,
             "database \"" + database_ + "\" is disabled");
        return;
    }
    if (config.auth_type == AuthType::Any && resolved.user.empty()) {
        fail(protocol::sqlstate::kInvalidAuthorization,
             "auth_type=any requires a forced user for database \"" + database_ + "\"");
        return;
    }
    std::string server_user = resolved.user.empty() ? user_ : resolved.user;
    pool_ = &context_.pool_for(resolved, server_user);
    if (auth_ && resolved.user.empty()) pool_->learn_client_credentials(*auth_);
    auth_.reset();
    cancel_key_ = context_.add_cancel_key(*this);
    has_cancel_key_ = true;
    if (replication_) {
        request_replication_server();
        return;
    }
    pool_->learn_welcome_from_other_workers();
    if (pool_->has_welcome()) {
        finish_login();
    } else {
        // Reading goes on (anything sent meanwhile is held, see hold_input) so that a client
        // that leaves while the pool's first server logs in frees its place at once.
        set_state(State::WelcomeWait);
        pool_->wait_for_welcome(*this);
    }
}

void Client::start_admin_session() {
    auth_.reset();
    auto session = context_.open_admin_session(*this);
    if (!session->may_log_in()) {
        // Only admin_users and stats_users may use the console (PgBouncer's admin_post_login).
        fail(protocol::sqlstate::kInsufficientPrivilege,
             "not allowed: user \"" + user_ + "\" is in neither admin_users nor stats_users");
        return;
    }
    admin_ = std::move(session);
    cancel_key_ = context_.add_cancel_key(*this);
    has_cancel_key_ = true;
    admin_->send_welcome(cancel_key_);
    set_state(State::Idle);
    if (context_.config().log_connections) {
        spdlog::info("{}: login attempt: db={} user={} tls={} (admin console)", describe(),
                     database_, user_, tls_description());
    }
}

void Client::on_welcome_ready() {
    if (state_ != State::WelcomeWait) return;
    finish_login();
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Client::on_login_failed(const protocol::ErrorFields& error) {
    protocol::ErrorFields fields = error;
    fields.severity = "FATAL";
    // As PgBouncer logs it: "closing because: <the server's message>".
    close(error.message, &fields);
}

void Client::finish_login() {
    std::string out;
    protocol::append_authentication(out, protocol::AuthRequest::Ok);
    // The first server's greeting, with this client's own values for the parameters it chose.
    for (const auto& [name, value] : pool_->welcome()) {
        auto tracked = find_tracked_param(name);
        auto own = tracked ? params_.get(*tracked) : std::nullopt;
        protocol::append_parameter_status(out, name, own ? *own : std::string_view(value));
    }
    protocol::append_backend_key_data(out, cancel_key_);
    protocol::append_ready_for_query(out, protocol::kTxIdle);
    stream_.write(out);
    set_state(State::Idle);
    if (context_.config().log_connections) {
        spdlog::info("{}: login attempt: db={} user={} tls={}", describe(), database_, user_,
                     tls_description());
    }
}

// ---------------------------------------------------------------------------------------------
// Cancel requests

void Client::handle_cancel_request(const protocol::CancelKey& received) {
    // A cancel request arrives on its own connection; it gets no reply (protocol §55.2.8).
    // With peering, a key another process issued goes on to that process (core/peering.hpp).
    const auto& config = context_.config();
    CancelRoute route = route_cancel(received, config.peer_id);
    if (route.action != CancelRoute::Action::Local) {
        auto peer = config.peers.find(route.peer);
        if (route.action == CancelRoute::Action::Drop) {
            context_.peer_cancels().warn_ttl_exhausted(describe());
        } else if (peer == config.peers.end()) {
            context_.peer_cancels().warn_unknown_peer(describe(), route.peer);
        } else {
            spdlog::debug("{}: forwarding cancel request to peer {}", describe(), route.peer);
            context_.forward_cancel_to_peer(peer->second, route.key);
        }
        set_state(State::Closing);
        stream_.close();
        return;
    }
    // The key's client is cancelled on its own worker's loop; a stale or unknown key is ignored
    // silently, as PostgreSQL does.
    context_.cancel_key_holder(route.key, describe());
    set_state(State::Closing);
    stream_.close();
}

void Client::on_cancel_request(const std::string& from) {
    if (admin_) {
        admin_->on_cancel_request();
    } else if (server_ && state_ == State::Active) {
        spdlog::debug("{}: forwarding cancel request for {}", from, describe());
        context_.forward_cancel(*server_);
    }
}

// ---------------------------------------------------------------------------------------------
// Servers coming and going

void Client::on_server_assigned(Server& server) {
    server_ = &server;
    pool_->stats().record_wait_time((context_.now_ms() - state_since_ms_) * 1000);
    pool_->stats().server_assignment_count++;
    set_state(State::Active);
    last_activity_ms_ = context_.now_ms();
    server.link_client(*this);
    if (!server.busy()) on_server_ready();
}

void Client::take_input_back(std::string_view batch) {
    stream_.prepend_input(protocol::as_bytes(batch));
    stream_.redeliver_pending_input();
}

void Client::on_server_ready() {
    if (state_ != State::Active) return;
    if (has_held_notifications() && between_transactions()) send_held_notifications();
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Client::on_server_released() {
    server_ = nullptr;
    if (state_ != State::Active) return;
    set_state(State::Idle);
    // The rest of a message being skipped (take_oversized) is still the client's to drop, should
    // its server be released before it is all in.
    if (reader_.forwarding()) reader_.reset();
    if (has_held_notifications() && between_transactions()) send_held_notifications();
    input_paused_ = false;
    stream_.start_reading();
    stream_.redeliver_pending_input();
}

void Client::on_server_lost(const std::string& reason, bool server_saw_requests,
                            bool client_got_fatal) {
    server_ = nullptr;
    if (state_ == State::Closing) return;
    const ServerLoss loss{state_ == State::Active, server_saw_requests, tethered(),
                          client_got_fatal};
    switch (decide_server_loss(loss)) {
        case ServerLossAnswer::Retry:
            set_state(State::Idle);
            if (has_held_notifications() && between_transactions()) send_held_notifications();
            stream_.start_reading();
            stream_.redeliver_pending_input();
            return;
        case ServerLossAnswer::CloseAfterFatal:
            close("server closed the connection after a FATAL error: " + reason, nullptr, true);
            return;
        case ServerLossAnswer::FailConnectionLost:
            fail(protocol::sqlstate::kConnectionFailure, "server connection lost: " + reason);
            return;
        case ServerLossAnswer::FailSessionLost: {
            const protocol::ErrorFields error = session_lost_error(reason, describe_tether());
            close(error.message, &error);
            return;
        }
    }
}

void Client::set_tether_kinds(std::uint32_t kinds) {
    bool was = tethered();
    tether_kinds_ = kinds;
    if (!tethered()) {
        tether_.reset();
        return;
    }
    TetherDetails& details = tether_details();
    if (!was) details.since_ms = context_.now_ms();
    if (!(kinds & kStateAdvisoryLock)) details.locks.clear();
}

Client::Settings& Client::settings_state() {
    if (!settings_) settings_ = std::make_unique<Settings>();
    return *settings_;
}

void Client::note_search_path() {
    settings_->temp_schema_in_path =
        search_path_names_temp_schema(settings_->startup, settings_->session);
}

const std::vector<std::string>& Client::custom_setting_names() const {
    static const std::vector<std::string> none;
    return settings_ ? settings_->custom_names : none;
}

Client::TetherDetails& Client::tether_details() {
    if (!tether_) {
        tether_ = std::make_unique<TetherDetails>();
        tether_->since_ms = context_.now_ms();
        // The statement that tethered the client ran on the probing server, which remembers it.
        if (server_) tether_->last_query = server_->last_statement();
    }
    return *tether_;
}

void Client::update_tether_details(std::uint32_t probed, const std::vector<AdvisoryLockKey>& locks,
                                   std::vector<std::pair<std::uint32_t, std::string>> summaries) {
    if (!tether_ && locks.empty() && summaries.empty()) return;  // the usual case: nothing held
    TetherDetails& details = tether_details();
    if (probed & kStateAdvisoryLock) details.locks.reset_from_probe(locks);
    std::erase_if(details.summaries, [&](const auto& s) { return (s.first & probed) != 0; });
    for (auto& s : summaries) details.summaries.push_back(std::move(s));
}

void Client::adopt_lock_ledger(const LockLedger& ledger) {
    if (!tether_ && ledger.holds_nothing()) return;  // untethered and still holding nothing
    tether_details().locks = ledger;
}

const LockLedger& Client::lock_ledger() const {
    static const LockLedger kNone;
    return tether_ ? tether_->locks : kNone;
}

const std::string& Client::last_query() const {
    static const std::string kNone;
    return tether_ ? tether_->last_query : kNone;
}

std::string Client::describe_tether() const {
    static const std::vector<std::pair<std::uint32_t, std::string>> kNoSummaries;
    return describe_state(tether_kinds_, lock_ledger().describe(),
                          tether_ ? tether_->summaries : kNoSummaries);
}

void Client::detach_from_server() {
    Server* server = server_;
    if (!server) return;
    server_ = nullptr;
    if (server->state() == ServerState::Relaying) {
        // A replication backend is this client's alone: it goes with it (PgBouncer's words).
        server->unlink_client();
        server->close("replication client disconnected");
        return;
    }
    Departure departure;
    departure.internal_query_running = server->busy();
    departure.mid_message = reader_.forwarding();
    departure.backend_idle = server->link().tracker().idle();
    departure.session_mode = pool_->mode() == PoolMode::Session;
    departure.tether_kinds = tether_kinds_;
    departure.effects = server->link().effects();
    const DepartureDecision decision = decide_departure(departure);  // core/departure.hpp
    server->unlink_client();
    switch (decision.action) {
        case DepartureDecision::Action::FinishQuery: return;  // it hands itself on when done
        case DepartureDecision::Action::Release:
            server->pool().release(*server, ReleaseReason::ClientDone);
            return;
        case DepartureDecision::Action::Scrub: server->scrub(); return;
        case DepartureDecision::Action::Close: server->close(decision.reason); return;
    }
}

// ---------------------------------------------------------------------------------------------
// Timeouts and closing

void Client::fail(const char* sqlstate, const std::string& message) {
    protocol::ErrorFields error{"FATAL", sqlstate, message, {}, {}};
    close(message, &error);
}

void Client::close(const std::string& reason, const protocol::ErrorFields* error, bool flush) {
    if (state_ == State::Closing) return;
    State previous = state_;
    const auto& config = context_.config();
    // PgBouncer's two switches: log_pooler_errors for every error pgtether itself sends a
    // client, log_disconnections for the reason a logged-in client goes.
    if (error && config.log_pooler_errors) {
        LogSqlstate sqlstate(error->sqlstate);
        spdlog::warn("{}: pooler error: {}", describe(), error->message);
    }
    // PgBouncer logs every close with a reason, failed logins included.
    if (config.log_disconnections) {
        spdlog::info("{}: closing because: {} (age={}s)", describe(), reason,
                     (context_.now_ms() - connected_at_ms_) / 1000);
    }
    if (error) {
        std::string out;
        protocol::append_error_response(out, *error);
        stream_.write(out);
    }
    if (admin_) admin_->on_close();
    leave_listens();
    if (pool_) {
        if (previous == State::Waiting) pool_->cancel_request(*this);
        if (previous == State::WelcomeWait) pool_->cancel_welcome_wait(*this);
    }
    set_state(State::Closing);
    uncount_for_limits();
    release_client_slot();  // max_client_conn: the place is free from now on, as in PgBouncer
    detach_from_server();
    if (has_cancel_key_) {
        context_.remove_cancel_key(cancel_key_);
        has_cancel_key_ = false;
    }
    auth_.reset();
    if (login_work_ticket_) {
        context_.login_work().cancel(login_work_ticket_);
        login_work_ticket_ = 0;
    }
    if (auth_lookup_) {
        context_.auth_lookups().cancel(auth_lookup_);
        auth_lookup_ = 0;
    }
    if (error || flush) {
        stream_.close_after_flush();
    } else {
        stream_.close();
    }
}

}  // namespace pgtether
