#include "core/listen_channels.hpp"

#include <algorithm>

namespace pgtether {

ChannelChange apply_listen_ops(ChannelSet& channels, const std::vector<protocol::ListenOp>& ops) {
    const ChannelSet before = channels;
    for (const auto& op : ops) {
        switch (op.kind) {
            case protocol::ListenOp::Kind::Listen:
                channels.insert(op.channel);
                break;
            case protocol::ListenOp::Kind::Unlisten:
                channels.erase(op.channel);
                break;
            case protocol::ListenOp::Kind::UnlistenAll:
                channels.clear();
                break;
        }
    }
    ChannelChange change;
    std::set_difference(channels.begin(), channels.end(), before.begin(), before.end(),
                        std::back_inserter(change.added));
    std::set_difference(before.begin(), before.end(), channels.begin(), channels.end(),
                        std::back_inserter(change.removed));
    return change;
}

bool ChannelCounts::add(const std::string& channel) {
    return ++counts_[channel] == 1;
}

bool ChannelCounts::remove(const std::string& channel) {
    auto it = counts_.find(channel);
    if (it == counts_.end()) return false;
    if (--it->second > 0) return false;
    counts_.erase(it);
    return true;
}

int ChannelCounts::listeners(const std::string& channel) const {
    auto it = counts_.find(channel);
    return it == counts_.end() ? 0 : it->second;
}

NotificationAction decide_notification(const NotificationTarget& target) {
    // Everything the client has not read counts: what is held and what its socket has not sent.
    if (target.held_bytes + target.unsent_bytes + target.size > target.budget) {
        return NotificationAction::Overflow;
    }
    return target.between_transactions ? NotificationAction::Send : NotificationAction::Hold;
}

PendingListenAction decide_pending_listens(char status, bool commit_seen) {
    if (commit_seen) return PendingListenAction::Commit;
    return status == 'I' ? PendingListenAction::Discard : PendingListenAction::Keep;
}

}  // namespace pgtether
