// Every timeout of clients and pools, in one place (proxy/pool/janitor.hpp lists them all): the
// per-client and per-pool checks the worker's janitor tick (Worker::janitor, daemon/worker.cpp)
// runs. They are members of Client and Pool (they read those objects' own times and act through
// their own calls); they live here so that what pgtether gives up on, and when, can be read in
// one file.
#include "proxy/pool/janitor.hpp"

#include <algorithm>
#include <vector>

#include "proxy/net/log.hpp"

#include "protocol/backend_messages.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sqlstate.hpp"
#include "proxy/client/client.hpp"
#include "proxy/client/console_session.hpp"
#include "proxy/pool/listen_hub.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_context.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

using janitor::kCleanupTimeoutMs;
using janitor::kLingerMs;
using janitor::kTetherSurplusIdleMs;

// ---------------------------------------------------------------------------------------------
// Clients: login, waiting, idleness, queries, transactions, tethers

void Client::janitor(std::uint64_t now) {
    const auto& config = context_.config();
    check_listener_stall(now);
    if (state_ == State::Closing) return;
    auto expired = [&](std::uint64_t since, Duration limit) {
        return limit.count() > 0 && now - since >= duration_ms(limit);
    };
    // The pool's resolution of the per-database and per-user values; before the client has a
    // pool, the global ones.
    const ClientTimeouts timeouts =
        pool_ ? pool_->timeouts() : resolve_client_timeouts(config, nullptr, nullptr);
    switch (state_) {
        case State::Startup:
        case State::AuthLookup:
        case State::Auth:
        case State::WelcomeWait:
            if (expired(connected_at_ms_, config.client_login_timeout)) {
                fail(protocol::sqlstate::kProtocolViolation, "client_login_timeout");
            } else if (state_ == State::WelcomeWait &&
                       expired(connected_at_ms_, timeouts.query_timeout)) {
                // Waiting for the pool's first server to log in (PgBouncer's CL_WAITING_LOGIN):
                // PgBouncer's janitor applies query_timeout to every waiting client, counted
                // from its request -- here the connection -- so a server that is slow to log
                // in does not hold the client until client_login_timeout.
                fail(protocol::sqlstate::kQueryCanceled, "query_timeout");
            } else if (state_ == State::AuthLookup &&
                       expired(state_since_ms_, config.server_connect_timeout)) {
                fail(protocol::sqlstate::kConnectionFailure,
                     "authentication lookup timed out (server_connect_timeout)");
            }
            break;
        case State::Waiting:
            // PgBouncer's query_wait_notify: whole seconds waited, strictly more than the
            // setting, and one NOTICE for the connection's life.
            if (config.query_wait_notify > 0 && !wait_notice_sent_ &&
                (now - state_since_ms_) / 1000 >
                    static_cast<std::uint64_t>(config.query_wait_notify)) {
                wait_notice_sent_ = true;
                std::string notice;
                protocol::append_notice_response(
                    notice, {"NOTICE", "00000",
                             "No server connection available in postgres backend, client being "
                             "queued",
                             {}, {}});
                stream_.write(notice);
            }
            // Queued for a server since state_since_ms_: PgBouncer applies both limits to a
            // waiting client, from the same start, query_timeout first.
            if (expired(state_since_ms_, timeouts.query_timeout)) {
                fail(protocol::sqlstate::kQueryCanceled, "query_timeout");
            } else if (expired(state_since_ms_, timeouts.query_wait_timeout)) {
                fail(protocol::sqlstate::kProtocolViolation, "query_wait_timeout");
            }
            break;
        case State::Idle:
            if (admin_ && admin_->waiting()) break;  // PAUSE / WAIT_CLOSE is not idleness
            if (expired(last_activity_ms_ ? last_activity_ms_ : state_since_ms_,
                        timeouts.client_idle_timeout)) {
                fail(protocol::sqlstate::kIdleSessionTimeout, "client_idle_timeout");
            }
            break;
        case State::Active: {
            // A replication relay's bytes are not read (client_replication.cpp): its timeouts are
            // the walsender's (wal_sender_timeout), as on a direct connection.
            if (!server_ || replication_) break;
            if (server_->busy()) {
                // pgtether's own query for this client (server_check_query, the parameter sync,
                // the tether's probe) stands in for the client's: a backend that stopped
                // answering is given up after query_timeout, counted from the client's last
                // request. Closing it tells this client (Client::on_server_lost): one whose
                // request never reached the backend quietly gets another.
                if (expired(last_activity_ms_, timeouts.query_timeout)) {
                    server_->close("pgtether's query on the server took longer than query_timeout");
                }
                break;
            }
            auto& tracker = server_->link().tracker();
            // In a transaction (or a lone statement) since transaction_started_ms_: PgBouncer
            // checks transaction_timeout after query_timeout and idle_transaction_timeout.
            auto transaction_expired = [&] {
                return transaction_started_ms_ != 0 &&
                       expired(transaction_started_ms_, timeouts.transaction_timeout);
            };
            if (!tracker.quiet()) {
                if (expired(query_started_ms_, timeouts.query_timeout)) {
                    // PgBouncer closes the server with "query timeout"; pgtether cancels the
                    // query and scrubs the backend, and says so in the same words.
                    spdlog::warn("{}: query timeout: cancelling the query of {}",
                                 server_->describe(), describe());
                    fail(protocol::sqlstate::kQueryCanceled, "query_timeout");
                } else if (transaction_expired()) {
                    fail(protocol::sqlstate::kTransactionTimeout, "transaction timeout");
                }
            } else if (tracker.tx_status() != protocol::kTxIdle) {
                // Idle in a transaction since the backend answered the last request: the time a
                // query ran is query_timeout's business, not this one's.
                auto idle_since = std::max(last_activity_ms_, server_->quiet_since_ms());
                if (expired(idle_since, timeouts.idle_transaction_timeout)) {
                    fail(protocol::sqlstate::kIdleInTransactionTimeout,
                         "idle transaction timeout");
                } else if (transaction_expired()) {
                    fail(protocol::sqlstate::kTransactionTimeout, "transaction timeout");
                }
            } else if (tethered() && expired(last_activity_ms_, config.tethered_idle_timeout)) {
                fail(protocol::sqlstate::kIdleSessionTimeout,
                     "tethered client idle for longer than tethered_idle_timeout; its advisory "
                     "locks have been released");
            } else if (tethered() && lock_ledger().needs_probe()) {
                IdleTether idle;
                idle.ledger_needs_probe = true;
                idle.backend_idle = tracker.idle() && !server_->holds_client_input();
                idle.idle_ms = now - std::min(now, last_activity_ms_);
                idle.since_last_probe_ms = now - std::min(now, tether_details().idle_probe_at_ms);
                idle.delay_ms = duration_ms(config.tether_probe_delay);
                idle.others_waiting = pool_->clients_wait_for_servers();
                if (should_probe_idle_tether(idle)) {
                    tether_details().idle_probe_at_ms = now;
                    server_->probe_idle_tether();
                }
            } else if (expired(last_activity_ms_, timeouts.client_idle_timeout) &&
                       pool_->mode() == PoolMode::Session) {
                fail(protocol::sqlstate::kIdleSessionTimeout, "client_idle_timeout");
            }
            break;
        }
        case State::Closing:
            if (now - state_since_ms_ >= kLingerMs) stream_.close();
            break;
    }
}

// ---------------------------------------------------------------------------------------------
// Pools: servers connecting, cleaning up, idle, past their lifetime; the reserve pool

void Pool::janitor(std::uint64_t now) {
    const auto& config = context_.config();
    if (listen_hub_) listen_hub_->tick(now);
    // Reserve pool: a client has waited longer than reserve_pool_timeout.
    if (Client* first = waiting_.front()) {
        if (now - first->state_since_ms() >= duration_ms(config.reserve_pool_timeout) &&
            uncovered_waiting() > 0 && !launch_suspended() && take_slot(true) == LaunchVerdict::Launch) {
            // PgBouncer logs this as a WARNING: the pool was too small for the load.
            spdlog::warn("{}/{}: taking connection from reserve_pool", database_.name, user_);
            open_server();
        }
    }
    // Clients (or a greeting) waiting while other pools of the same database or user hold
    // max_db_connections / max_user_connections: close an idle server of such a pool to make
    // room, as PgBouncer does (evict_connection), and retry here, because a server released in
    // another pool does not notify this one. Without this such clients waited forever.
    if (!welcome_waiting_.empty() && welcome_.empty()) {
        // Another worker's share of the pool may have learnt the greeting meanwhile: the clients
        // logging in need not wait for a server of their own.
        learn_welcome_from_other_workers();
    }
    const bool needs_greeting = !welcome_waiting_.empty() && server_count_ == 0 &&
                                connecting_ == 0;
    if ((uncovered_waiting() > 0 || needs_greeting) &&
        !may_launch(needs_greeting)) {
        make_room_elsewhere();
    }
    launch_if_needed();
    // Replication clients waiting: a slot may have come free in another pool or worker.
    if (!replication_waiting_.empty()) launch_for_replication();
    if (needs_greeting) (void)launch_server(true);
    // min_pool_size: keep some servers warm once the pool is in use (the pool's servers on every
    // worker count).
    while (context_.budget().pool_servers(database_.name, user_) < sizes_.min_pool_size &&
           launch_server(false)) {
    }

    // Servers to close, each with its reason, decided before any is closed.
    std::vector<std::pair<Server*, const char*>> to_close;
    std::vector<Server*> to_sweep;
    std::vector<Server*> to_check_role;
    const std::uint64_t role_check_interval = duration_ms(config.server_check_delay);
    const bool sweep = config.advisory_lock_tracking != LockTracking::Off &&
                       config.server_check_delay.count() > 0;
    // Limits count the pool's servers on every worker (the server budget); only the worker
    // with the largest share closes those beyond them. With one worker, that is this pool alone.
    ServerBudget::PoolShare share;
    if (!idle_.empty()) {
        const int tethered_here = mode_ == PoolMode::Session ? 0 : tethered_server_count();
        share = context_.budget().share(database_.name, user_, context_.index(), tethered_here);
        if (context_.worker_count() == 1) share.tethered = tethered_server_count();
    }
    const int tethered = share.tethered;  // for idle servers only
    const int elsewhere = share.servers - server_count_;  // other workers' servers of the pool
    auto remaining = [&] { return server_count_ + elsewhere - static_cast<int>(to_close.size()); };
    const bool checks = !config.server_check_query.empty();
    const std::uint64_t lifetime_ms = duration_ms(server_lifetime_for(config, database_));
    // From the back: the servers the next clients would get last are the ones closed first
    // (least recently used, with LIFO) and the one a host's role check borrows.
    idle_.for_each_reverse([&](Server& server) {
        // SV_USED: due for server_check_query before its next use (Server::link runs it).
        server.mark_check_due(checks && now - server.idle_since_ms() >=
                                            duration_ms(config.server_check_delay));
        const Surplus surplus =
            share.largest ? server_surplus(sizes_, remaining(), tethered) : Surplus::None;
        if (now - server.connected_at_ms() >= lifetime_ms) {
            to_close.emplace_back(&server, "server lifetime over");
        } else if (surplus == Surplus::PoolSizeReduced) {
            // pool_size, reserve_pool_size or tether_reserve_size was lowered by a reload or SET.
            to_close.emplace_back(&server, "too many servers in the pool (pool size reduced)");
        } else if (surplus == Surplus::TetherReserveUnused &&
                   now - server.idle_since_ms() >= kTetherSurplusIdleMs) {
            // Opened while clients were tethered; those tethers have ended (or a size was
            // lowered) and it has not been needed since.
            to_close.emplace_back(&server,
                                  "not needed: beyond pool_size and the tether allowance in use");
        } else if (config.server_idle_timeout.count() > 0 &&
                   now - server.idle_since_ms() >= duration_ms(config.server_idle_timeout) &&
                   remaining() > sizes_.min_pool_size) {
            to_close.emplace_back(&server, "server idle timeout");
        } else if (session_attrs_ != SessionAttrs::Any && !server.role_reported() &&
                   server.host_index() < hosts_.size() &&
                   role_check_due(hosts_[server.host_index()], now, role_check_interval)) {
            // A server that does not report its role (PostgreSQL 13-): one of each host's is
            // asked every server_check_delay; the stamp makes it one (Pool::on_role_checked
            // tells the others).
            note_host_attempt(hosts_[server.host_index()], now);
            to_check_role.push_back(&server);
        } else if (sweep && now - std::max(server.idle_since_ms(), server.last_checked_ms()) >=
                                duration_ms(config.server_check_delay)) {
            to_sweep.push_back(&server);
        }
    });
    used_.for_each([&](Server& server) {
        const ServerDeadline deadline = state_info(server.state()).deadline;
        // Connecting counts from the connect, TLS and login from when the connection was made.
        const std::uint64_t since = deadline == ServerDeadline::Login ? server.login_since_ms()
                                                                      : server.state_since_ms();
        const bool logging_in =
            deadline == ServerDeadline::Connect || deadline == ServerDeadline::Login;
        const bool cleaning = deadline == ServerDeadline::CleanUp;
        const bool orphaned = deadline == ServerDeadline::ForClient && server.client() == nullptr;
        if (logging_in && config.server_connect_timeout.count() > 0 &&
            now - since >= duration_ms(config.server_connect_timeout)) {
            to_close.emplace_back(&server, "connect timeout (server_connect_timeout)");
        } else if (cleaning && now - since >= kCleanupTimeoutMs) {
            to_close.emplace_back(&server, "clean-up took too long");
        } else if (orphaned && now - since >= kCleanupTimeoutMs) {
            // pgtether's own query for a client that has left (a parameter sync, a check, a
            // probe) must finish and hand the server back; one that does not would hold a pool
            // slot for ever (found by the wire fuzzer, tests/integration/test_wire_fuzz.cpp).
            to_close.emplace_back(&server, "pgtether's own query outlived its client");
        }
    });
    for (auto [server, reason] : to_close) server->close(reason);
    for (Server* server : to_sweep) server->sweep_for_leaks();
    for (Server* server : to_check_role) server->check_role();
}

}  // namespace pgtether
