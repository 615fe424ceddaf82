// pgtether's own queries on a server, one object each: what it collects of the backend's answer
// and the one handler that carries out what follows. What follows is decided by pure functions in
// core/ (own_query_outcome.hpp: decide_own_query_outcome; departure.hpp: decide_cleanup_outcome,
// decide_orphaned_query_end), table-tested there; a handler carries the decision out.
//
// The jobs are Server's nested classes: what they carry out changes the server's own state (its
// role, its settings, its place in the pool), which stays private to everyone else. Only
// server.cpp and own_queries.cpp include this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/departure.hpp"
#include "core/own_query_outcome.hpp"
#include "core/query_result.hpp"
#include "core/session_settings.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

// One query (or one write of several) and its answer: the rows of its last result set and its
// first error (QueryResult), and how many ReadyForQuery are still due.
class Server::OwnQueryJob : public QueryResult {
public:
    explicit OwnQueryJob(InternalPurpose what) : purpose(what) {}
    virtual ~OwnQueryJob() = default;
    OwnQueryJob(const OwnQueryJob&) = delete;
    OwnQueryJob& operator=(const OwnQueryJob&) = delete;

    const InternalPurpose purpose;  // its row of purpose_traits: state, name, for whom it runs
    int pending_ready = 0;          // ReadyForQuery messages still expected
    int own_ready = 0;         // how many of those answer our queries (the rest drain the client's)
    std::uint32_t probed = 0;  // the state kinds the last query probes for

    // The last ReadyForQuery came. `clean`: no error, and the backend is idle outside a
    // transaction block (our queries run outside any). The job is no longer the server's.
    virtual void on_end(Server& server, bool clean) = 0;
    // A query run for the linked client (PurposeTraits::for_client) ended after the client left
    // (Client::detach_from_server): decide_orphaned_query_end says what becomes of the backend.
    void on_end_without_client(Server& server, bool clean);
    // The server closes before the answer came: no handler runs.
    virtual void on_server_closed() {}

protected:
    // What the query changed on the backend that outlives it (a parameter sync's settings),
    // recorded when it ended well, whoever it ran for.
    virtual void keep_changes(Server& /*server*/) {}
    // decide_own_query_outcome for this job's purpose.
    [[nodiscard]] OwnQueryOutcome decide(const Server& server, bool clean,
                                         bool answer_usable = false) const;
    // "WHAT failed: the error" (or "unexpected answer" when there was none) for close reasons.
    [[nodiscard]] std::string failure(const char* what) const;
};

// The database entry's connect_query, right after login.
class Server::ConnectQueryJob final : public OwnQueryJob {
public:
    ConnectQueryJob() : OwnQueryJob(InternalPurpose::ConnectQuery) {}
    void on_end(Server& server, bool clean) override;
};

// PostgreSQL 13 and older do not report in_hot_standby: the role asked at login, before it
// decides whether the host serves the database.
class Server::LoginRoleCheckJob final : public OwnQueryJob {
public:
    LoginRoleCheckJob() : OwnQueryJob(InternalPurpose::LoginRoleCheck) {}
    void on_end(Server& server, bool clean) override;
};

// The same question asked again on an idle pooled backend (server_check_delay).
class Server::RoleCheckJob final : public OwnQueryJob {
public:
    RoleCheckJob() : OwnQueryJob(InternalPurpose::RoleCheck) {}
    void on_end(Server& server, bool clean) override;
};

// server_check_query before a long-idle server serves a client.
class Server::ServerCheckJob final : public OwnQueryJob {
public:
    ServerCheckJob() : OwnQueryJob(InternalPurpose::Check) {}
    void on_end(Server& server, bool clean) override;
};

// The linked client's parameters (and session settings, LISTENs) set on the backend.
class Server::ParameterSyncJob final : public OwnQueryJob {
public:
    // `settings_after`: the backend's session settings once it is done (none: unchanged).
    explicit ParameterSyncJob(std::optional<SettingsMap> settings_after)
        : OwnQueryJob(InternalPurpose::ParamSync), settings_after_(std::move(settings_after)) {}
    void on_end(Server& server, bool clean) override;

private:
    void keep_changes(Server& server) override;
    std::optional<SettingsMap> settings_after_;
};

// The tether's probe: what session state does this backend hold for its client?
class Server::TetherProbeJob final : public OwnQueryJob {
public:
    TetherProbeJob() : OwnQueryJob(InternalPurpose::Probe) {}
    void on_end(Server& server, bool clean) override;
};

// A pipelined probe that ran inside the client's transaction block: its answer means nothing.
class Server::DiscardedProbeJob final : public OwnQueryJob {
public:
    DiscardedProbeJob() : OwnQueryJob(InternalPurpose::DiscardedProbe) {}
    void on_end(Server& server, bool clean) override;
};

// A reset, scrub or leak sweep, verified by the state probe that ends it.
class Server::CleanupJob final : public OwnQueryJob {
public:
    // `purpose`: Reset, Scrub or LeakSweep (a purpose with a cleanup kind).
    explicit CleanupJob(InternalPurpose what)
        : OwnQueryJob(what), kind_(*purpose_traits(what).cleanup) {}
    void on_end(Server& server, bool clean) override;

private:
    CleanupKind kind_;
};

// Lock discovery's catalog fingerprint, read on an idle pooled backend.
class Server::CatalogCheckJob final : public OwnQueryJob {
public:
    explicit CatalogCheckJob(CatalogCheckDone done)
        : OwnQueryJob(InternalPurpose::CatalogCheck), done_(std::move(done)) {}
    void on_end(Server& server, bool clean) override;
    void on_server_closed() override;

private:
    CatalogCheckDone done_;  // told exactly once: the fingerprint, or nullopt
};

}  // namespace pgtether
