#include "proxy/server/own_queries.hpp"

#include <optional>
#include <string>
#include <utility>

#include "core/host_choice.hpp"
#include "core/lock_ledger.hpp"
#include "core/state_probe.hpp"
#include "core/tether_policy.hpp"
#include "protocol/sqlstate.hpp"
#include "protocol/statement_redaction.hpp"
#include "proxy/client/client.hpp"
#include "proxy/net/log.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/server/server_context.hpp"

namespace pgtether {

// ---------------------------------------------------------------------------------------------
// What every job shares

void Server::OwnQueryJob::on_end_without_client(Server& server, bool clean) {
    const PurposeTraits& traits = purpose_traits(purpose);
    switch (decide_orphaned_query_end(traits.probe, clean).action) {  // core/departure.hpp
        case DepartureDecision::Action::Scrub:
            server.scrub();
            return;
        case DepartureDecision::Action::Release:
            keep_changes(server);
            server.pool_.release(server, ReleaseReason::ClientDone);
            return;
        case DepartureDecision::Action::FinishQuery:
        case DepartureDecision::Action::Close:
            server.close(std::string(traits.name) + " failed: " + error.message);
            return;
    }
}

OwnQueryOutcome Server::OwnQueryJob::decide(const Server& server, bool clean,
                                            bool answer_usable) const {
    OwnQueryEnd end;
    end.clean = clean;
    end.answer_usable = answer_usable;
    end.backend_idle = server.link_.tracker().idle();
    return decide_own_query_outcome(purpose, end);  // core/own_query_outcome.hpp
}

std::string Server::OwnQueryJob::failure(const char* what) const {
    return std::string(what) + " failed: " + (failed ? error.message : "unexpected answer");
}

// ---------------------------------------------------------------------------------------------
// At login

void Server::ConnectQueryJob::on_end(Server& server, bool clean) {
    if (decide(server, clean) == OwnQueryOutcome::FinishLogin) {
        server.pool_.on_server_login(server);
        return;
    }
    server.login_failed(
        protocol::fatal_error(protocol::sqlstate::kConnectionFailure, failure("connect_query")));
}

void Server::LoginRoleCheckJob::on_end(Server& server, bool clean) {
    const std::optional<ServerRole> role = clean ? decode_role_check(rows) : std::nullopt;
    if (decide(server, clean, role.has_value()) == OwnQueryOutcome::FinishLogin) {
        server.role_ = *role;
        server.finish_login_with_role();
        return;
    }
    server.login_failed(
        protocol::fatal_error(protocol::sqlstate::kConnectionFailure, failure("role check")));
}

// ---------------------------------------------------------------------------------------------
// Before a client's request

void Server::ServerCheckJob::on_end(Server& server, bool clean) {
    if (decide(server, clean) == OwnQueryOutcome::Close) {
        server.close("server_check_query failed: " + error.message);
        return;
    }
    server.last_checked_ms_ = server.context_.now_ms();
    server.sync_parameters();
    if (!server.internal_ && server.client_) server.client_->on_server_ready();
}

void Server::ParameterSyncJob::on_end(Server& server, bool clean) {
    if (decide(server, clean) == OwnQueryOutcome::FailClient) {
        // Close the client while still linked: its detach hands this server back (or scrubs
        // it). Releasing first would let the client's held request take the server again,
        // repeat the failing SET and get the backend closed for nothing.
        protocol::ErrorFields fatal_error = error;
        fatal_error.severity = "FATAL";
        server.client_->close("could not apply client parameters: " + fatal_error.message,
                              &fatal_error);
        return;
    }
    keep_changes(server);
    server.client_->on_server_ready();
}

void Server::ParameterSyncJob::keep_changes(Server& server) {
    // A sync that completed changed the backend's settings, whether or not its client stayed.
    if (settings_after_) server.applied_settings_ = std::move(*settings_after_);
}

// ---------------------------------------------------------------------------------------------
// The tether

void Server::TetherProbeJob::on_end(Server& server, bool /*clean*/) {
    Client* client = server.client_;
    std::optional<StateReport> report;
    // An answer without its CommandComplete is no answer: the backend skipped the probe.
    if (!failed && completed) report = decode_state_probe(rows);
    if (!report) {
        // A prepared probe that failed (a client took its name, or dropped it by name): this
        // backend gets simple probes from now on.
        if (failed) server.prepared_probe_refused_ = true;
        // Cannot tell: keep the client on this backend rather than risk handing its state to
        // someone else. The next relevant transaction probes again.
        spdlog::warn("{}: session state probe failed ({}); keeping the client tethered",
                     client->describe(),
                     failed      ? error.message
                     : completed ? std::string("bad rows")
                                 : std::string("not run"));
        if (probed & kStateAdvisoryLock) {
            // What the ledger listed is not sure any more, and more may be held.
            LockLedger unknown = client->lock_ledger();
            unknown.mark_unknown();
            client->adopt_lock_ledger(unknown);
        }
        server.note_tether_change(
            tether_kinds_after_probe(client->tether_kinds(), probed, nullptr));
        client->on_server_ready();
        return;
    }
    if (probed & kStateSettings) {
        // The backend's session-level settings are now exactly the client's (it was in sync
        // when the transaction began).
        server.applied_settings_ = report->settings;
        client->set_session_settings(std::move(report->settings));
    }
    client->update_tether_details(probed & kTetherKinds, report->locks, report->summaries);
    server.note_tether_change(
        tether_kinds_after_probe(client->tether_kinds(), probed, &report->present));
    if (client->tethered()) {
        client->on_server_ready();
        return;
    }
    server.release_to_pool();
}

void Server::DiscardedProbeJob::on_end(Server& server, bool /*clean*/) {
    server.client_->on_server_ready();
}

// ---------------------------------------------------------------------------------------------
// Reset, scrub and leak sweep

void Server::CleanupJob::on_end(Server& server, bool clean) {
    // The cleanups verify with a probe: nothing of a tracked kind may remain.
    std::optional<StateReport> report;
    if (clean && (probed == 0 || completed)) {
        report = decode_state_probe(rows);
        if (report && (probed & kStateSettings)) server.applied_settings_ = report->settings;
    }
    auto reason = [&]() {
        if (failed) return error.message;
        if (!report) return std::string("unexpected probe result");
        return "session state remains: " +
               describe_state(report->present, describe_locks(report->locks), report->summaries);
    };
    Pool& pool = server.pool_;
    if (kind_ == CleanupKind::Sweep) server.last_checked_ms_ = server.context_.now_ms();
    CleanupAnswer answer;
    answer.verified = report.has_value();
    answer.present = report ? report->present : 0;
    answer.cancelled = failed && error.sqlstate == protocol::sqlstate::kQueryCanceled;
    answer.scrub_repeats = server.scrub_repeats_;
    const CleanupOutcome outcome = decide_cleanup_outcome(kind_, answer);  // core/departure.hpp
    if (kind_ == CleanupKind::Scrub && outcome.action != CleanupOutcome::Action::Rerun) {
        server.scrub_repeats_ = 0;
    }
    switch (outcome.action) {
        case CleanupOutcome::Action::Rerun:
            // The scrub's cancel struck its own statements (CleanupAnswer::cancelled); they are
            // idempotent, and nothing is left running to cancel now.
            ++server.scrub_repeats_;
            spdlog::debug("S-{} {}/{}: scrub of backend {} was cancelled; running it again",
                          server.id_, pool.database_name(), pool.user_name(),
                          server.backend_key_.pid);
            server.scrub();
            return;
        case CleanupOutcome::Action::ScrubLeak:
            pool.stats().leaks_found++;
            spdlog::warn(
                "S-{} {}/{}: leaked session state on idle backend {}: {} (last used by {}: {})",
                server.id_, pool.database_name(), pool.user_name(), server.backend_key_.pid,
                describe_state(report->present, describe_locks(report->locks), report->summaries),
                server.last_client_description_,
                protocol::statement_for_log(server.last_statement_,
                                            server.context_.config().log_statement_text));
            server.scrub();
            return;
        case CleanupOutcome::Action::Close:
            switch (kind_) {
                case CleanupKind::Reset:
                    server.close("server_reset_query failed: " + reason());
                    return;
                case CleanupKind::Scrub:
                    pool.stats().scrub_failures++;
                    server.close("scrub failed: " + reason());
                    return;
                case CleanupKind::Sweep:
                    server.close("leak sweep failed: " + reason());
                    return;
            }
            return;
        case CleanupOutcome::Action::Release:
            break;
    }
    switch (kind_) {
        case CleanupKind::Reset:
            pool.release(server, ReleaseReason::ResetRan);
            return;
        case CleanupKind::Scrub:
            pool.stats().scrubs++;
            // The tether doing its job, not a problem: LOG level (PgBouncer has no such line).
            spdlog::info("S-{} {}/{}: scrubbed backend {} after {} left", server.id_,
                         pool.database_name(), pool.user_name(), server.backend_key_.pid,
                         server.last_client_description_);
            pool.release(server, ReleaseReason::Scrubbed);
            return;
        case CleanupKind::Sweep:
            // A sweep that found nothing changed nothing: the backend is as its last release
            // left it (reset then, in session mode), so no server_reset_query after every sweep.
            pool.release(server, ReleaseReason::Unused);
            return;
    }
}

// ---------------------------------------------------------------------------------------------
// On an idle pooled backend, lent to pgtether

void Server::RoleCheckJob::on_end(Server& server, bool clean) {
    const std::optional<ServerRole> role = clean ? decode_role_check(rows) : std::nullopt;
    if (decide(server, clean, role.has_value()) == OwnQueryOutcome::Close) {
        server.close(failure("role check"));
        return;
    }
    // Told before the release, which closes this server when its role no longer serves the
    // database (Pool::release, RoleChanged).
    server.pool_.on_role_checked(server, *role);
    // pgtether's SELECT changed nothing: no server_reset_query for it (session mode), and it
    // is not use either (server_idle_timeout keeps counting).
    server.pool_.release(server, ReleaseReason::Unused);
}

void Server::CatalogCheckJob::on_end(Server& server, bool clean) {
    std::optional<std::string> fingerprint;
    if (clean && rows.size() == 1 && rows[0].size() == 1 && rows[0][0]) {
        fingerprint = std::move(*rows[0][0]);
    }
    // A SELECT that changed nothing goes back unused (as RoleCheckJob's does).
    if (decide(server, clean) == OwnQueryOutcome::GiveBack) {
        server.pool_.release(server, ReleaseReason::Unused);
    } else {
        server.close(failure("catalog check"));
    }
    // The watch is told after the backend went back or was closed.
    if (done_) std::exchange(done_, nullptr)(std::move(fingerprint));
}

void Server::CatalogCheckJob::on_server_closed() {
    if (done_) std::exchange(done_, nullptr)(std::nullopt);
}

}  // namespace pgtether
