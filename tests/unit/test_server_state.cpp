// The server state table (core/server_state.hpp), table by table: where each state lives, how it
// is counted, and which states may follow which.
#include <doctest/doctest.h>

#include <string>

#include "core/server_state.hpp"

using namespace pgtether;
using S = ServerState;

namespace {

const S kAll[] = {S::Connecting, S::TlsAnswer, S::Login,    S::ConnectQuery, S::Idle,
                  S::Used,       S::Linked,    S::Syncing,  S::Probing,      S::Relaying,
                  S::Resetting,  S::Scrubbing, S::Sweeping, S::BeingCancelled, S::Closing};

}  // namespace

TEST_CASE("server states: pool list, census, input and deadline") {
    using In = ServerInput;
    using Due = ServerDeadline;
    struct Case {
        S state;
        PoolList list;
        const char* census;  // SHOW SERVERS' state column; nullptr: not shown
        bool linked;
        In input;
        Due deadline;
    };
    const Case cases[] = {
        {S::Connecting, PoolList::Used, "new", false, In::None, Due::Connect},
        {S::TlsAnswer, PoolList::Used, "new", false, In::TlsAnswer, Due::Login},
        {S::Login, PoolList::Used, "new", false, In::Login, Due::Login},
        {S::ConnectQuery, PoolList::Used, "tested", false, In::OwnQuery, Due::CleanUp},
        {S::Idle, PoolList::Idle, "idle", false, In::Unsolicited, Due::None},
        {S::Used, PoolList::Idle, "used", false, In::Unsolicited, Due::None},
        {S::Linked, PoolList::Used, "active", true, In::Client, Due::None},
        {S::Syncing, PoolList::Used, "active", true, In::OwnQuery, Due::ForClient},
        {S::Probing, PoolList::Used, "active", true, In::OwnQuery, Due::ForClient},
        {S::Relaying, PoolList::Used, "active", true, In::Relay, Due::None},
        {S::Resetting, PoolList::Used, "tested", false, In::OwnQuery, Due::CleanUp},
        {S::Scrubbing, PoolList::Used, "tested", false, In::OwnQuery, Due::CleanUp},
        {S::Sweeping, PoolList::Used, "tested", false, In::OwnQuery, Due::CleanUp},
        {S::BeingCancelled, PoolList::Used, "being_canceled", false, In::Unsolicited,
         Due::CleanUp},
        {S::Closing, PoolList::None, nullptr, false, In::None, Due::None},
    };
    REQUIRE(std::size(cases) == kServerStateCount);
    for (const auto& c : cases) {
        CAPTURE(std::string(to_string(c.state)));
        const auto& info = state_info(c.state);
        CHECK(info.list == c.list);
        const char* census = census_name(info.census);
        if (c.census == nullptr) {
            CHECK(census == nullptr);
        } else {
            REQUIRE(census != nullptr);
            CHECK(std::string(census) == c.census);
        }
        CHECK(info.linked == c.linked);
        CHECK(info.input == c.input);
        CHECK(info.deadline == c.deadline);
    }
}

TEST_CASE("server states: what may follow") {
    struct Case {
        S from;
        S to;
        bool allowed;
    };
    const Case cases[] = {
        // Login: TLS is optional; a failure closes from any step.
        {S::Connecting, S::TlsAnswer, true},
        {S::Connecting, S::Login, true},
        {S::Connecting, S::Idle, false},
        {S::TlsAnswer, S::Login, true},
        {S::TlsAnswer, S::Idle, false},
        {S::Login, S::ConnectQuery, true},
        {S::Login, S::Idle, true},        // released after login
        {S::Login, S::Resetting, true},   // session mode resets before the first use
        {S::Login, S::Linked, false},     // a waiting client gets it through the idle list
        {S::Login, S::Relaying, true},    // a replication client's own backend
        {S::Relaying, S::Idle, false},    // never reused: closed when either side leaves
        {S::Relaying, S::Linked, false},
        {S::Relaying, S::Resetting, false},
        {S::Linked, S::Relaying, false},
        {S::Idle, S::Relaying, false},
        {S::ConnectQuery, S::Linked, false},
        {S::Resetting, S::Linked, false},
        {S::Scrubbing, S::Linked, false},
        {S::Sweeping, S::Linked, false},
        {S::Probing, S::Probing, false},
        {S::ConnectQuery, S::Idle, true},
        {S::ConnectQuery, S::ConnectQuery, true},  // the role check, then connect_query
        // The idle list: handed out (with a check or parameter sync first), swept, checked.
        {S::Idle, S::Linked, true},
        {S::Idle, S::Syncing, false},     // through Linked (Server::link)
        {S::Idle, S::Used, true},
        {S::Used, S::Idle, true},
        {S::Idle, S::Sweeping, true},
        {S::Used, S::Sweeping, true},
        {S::Idle, S::Scrubbing, false},
        {S::Idle, S::Probing, false},
        // Linked: a transaction's end probes or releases; a departure scrubs or releases.
        {S::Linked, S::Syncing, true},
        {S::Linked, S::Probing, true},
        {S::Linked, S::Scrubbing, true},
        {S::Linked, S::Idle, true},
        {S::Linked, S::Resetting, true},
        {S::Linked, S::BeingCancelled, true},
        {S::Linked, S::Sweeping, false},
        {S::Linked, S::Used, false},
        {S::Syncing, S::Linked, true},
        {S::Syncing, S::Idle, true},      // the client left while it ran, cleanly
        {S::Probing, S::Linked, true},    // tethered: keep
        {S::Probing, S::Scrubbing, true},  // the client left while it ran
        {S::Probing, S::Idle, true},      // untethered: release
        {S::Probing, S::Syncing, false},
        // Clean-up: verified clean goes back through release, anything else closes.
        {S::Resetting, S::Idle, true},
        {S::Resetting, S::Scrubbing, false},
        {S::Scrubbing, S::Scrubbing, true},  // a cancelled scrub runs again
        {S::Scrubbing, S::Resetting, true},
        {S::Sweeping, S::Scrubbing, true},   // a leak found
        {S::Sweeping, S::Idle, true},
        {S::BeingCancelled, S::Idle, true},
        {S::BeingCancelled, S::Resetting, true},
        {S::BeingCancelled, S::Sweeping, false},
        {S::BeingCancelled, S::Linked, false},
        {S::BeingCancelled, S::BeingCancelled, false},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(to_string(c.from)));
        CAPTURE(std::string(to_string(c.to)));
        CHECK(may_transition(c.from, c.to) == c.allowed);
    }
}

TEST_CASE("server states: every state can close, nothing follows Closing") {
    for (S state : kAll) {
        CAPTURE(std::string(to_string(state)));
        CHECK(may_transition(state, S::Closing) == (state != S::Closing));
        CHECK(may_transition(S::Closing, state) == false);
    }
}

TEST_CASE("server states: a linked state is counted active, an own query is bounded, not idle") {
    for (S state : kAll) {
        CAPTURE(std::string(to_string(state)));
        const auto& info = state_info(state);
        CHECK(info.linked == (info.census == ServerCensus::Active));
        if (info.input == ServerInput::OwnQuery) {
            CHECK(info.list == PoolList::Used);
            // The janitor closes one that never ends (proxy/pool/janitor.cpp).
            CHECK(info.deadline != ServerDeadline::None);
        }
    }
}

TEST_CASE("server state counts: per state and per census column") {
    ServerStateCounts counts;
    counts.add(S::Connecting);
    counts.add(S::Connecting);
    counts.move(S::Connecting, S::TlsAnswer);
    counts.add(S::Linked);
    counts.add(S::Probing);
    counts.add(S::Scrubbing);
    counts.add(S::ConnectQuery);
    counts.add(S::Idle);
    counts.move(S::Idle, S::Used);
    counts.add(S::Closing);
    CHECK(counts.in(S::Connecting) == 1);
    CHECK(counts.in(S::TlsAnswer) == 1);
    CHECK(counts.in(ServerCensus::Login) == 2);
    CHECK(counts.in(ServerCensus::Active) == 2);
    CHECK(counts.in(ServerCensus::Tested) == 2);
    CHECK(counts.in(ServerCensus::Idle) == 0);
    CHECK(counts.in(ServerCensus::Used) == 1);
    CHECK(counts.in(ServerCensus::BeingCanceled) == 0);
    counts.remove(S::Closing);
    CHECK(counts.in(S::Closing) == 0);
}
