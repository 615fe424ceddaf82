#include "proxy/admin/health.hpp"

#include <mutex>

#include "proxy/admin/admin_context.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_control.hpp"

namespace pgtether {

Readiness check_readiness(AdminContext& worker) {
    ReadinessInputs in;
    in.now_ms = worker.now_ms();
    in.failure_memory_ms =
        duration_ms(worker.config().server_login_retry);
    if (worker.draining()) {
        in.lifecycle = Lifecycle::Draining;
    } else if (worker.shutting_down()) {
        in.lifecycle = Lifecycle::ShuttingDown;
    }
    // PAUSE, KILL and DISABLE reach every worker alike (docs/admin.md, "Several workers").
    const PoolControl& control = worker.pool_control();
    in.paused_all = control.paused_all();
    in.paused_databases.assign(control.paused_databases().begin(),
                               control.paused_databases().end());
    in.disabled_databases.assign(control.disabled_databases().begin(),
                                 control.disabled_databases().end());
    // Each worker has its own share of every pool, with its own login record. Loop times differ
    // by worker only by the moment each last updated it; decide_readiness takes a later record
    // as now.
    std::mutex mutex;
    worker.gather_all_workers([&](AdminContext& each) {
        std::vector<PoolLoginRecord> records;
        for (const auto& [key, pool] : each.pools()) {
            PoolLoginRecord record = pool->login_record();
            if (record.failing_unreachable) records.push_back(std::move(record));
        }
        std::lock_guard lock(mutex);
        for (auto& record : records)
            in.pools.push_back(std::move(record));
    });
    return decide_readiness(in);
}

}  // namespace pgtether
