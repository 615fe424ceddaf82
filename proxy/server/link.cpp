#include "proxy/server/link.hpp"

#include "core/config.hpp"
#include "core/lock_ledger.hpp"
#include "core/state_probe.hpp"
#include "core/statement_translation.hpp"
#include "core/stats.hpp"
#include "protocol/sqlstate.hpp"
#include "protocol/message_types.hpp"

namespace pgtether {

void Link::capture(char type, protocol::ByteSpan message) {
    switch (capture_step(type, retry_batch_.size(), message.size())) {
        case CaptureStep::Keep:
            retry_batch_.append(reinterpret_cast<const char*>(message.data()), message.size());
            return;
        case CaptureStep::Complete:
            retry_batch_.append(reinterpret_cast<const char*>(message.data()), message.size());
            retry_stage_ = RetryStage::Complete;
            return;
        case CaptureStep::GiveUp:
            retry_stage_ = RetryStage::GivenUp;
            return;
    }
}

bool Link::hold_lost_statement_error(std::string_view sqlstate, protocol::ByteSpan error) {
    const bool lost = sqlstate == protocol::sqlstate::kInvalidSqlStatementName &&
                      retry_stage_ != RetryStage::GivenUp && retry_held_error_.empty();
    if (!lost) {
        end_lost_statement_retry();
        return false;
    }
    retry_held_error_.assign(reinterpret_cast<const char*>(error.data()), error.size());
    return true;
}

std::optional<std::string> Link::take_lost_statement_batch(bool backend_idle, char status,
                                                           bool client_can_take_back) {
    const bool again = retry_lost_statement(
        {retry_stage_ == RetryStage::Complete, backend_idle, status, client_can_take_back});
    retry_stage_ = RetryStage::Off;
    if (!again) return std::nullopt;
    retry_held_error_.clear();
    return std::exchange(retry_batch_, {});
}

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
