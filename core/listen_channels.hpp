// LISTEN multiplexed (docs/session-state.md, "LISTEN and NOTIFY"): the pure decisions -- what a
// client's LISTEN/UNLISTEN do to the channels it listens on, which channels the listening
// connection must start or stop listening on, and what becomes of a notification for a client.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "protocol/listen_statement.hpp"

namespace pgtether {

// The channels one client listens on.
using ChannelSet = std::set<std::string>;

// What a run of LISTEN/UNLISTEN changed, net: channels the client listens on now and did not
// before, and the other way round (a LISTEN undone by a later UNLISTEN is in neither).
struct ChannelChange {
    std::vector<std::string> added;
    std::vector<std::string> removed;

    [[nodiscard]] bool empty() const { return added.empty() && removed.empty(); }
};

// Applies `ops` in order to `channels`, as PostgreSQL does to a session's: LISTEN of a channel
// already listened on and UNLISTEN of one not listened on change nothing; UNLISTEN * drops all.
ChannelChange apply_listen_ops(ChannelSet& channels, const std::vector<protocol::ListenOp>& ops);

// How many clients listen on each channel of one listening connection: the connection LISTENs
// when a channel gets its first listener and UNLISTENs when it loses its last.
class ChannelCounts {
  public:
    // True when `channel` had no listener before.
    bool add(const std::string& channel);
    // True when `channel` has no listener now.
    bool remove(const std::string& channel);
    [[nodiscard]] int listeners(const std::string& channel) const;
    [[nodiscard]] std::size_t channels() const { return counts_.size(); }
    [[nodiscard]] const std::map<std::string, int>& all() const { return counts_; }

  private:
    std::map<std::string, int> counts_;
};

// A notification for one client.
struct NotificationTarget {
    // The client is between transactions with nothing owed to it: no transaction block open,
    // no reply outstanding (PostgreSQL sends notifications only then).
    bool between_transactions = false;
    std::size_t held_bytes = 0;    // notifications already held for the client
    std::size_t unsent_bytes = 0;  // written to its socket, not yet taken by the kernel
    std::size_t size = 0;          // this notification's NotificationResponse
    std::size_t budget = 0;        // listen_client_buffer
};

enum class NotificationAction {
    Send,      // write what is held and this one now
    Hold,      // keep it until the client's transaction ends
    Overflow,  // past the client's budget: it is disconnected, as a stalled listener
};

NotificationAction decide_notification(const NotificationTarget& target);

// LISTEN and UNLISTEN that pgtether answered inside a client's open transaction block are
// pending, as PostgreSQL's are: they take effect when the transaction commits and are forgotten
// when it rolls back (ROLLBACK, or COMMIT of a failed block, whose tag is ROLLBACK). Decided at
// each ReadyForQuery the client's backend sends while some are pending.
enum class PendingListenAction {
    Keep,     // the block is still open ('T' without a COMMIT, or failed: 'E')
    Discard,  // it ended without committing
    Commit,   // it committed (a ReadyForQuery 'T' after COMMIT: COMMIT AND CHAIN)
};

// `status`: the ReadyForQuery's; `commit_seen`: a CommandComplete "COMMIT" came since the
// previous ReadyForQuery.
[[nodiscard]] PendingListenAction decide_pending_listens(char status, bool commit_seen);

// The most LISTEN/UNLISTEN a client may have pending in one transaction: beyond, its next one
// goes to the backend (which tethers it) rather than grow what pgtether holds for it.
inline constexpr std::size_t kMaxPendingListenOps = 1000;

}  // namespace pgtether
