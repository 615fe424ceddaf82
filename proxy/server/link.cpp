#include "proxy/server/link.hpp"

#include "core/config.hpp"
#include "core/lock_ledger.hpp"
#include "core/state_probe.hpp"
#include "core/stats.hpp"
#include "protocol/message_types.hpp"

namespace pgtether {

void Link::note_parsed_name(std::string_view name) {
    if (!parsed_names_) parsed_names_ = std::make_unique<std::unordered_set<std::string>>();
    if (parsed_names_->size() < kMaxParsedNames) parsed_names_->emplace(name);
}

bool Link::parsed_here(std::string_view name) const {
    return parsed_names_ && parsed_names_->count(std::string(name)) != 0;
}

TransactionEndDecision Link::at_boundary(const Config& config, std::uint32_t tether_kinds,
                                         const LockLedger& client_ledger) const {
    TransactionEnd end;
    end.effects = effects_;
    end.tracked = tracked_kinds(config);
    end.every_transaction = config.advisory_lock_tracking == LockTracking::EveryTransaction;
    end.tether_kinds = tether_kinds;
    end.ledger_had_maybe = client_ledger.has_maybe();
    end.locks_armed = locks_.armed();
    end.locks_exact = locks_.exact();
    end.exact_ledger = &locks_.ledger();
    end.defer_lock_probes = config.tether_probe_delay.count() > 0;
    return decide_transaction_end(end);
}

}  // namespace pgtether
