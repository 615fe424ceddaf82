#include "proxy/pool/pool.hpp"

#include "proxy/net/log.hpp"

#include "protocol/scram.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client_auth.hpp"
#include "proxy/net/security.hpp"
#include "proxy/net/server_address.hpp"
#include "proxy/pool/janitor.hpp"
#include "proxy/pool/listen_hub.hpp"
#include "proxy/pool/pool_context.hpp"
#include "proxy/pool/pool_control.hpp"

namespace pgtether {

Pool::Pool(PoolContext& context, DatabaseConfig database, std::string user)
    : context_(context),
      database_(std::move(database)),
      user_(std::move(user)),
      lock_trigger_(&context.lock_catalog().attach(database_.name)) {
    apply_config(database_);
}

Pool::~Pool() = default;

ListenHub& Pool::listen_hub() {
    if (!listen_hub_) listen_hub_ = std::make_unique<ListenHub>(context_, *this);
    return *listen_hub_;
}

void Pool::stop_listening() {
    if (listen_hub_) listen_hub_->stop();
}

void Pool::apply_config(const DatabaseConfig& database) {
    const auto& config = context_.config();
    // What was learnt of the hosts holds while the list does.
    if (database.host != database_.host || database.ports != database_.ports || hosts_.empty()) {
        hosts_.assign(std::max<std::size_t>(split_host_list(database.host).size(), 1),
                      HostStatus{});
        // What other pools found of the same hosts (PoolContext::share_host_news).
        for (std::size_t i = 0; i < hosts_.size(); ++i) {
            const HostStatus* known =
                context_.remembered_host(host_for_turn(database, i), port_for_host(database, i));
            if (known) hosts_[i] = *known;
        }
    }
    database_ = database;
    session_attrs_ = parse_session_attrs(database_.target_session_attrs).value_or(SessionAttrs::Any);
    const UserConfig* user = config.find_user(user_);
    mode_ = user && user->pool_mode ? *user->pool_mode
            : database_.pool_mode   ? *database_.pool_mode
                                    : config.pool_mode;
    sizes_ = resolve_pool_sizes(config, database_, mode_, user);
    timeouts_ = resolve_client_timeouts(config, &database_, user);
}

// ---------------------------------------------------------------------------------------------
// Credentials

ServerCredentials Pool::server_credentials() const {
    ServerCredentials credentials;
    credentials.user = user_;
    credentials.require_auth = context_.security().server_require_auth;
    if (!database_.password.empty()) {
        credentials.password = database_.password;
        return credentials;
    }
    const auto& auth_file = context_.auth_file();
    const UserSecret* secret = nullptr;
    // The password PAM or LDAP accepted, auth_file ignored (PgBouncer's rule).
    if (secret_checked_outside_ && fetched_secret_) {
        secret = &*fetched_secret_;
    } else if (auto it = auth_file.find(user_); it != auth_file.end()) {
        secret = &it->second;
    } else if (fetched_secret_) {
        secret = &*fetched_secret_;
    }
    if (secret) {
        switch (secret->kind) {
            case SecretKind::Plain: credentials.password = secret->secret; break;
            case SecretKind::Md5: credentials.md5_secret = secret->secret; break;
            case SecretKind::Scram:
                credentials.scram_client_key = scram_client_key_;
                credentials.scram_server_key = scram_server_key_;
                break;
        }
    }
    return credentials;
}

void Pool::learn_client_credentials(const ClientAuth& auth) {
    // SCRAM pass-through: a client proved it knows the password behind the SCRAM secret in
    // auth_file; its ClientKey lets us answer the server's SCRAM challenge for the same secret.
    const bool checked_outside = auth.type() == AuthType::Pam || auth.type() == AuthType::Ldap;
    if (auth.secret() && (context_.auth_file().count(user_) == 0 || checked_outside)) {
        // auth_query's answer, or the password PAM or LDAP accepted: the only copy of this
        // user's secret pgtether has.
        fetched_secret_ = *auth.secret();
        secret_checked_outside_ = checked_outside;
    }
    auto client_key = auth.scram_client_key();
    if (!client_key || !auth.secret() || auth.secret()->kind != SecretKind::Scram) return;
    auto secret = protocol::parse_scram_secret(auth.secret()->secret);
    if (!secret) return;
    scram_client_key_ = *client_key;
    scram_server_key_ = secret->server_key;
}

// ---------------------------------------------------------------------------------------------
// Greeting

void Pool::learn_welcome_from_other_workers() {
    if (!welcome_.empty() || context_.worker_count() == 1) return;
    // The same pool on another worker may have logged in already: its greeting is the same
    // server's, and a client need not wait for a server of its own worker to learn it (with all
    // of the pool's slots held by the other worker, that could take until one is released).
    struct Greeting {
        std::vector<std::pair<std::string, std::string>> welcome;
        ParamValues params;
    };
    std::vector<Greeting> found(context_.worker_count());
    const auto key = std::make_pair(database_.name, user_);
    context_.gather_from_workers([&](PoolContext& other) {
        if (&other == &context_) return;
        auto it = other.pools().find(key);
        if (it == other.pools().end() || !it->second->has_welcome()) return;
        found.at(other.index()) = {it->second->welcome(), it->second->default_params()};
    });
    for (auto& greeting : found) {
        if (greeting.welcome.empty()) continue;
        adopt_welcome(std::move(greeting.welcome), std::move(greeting.params));
        return;
    }
}

void Pool::adopt_welcome(std::vector<std::pair<std::string, std::string>> welcome,
                         ParamValues params) {
    welcome_ = std::move(welcome);
    default_params_ = std::move(params);
    context_.lock_catalog().on_pool_connected(*this);
    // Every client that authenticated while the greeting was unknown can log in now, whichever
    // way it became known (this worker's first server, or another worker's share of the pool
    // when a later client looked): a waiter left behind here would wait for good.
    while (Client* client = welcome_waiting_.pop_front()) client->on_welcome_ready();
}

void Pool::wait_for_welcome(Client& client) {
    if (last_login_error_ && server_count_ == 0 && login_fails_clients()) {
        // Logins are failing: tell the client now instead of letting it wait (PgBouncer's
        // "fast fail").
        client.on_login_failed(*last_login_error_);
        probe_login();
        return;
    }
    welcome_waiting_.push_back(client);
    if (connecting_ == 0 && idle_.empty()) {
        // When no server can be launched and every one is busy, the greeting comes from the next
        // one released.
        (void)launch_server(true);
    }
}

void Pool::cancel_welcome_wait(Client& client) { welcome_waiting_.remove(client); }

// ---------------------------------------------------------------------------------------------
// Clients asking for servers

Pool::Assignment Pool::request_server(Client& client) {
    // PAUSE / KILL: requests wait in the queue until RESUME. Clients already waiting come first
    // (an idle server then is theirs at this iteration's hand-off).
    Server* server = paused() || !waiting_.empty() ? nullptr : idle_server_for(client);
    while (server && server->spoke_while_idle(context_.now_ms())) {
        // A backend ended while idle (pg_terminate_backend, PostgreSQL shutting down) has sent
        // its FATAL and closed, and the loop may not have read that yet: the client's request
        // would meet a dead backend. An idle server has nothing to say, so one that did is
        // closed instead of handed out.
        server->close("the server spoke or closed while idle in the pool");
        server = idle_server_for(client);
    }
    if (server) {
        client.on_server_assigned(*server);
        return Assignment::Assigned;
    }
    if (last_login_error_ && server_count_ == 0 && login_fails_clients()) {
        protocol::ErrorFields error = *last_login_error_;
        error.severity = "FATAL";
        client.close("server login has been failing: " + error.message, &error);
        probe_login();
        return Assignment::Failed;
    }
    waiting_.push_back(client);
    launch_if_needed();
    return Assignment::Queued;
}

void Pool::cancel_request(Client& client) {
    if (client.replication() != ReplicationMode::None) {
        replication_waiting_.remove(client);
        if (Server* server = client.replication_server()) {
            client.set_replication_server(nullptr);
            server->abandon_replication_client();
            server->close("replication client disconnected");
        }
        return;
    }
    waiting_.remove(client);
    if (uncovered_waiting() == 0) note_tether_reserve_exhausted(false);  // nobody left uncovered
}

void Pool::request_replication_server(Client& client) {
    replication_waiting_.push_back(client);
    launch_for_replication();
}

void Pool::launch_for_replication() {
    // Closing an idle server below gives its slot back (forget_server), which calls here again.
    if (launching_for_replication_) return;
    launching_for_replication_ = true;
    while (Client* client = replication_waiting_.front()) {
        if (launch_suspended()) break;
        if (take_slot(false) != LaunchVerdict::Launch) {
            // PgBouncer's evict_if_needed: an idle server of the pool makes room (its slot is
            // free once it is closed); otherwise other pools or workers may have one to spare.
            if (close_one_idle_server("evicted")) continue;
            make_room_elsewhere();
            break;
        }
        replication_waiting_.remove(*client);
        open_server(client);
    }
    launching_for_replication_ = false;
}

void Pool::on_replication_login_ended() { --connecting_; }

std::size_t Pool::uncovered_waiting() const {
    WaitingCover cover;
    cover.waiting = waiting_.size();
    cover.connecting = static_cast<std::size_t>(connecting_);
    cover.idle = idle_.size();
    if (cover.waiting > cover.connecting + cover.idle &&
        state_counts_.in(ServerState::Sweeping) > 0) {
        const std::uint64_t now = context_.now_ms();
        used_.for_each_const([&](const Server& server) {
            if (server.state() == ServerState::Sweeping &&
                lent_server_covers(now - server.state_since_ms())) {
                ++cover.lent;
            }
        });
    }
    return pgtether::uncovered_waiting(cover);  // core/pool_capacity.hpp
}

// ---------------------------------------------------------------------------------------------
// Servers

bool Pool::paused() const {
    return context_.pool_control().paused(database_.name);
}

void Pool::resume() {
    if (!waiting_.empty() && !idle_.empty()) schedule_hand_offs();
    launch_if_needed();
    launch_for_replication();
    if (!welcome_waiting_.empty() && connecting_ == 0 && idle_.empty()) (void)launch_server(true);
}

int Pool::tethered_server_count() const {
    // Tethered servers are linked, so in used_; counted when asked rather than kept in a counter
    // that every way a tether or a link can end would have to update.
    int tethered = 0;
    used_.for_each_const([&](const Server& server) {
        if (server.client() && server.client()->tethered()) ++tethered;
    });
    return tethered;
}

int Pool::tethered_for_budget() const {
    // In session mode every client keeps its server: a tether changes nothing there.
    return mode_ == PoolMode::Session ? 0 : tethered_server_count();
}

LaunchVerdict Pool::launch_verdict(bool use_reserve) const {
    // The counts of every worker's share of this pool, database and user (the server budget).
    return context_.budget().verdict(database_.name, user_, context_.index(), tethered_for_budget(),
                                     sizes_, use_reserve);
}

LaunchVerdict Pool::take_slot(bool use_reserve) {
    return context_.budget().take(database_.name, user_, context_.index(), tethered_for_budget(),
                                  sizes_, use_reserve);
}

bool Pool::launch_suspended() const {
    if (context_.shutting_down() || paused()) return true;
    return !login_backoff_.may_attempt(context_.now_ms());
}

bool Pool::may_launch(bool use_reserve) const {
    return !launch_suspended() && launch_verdict(use_reserve) == LaunchVerdict::Launch;
}

void Pool::launch_if_needed() {
    // One new server per waiting client not already covered by a server on its way.
    bool exhausted = false;
    while (uncovered_waiting() > 0 && !launch_suspended()) {
        const LaunchVerdict verdict = take_slot(false);
        if (verdict != LaunchVerdict::Launch) {
            exhausted = verdict == LaunchVerdict::TetherReserveExhausted;
            break;
        }
        open_server();
    }
    note_tether_reserve_exhausted(exhausted);
}

void Pool::note_tether_reserve_exhausted(bool exhausted) {
    if (exhausted && !tether_reserve_exhausted_) {
        stats_.tether_reserve_exhausted++;
        // The process's figures, every worker's share of the pool, as the limit counts them
        // (this worker's own would say "1 tethered servers" while three hold the allowance).
        const auto share =
            context_.budget().share(database_.name, user_, context_.index(), tethered_for_budget());
        spdlog::warn(
            "{}/{}: tether_reserve_size ({}) exhausted: {} tethered servers leave {} of "
            "pool_size {} to other clients, which wait",
            database_.name, user_, sizes_.tether_reserve_size, share.tethered,
            std::max(0, share.servers - share.tethered), sizes_.pool_size);
    }
    tether_reserve_exhausted_ = exhausted;
}

void Pool::use_lent_slot() {
    if (Client* client = replication_waiting_.front(); client && !launch_suspended()) {
        replication_waiting_.remove(*client);
        open_server(client);
        return;
    }
    const bool greeting = !welcome_waiting_.empty() && connecting_ == 0 && idle_.empty();
    if (!launch_suspended() && (uncovered_waiting() > 0 || greeting)) {
        open_server();
    } else {
        context_.budget().give_back(database_.name, user_, context_.index());
    }
}

void Pool::on_tether_change() {
    // The allowance is shared with this pool's servers on other workers: they must see the
    // tether (it lets them launch) before this worker next asks the budget for anything.
    if (context_.worker_count() > 1) {
        context_.budget().set_tethered(database_.name, user_, context_.index(),
                                       tethered_for_budget());
    }
    if (!waiting_.empty()) launch_if_needed();
}

bool Pool::launch_server(bool use_reserve) {
    if (launch_suspended() || take_slot(use_reserve) != LaunchVerdict::Launch) return false;
    open_server();
    return true;
}

void Pool::open_server(Client* replication_client) {
    auto* server = new Server(context_, *this);
    if (replication_client) {
        server->dedicate_to(*replication_client);
        replication_client->set_replication_server(server);
    }
    used_.push_back(*server);  // state Connecting (core/server_state.hpp)
    state_counts_.add(ServerState::Connecting);
    ++server_count_;
    ++connecting_;
    context_.stats().servers_opened++;
    server->connect();
}

void Pool::on_server_login(Server& server) {
    --connecting_;
    if (last_login_error_ && context_.worker_count() > 1) {
        // Logins were failing: the same pool on the other workers fails its clients fast until
        // it learns that the server is back.
        const auto key = std::make_pair(database_.name, user_);
        context_.post_to_other_workers([key](PoolContext& other) {
            auto it = other.pools().find(key);
            if (it != other.pools().end()) it->second->on_login_recovered_elsewhere();
        });
    }
    login_backoff_.on_success();
    last_login_error_.reset();
    if (welcome_.empty()) adopt_welcome(server.welcome(), server.params());
    release(server, ReleaseReason::LoginDone);
}

std::size_t Pool::choose_host() {
    const std::size_t index =
        pgtether::choose_host(hosts_, session_attrs_, database_.load_balance_hosts != "disable",
                              host_turn_++, context_.now_ms());
    if (index < hosts_.size()) note_host_attempt(hosts_[index], context_.now_ms());
    return index;
}

std::size_t Pool::side_host() const {
    return pgtether::choose_host(hosts_, session_attrs_, false, 0, context_.now_ms());
}

void Pool::learn_host(const HostNews& news) {
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
        if (host_for_turn(database_, i) == news.host && port_for_host(database_, i) == news.port) {
            apply_host_news(hosts_[i], news, context_.now_ms());
        }
    }
}

HostNews Pool::host_news(std::size_t index, HostNews::Kind kind) const {
    HostNews news;
    news.kind = kind;
    news.host = host_for_turn(database_, index);
    news.port = port_for_host(database_, index);
    return news;
}

void Pool::note_host_role(std::size_t index, const ServerRole& role, const std::string& where) {
    HostStatus& host = hosts_[index];
    const HostStatus before = host;
    note_host_login(host, role, context_.now_ms());
    if (before.known != HostStatus::Known::Nothing && before.known != host.known) {
        spdlog::info("{}/{}: host {} changed role: now {}", database_.name, user_, where,
                     host_role_name(host));
    }
    // Other pools with this host learn its role when it is news: first learnt, changed, or
    // the host was being skipped (not on every login).
    if (before.known != host.known || before.read_only != host.read_only ||
        before.failures != 0 || before.backoff_until_ms != 0) {
        HostNews news = host_news(index, HostNews::Kind::LoggedIn);
        news.role = role;
        context_.share_host_news(news, *this);
    }
}

void Pool::on_role_checked(Server& server, const ServerRole& role) {
    const std::size_t index = server.host_index();
    if (index < hosts_.size()) note_host_role(index, role, server.host_and_port());
    // What one backend of a host answered holds for every backend there.
    std::vector<Server*> to_close;
    auto learn = [&](Server& other) {
        if (other.host_index() != index || other.role_reported()) return;
        other.learn_role(role);
        if (other.state() == Server::State::Idle || other.state() == Server::State::Used) {
            if (!serves(role)) to_close.push_back(&other);  // `server` itself is Sweeping
        }
    };
    server.learn_role(role);
    idle_.for_each(learn);
    used_.for_each(learn);
    for (Server* other : to_close) {
        other->close("server role changed, target_session_attrs = " +
                     std::string(session_attrs_name(session_attrs_)));
    }
}

bool Pool::on_server_role(const Server& server, const ServerRole& role) {
    const std::size_t index = server.host_index();
    if (index >= hosts_.size()) return serves(role);
    HostStatus& host = hosts_[index];
    note_host_role(index, role, server.host_and_port());
    const bool fits = login_serves(hosts_, index, session_attrs_, role, context_.now_ms());
    if (!fits) {
        const std::uint64_t backoff_ms = duration_ms(context_.config().server_host_backoff);
        note_host_failure(host, true, context_.now_ms(), backoff_ms);
        spdlog::info("{}/{}: host {} skipped for {} ms: it is a {}, target_session_attrs = {}",
                     database_.name, user_, server.host_and_port(), backoff_ms,
                     host_role_name(host), session_attrs_name(session_attrs_));
    }
    return fits;
}

void Pool::on_login_recovered_elsewhere() {
    if (!last_login_error_) return;
    login_backoff_.on_success();
    last_login_error_.reset();
    retry_waiting();
}

void Pool::on_login_settings_changed() {
    if (!last_login_error_) return;
    login_backoff_.on_login_settings_changed();
    last_login_error_.reset();
    retry_waiting();
}

void Pool::retry_waiting() {
    launch_if_needed();
    launch_for_replication();
    if (!welcome_waiting_.empty() && connecting_ == 0 && idle_.empty()) (void)launch_server(true);
}

void Pool::on_server_login_failed(Server& server, const protocol::ErrorFields& error,
                                  LoginFailureKind kind) {
    --connecting_;
    if (kind == LoginFailureKind::Unreachable && hosts_.size() > 1 &&
        server.host_index() < hosts_.size()) {
        // A host of a list that is down is skipped for a while, not retried by every new
        // connection (a wrong role was noted by on_server_role already).
        const std::uint64_t backoff_ms = duration_ms(context_.config().server_host_backoff);
        note_host_failure(hosts_[server.host_index()], false, context_.now_ms(), backoff_ms);
        spdlog::info("{}/{}: host {} skipped for {} ms: {}", database_.name, user_,
                     server.host_and_port(), backoff_ms, error.message);
        HostNews news = host_news(server.host_index(), HostNews::Kind::Unreachable);
        news.backoff_ms = backoff_ms;
        context_.share_host_news(news, *this);
    }
    login_backoff_.on_failure(kind, context_.now_ms(),
                              duration_ms(context_.config().server_login_retry));
    last_login_error_ = error;
    // A server that is restarting is waited for (core/login_retry.hpp): its clients are served
    // once it is back, unless it stays away longer than server_login_retry.
    const bool fail_clients = login_fails_clients();
    if (!fail_clients) return;
    while (Client* client = welcome_waiting_.pop_front()) client->on_login_failed(error);
    if (fail_queued_clients(fail_clients, working_servers(server))) {
        // No other server can serve the queued clients: fail them now (fast fail) rather than
        // let them sit until query_wait_timeout.
        protocol::ErrorFields fatal = error;
        fatal.severity = "FATAL";
        while (Client* client = waiting_.pop_front()) {
            client->close(error.message, &fatal);  // PgBouncer's log line: the message alone
        }
    }
}

int Pool::working_servers(const Server& except) {
    int count = 0;
    auto count_working = [&](Server& server) {
        const auto state = server.state();
        const bool logged_in = state != ServerState::Connecting &&
                               state != ServerState::TlsAnswer && state != ServerState::Login &&
                               state != ServerState::Closing;
        if (&server != &except && logged_in && !server.retired()) ++count;
    };
    idle_.for_each(count_working);
    used_.for_each(count_working);
    return count;
}

void Pool::forget_server(Server& server) {
    (void)server;
    state_counts_.remove(ServerState::Closing);
    --server_count_;
    auto& budget = context_.budget();
    if (lending_now_) {
        // Lent (close_for): the slot goes to the requester's pool before anyone here takes it.
        const LendRequest request = *lending_now_;
        lending_now_.reset();
        if (budget.hand_over(database_.name, user_, context_.index(), request.database,
                             request.user, request.worker, request.tethered, request.sizes)) {
            if (!context_.post_to_worker(request.worker, [request](PoolContext& other) {
                    other.use_lent_slot(request.database, request.user);
                })) {
                budget.give_back(request.database, request.user, request.worker);
            }
        }
    } else {
        budget.give_back(database_.name, user_, context_.index());
    }
    launch_if_needed();
    if (!replication_waiting_.empty()) launch_for_replication();
}

void Pool::release(Server& server, ReleaseReason reason) {
    const auto& config = context_.config();
    const std::uint64_t now = context_.now_ms();
    ReleaseFacts facts;
    facts.reason = reason;
    facts.closing = server.state() == Server::State::Closing;
    facts.retired = server.retired();
    facts.age_ms = now - server.connected_at_ms();
    // 0, as in PgBouncer: every server is used once (closed at its first release).
    facts.lifetime_ms = duration_ms(server_lifetime_for(config, database_));
    facts.client_linked = server.client() != nullptr;
    facts.role_fits = serves(server.role());
    facts.paused = paused();
    facts.cancels_in_flight = server.cancels_in_flight() > 0;
    facts.reset_due = (mode_ == PoolMode::Session || config.server_reset_query_always) &&
                      !config.server_reset_query.empty();
    const ReleasePlan plan = plan_release(facts);  // core/departure.hpp
    switch (plan.action) {
        case ReleasePlan::Action::Nothing: return;
        case ReleasePlan::Action::Close: close_released(server, plan.why); return;
        case ReleasePlan::Action::WaitForCancels: server.wait_for_cancels(); return;
        case ReleasePlan::Action::Reset: server.reset(); return;
        case ReleasePlan::Action::Return: break;
    }
    if (lend_owed_ && pays_lend_owed_with(server)) return;
    // Not use (ReleaseReason::Unused): server_idle_timeout and server_check_delay go on counting
    // from the last client's release, or every sweep or catalog check would restart them.
    server.mark_idle(plan.counts_as_use ? now : server.idle_since_ms());
    // Not handed to a waiting client here: this runs inside the releasing server's (or its
    // client's) callbacks, and the new client's held requests would run inside them too. A
    // replication client waiting evicts it at the hand-off unless an ordinary one takes it.
    if (!waiting_.empty() || !replication_waiting_.empty()) schedule_hand_offs();
}

void Pool::close_released(Server& server, ReleasePlan::Why why) {
    switch (why) {
        case ReleasePlan::Why::Retired:
            // Why it was retired while in use: a reload's changed settings, RECONNECT, ...
            server.close(server.retire_reason().empty() ? "server retired"
                                                        : server.retire_reason());
            return;
        case ReleasePlan::Why::Lifetime: server.close("server_lifetime"); return;
        case ReleasePlan::Why::RoleChanged:
            if (server.host_index() < hosts_.size()) {
                note_host_role(server.host_index(), server.role(), server.host_and_port());
            }
            server.close("server role changed, target_session_attrs = " +
                         std::string(session_attrs_name(session_attrs_)));
            return;
        case ReleasePlan::Why::Paused: server.close("pause mode"); return;
        case ReleasePlan::Why::None: break;
    }
    server.close("released");
}

void Pool::schedule_hand_offs() {
    if (hand_offs_scheduled_) return;
    hand_offs_scheduled_ = true;
    context_.schedule_hand_offs(*this);
}

void Pool::serve_waiting_clients() {
    hand_offs_scheduled_ = false;
    while (!waiting_.empty() && !paused()) {
        // The server released last (LIFO) or idle longest (server_round_robin), as
        // on_server_transition ordered them; the waiting client is chosen for it
        // (waiting_client_for).
        Server* server = idle_.front();
        if (server == nullptr) break;
        if (server->spoke_while_idle(context_.now_ms())) {
            server->close("the server spoke or closed while idle in the pool");
            continue;
        }
        hand_to_waiting_client(*server);
    }
    if (!replication_waiting_.empty() && !paused()) launch_for_replication();
}

// Session settings affinity (docs/session-state.md): a backend that already has a client's
// settings saves the round trip that would replay them, and one without any settings saves a
// client without settings the RESET. Both choices look only a few entries deep, so they cost
// little and change the order of service only a little.
namespace {
constexpr std::size_t kAffinityLookahead = 16;
// How often the first waiting client may be passed over for one whose settings match.
constexpr int kMaxHeadSkips = 8;

bool settings_match(const Client& client, const Server& server) {
    if (!client.has_settings()) return server.applied_settings().empty();
    return server.applied_settings() == client.wanted_settings();
}
}  // namespace

Server* Pool::idle_server_for(const Client& client) {
    // server_round_robin asks for the load spread evenly over the backends: no preference then.
    const auto& config = context_.config();
    if (config.session_settings == StateHandling::Keep && !config.server_round_robin) {
        // The client's settings are merged once, not for every candidate.
        const SettingsMap wanted = client.has_settings() ? client.wanted_settings() : SettingsMap{};
        if (Server* match = idle_.find_first(
                [&](const Server& server) { return server.applied_settings() == wanted; },
                kAffinityLookahead)) {
            return match;
        }
    }
    return idle_.front();  // LIFO (or round robin): see on_server_transition
}

Client* Pool::waiting_client_for(const Server& server) {
    Client* head = waiting_.front();
    if (context_.config().session_settings == StateHandling::Keep && head_skips_ < kMaxHeadSkips &&
        !settings_match(*head, server)) {
        if (Client* match = waiting_.find_first(
                [&](const Client& client) { return settings_match(client, server); },
                kAffinityLookahead)) {
            ++head_skips_;
            return match;
        }
    }
    head_skips_ = 0;
    return head;
}

void Pool::hand_to_waiting_client(Server& server) {
    Client* client = waiting_client_for(server);
    waiting_.remove(*client);
    if (uncovered_waiting() == 0) note_tether_reserve_exhausted(false);  // nobody left uncovered
    client->on_server_assigned(server);
}

void Pool::on_server_transition(Server& server, ServerState from, ServerState to) {
    state_counts_.move(from, to);
    const PoolList was = state_info(from).list;
    const PoolList is = state_info(to).list;
    if (was == is) return;
    if (was == PoolList::Idle) idle_.remove(server);
    if (was == PoolList::Used) used_.remove(server);
    if (is == PoolList::Used) used_.push_back(server);
    if (is == PoolList::Idle) {
        // LIFO by default keeps the hottest backends busy and lets the others reach
        // server_idle_timeout; server_round_robin spreads the load evenly instead. The list is
        // thus ordered by idle place (descending, or ascending with round robin).
        const bool round_robin = context_.config().server_round_robin;
        if (from == ServerState::Sweeping) {
            // Back from pgtether's own query (a leak sweep, a catalog or role check): to the
            // place it had, or the next client would get another backend than on a direct
            // connection (settings affinity, LIFO and round robin all rest on the order).
            const std::uint64_t place = server.idle_place();
            idle_.insert_sorted(server, [&](const Server& other) {
                return round_robin ? other.idle_place() > place : other.idle_place() < place;
            });
        } else {
            server.set_idle_place(++idle_places_given_);
            if (round_robin) {
                idle_.push_back(server);
            } else {
                idle_.push_front(server);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Periodic work

void Pool::close_idle_servers(const char* reason) {
    std::vector<Server*> idle;
    idle_.for_each([&](Server& server) { idle.push_back(&server); });
    for (Server* server : idle) server->close(reason);
}

bool Pool::close_one_idle_server(const char* reason) {
    Server* server = idle_.front();
    if (server == nullptr) return false;
    server->close(reason);
    return true;
}

void Pool::make_room_elsewhere() {
    // Only for a pool below its own limit (pool_size, and the tether allowance its tethered
    // clients entitle it to), as PgBouncer evicts only for a pool below pool_size.
    const LaunchVerdict verdict = launch_verdict(false);
    if (context_.shutting_down() || verdict == LaunchVerdict::Launch) return;
    const bool db_full = verdict == LaunchVerdict::DatabaseFull;
    const bool user_full = verdict == LaunchVerdict::UserFull;
    if (db_full || user_full) {
        for (const auto& [key, pool] : context_.pools()) {
            if (pool.get() == this) continue;
            // Closing its server must free every limit that is full.
            if (pool->frees_room_for(database_.name, user_, db_full, user_full) &&
                pool->close_one_idle_server("evicted (to make room for another pool)")) {
                return;
            }
        }
    }
    // The servers that fill the limit may be other workers': ask them to lend one (close an idle
    // one, or the next one released, which frees a slot of the budget for this worker).
    if (context_.worker_count() > 1) ask_to_lend(db_full, user_full);
}

bool Pool::frees_room_for(const std::string& database, const std::string& user, bool db_full,
                          bool user_full) const {
    if (!db_full && !user_full) return database_.name == database && user_ == user;
    return (!db_full || database_.name == database) && (!user_full || user_ == user);
}

void Pool::ask_to_lend(bool db_full, bool user_full) {
    LendRequest request;
    request.worker = context_.index();
    request.database = database_.name;
    request.user = user_;
    request.db_full = db_full;
    request.user_full = user_full;
    request.sizes = sizes_;
    request.tethered = tethered_for_budget();
    context_.post_to_other_workers([request](PoolContext& lender) { lender.lend_server(request); });
}

bool Pool::clients_wait_for_servers() const {
    return !waiting_.empty() || !replication_waiting_.empty() ||
           (lend_owed_ && context_.now_ms() < lend_owed_until_ms_);
}

bool Pool::lend(const LendRequest& request) {
    if (server_count_ == 0) return false;
    Server* idle = idle_.front();
    if (idle && can_spare_for(request.worker)) {
        close_for(*idle, request);
        return true;
    }
    // Every server is in use, or the idle one is about to go to this worker's own waiting
    // clients: the next one released goes, if this worker can spare it then.
    lend_owed_ = request;
    lend_owed_until_ms_ = context_.now_ms() + kLendRequestLifetimeMs;
    return true;
}

bool Pool::can_spare_for(std::size_t requester) const {
    if (waiting_.empty()) return true;
    // Clients of this worker waiting too: lend only while this worker holds more of the pool
    // than the requester, so that two busy workers converge to even shares instead of passing
    // servers back and forth (each a new server login) -- and always to a requester that holds
    // none, which would otherwise never be served while this worker stays busy.
    const auto& budget = context_.budget();
    const int theirs = budget.pool_servers_on(database_.name, user_, requester);
    return theirs == 0 ||
           budget.pool_servers_on(database_.name, user_, context_.index()) > theirs + 1;
}

bool Pool::pays_lend_owed_with(Server& server) {
    if (!lend_owed_ || context_.now_ms() >= lend_owed_until_ms_) return false;
    if (!can_spare_for(lend_owed_->worker)) return false;
    const LendRequest request = *lend_owed_;
    lend_owed_.reset();
    close_for(server, request);
    return true;
}

void Pool::close_for(Server& server, const LendRequest& request) {
    lending_now_ = request;
    server.close("lent to another worker");  // forget_server hands the slot over
    lending_now_.reset();
}

void Pool::close_all_servers(const char* reason) {
    // A replication stream may last for ever: its backend closes now, not at a release that
    // never comes (PgBouncer closes it at once too).
    std::vector<Server*> relaying;
    used_.for_each([&](Server& server) {
        server.retire(reason);
        if (server.state() == ServerState::Relaying) relaying.push_back(&server);
    });
    for (Server* server : relaying) server->close(reason);
    close_idle_servers(reason);
}

void Pool::probe_login() {
    // Clients that arrive while logins fail are turned away without waiting for an attempt; one
    // attempt (at the backoff's pace) finds out whether the server is back for the next ones,
    // who then wait for it instead.
    if (connecting_ == 0) (void)launch_server(false);
}

bool Pool::login_fails_clients() const {
    return login_backoff_.fail_clients(context_.now_ms(),
                                       duration_ms(context_.config().server_login_retry));
}

PoolLoginRecord Pool::login_record() const {
    PoolLoginRecord record;
    record.database = database_.name;
    record.user = user_;
    if (!login_backoff_.failing()) return record;
    // A wrong role (a failover under way) counts as a server not yet reachable.
    record.failing_unreachable = login_backoff_.kind() != LoginFailureKind::Refused;
    record.failing_since_ms = login_backoff_.failing_since_ms();
    record.last_failure_ms = login_backoff_.last_failure_ms();
    if (last_login_error_) record.error = last_login_error_->message;
    return record;
}

bool Pool::empty() const {
    return server_count_ == 0 && waiting_.empty() && replication_waiting_.empty();
}

}  // namespace pgtether
