#include "proxy/pool/pool_context.hpp"

#include "proxy/pool/lock_catalog.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_control.hpp"
#include "proxy/pool/server_budget.hpp"

namespace pgtether {

PoolContext::PoolContext(std::size_t read_buffer, std::shared_ptr<const Config> config,
                         std::shared_ptr<const SecuritySetup> security,
                         std::shared_ptr<const AuthFile> auth_file, ServerBudget& budget,
                         WatchClaims& catalog_watches)
    : ClientContext(read_buffer, std::move(config), std::move(security), std::move(auth_file)),
      budget_(budget),
      catalog_watches_(catalog_watches) {}

// Out of line: the members' types are complete only here.
PoolContext::~PoolContext() = default;

void PoolContext::lend_server(const LendRequest& request) {
    if (shutting_down()) return;
    // An idle server first (the requester gets its slot now); else a busy one, released later.
    Pool* busy = nullptr;
    for (auto& [key, pool] : pools_) {
        if (!pool->frees_room_for(request.database, request.user, request.db_full,
                                  request.user_full)) {
            continue;
        }
        if (pool->idle_count() > 0) {
            (void)pool->lend(request);
            return;
        }
        if (!busy && pool->server_count() > 0) busy = pool.get();
    }
    if (busy) (void)busy->lend(request);
}

void PoolContext::use_lent_slot(const std::string& database, const std::string& user) {
    auto it = pools_.find(std::make_pair(database, user));
    if (it == pools_.end()) {
        budget_.give_back(database, user, index_);
        return;
    }
    it->second->use_lent_slot();
}

void PoolContext::share_host_news(const HostNews& news, const Pool& from) {
    take_host_news(news, &from);
    if (worker_count() > 1) {
        post_to_other_workers([news](PoolContext& other) { other.take_host_news(news); });
    }
}

void PoolContext::take_host_news(const HostNews& news, const Pool* from) {
    apply_host_news(host_memory_[{news.host, news.port}], news, now_ms());
    for (const auto& [key, pool] : pools_) {
        if (pool.get() != from) pool->learn_host(news);
    }
}

const HostStatus* PoolContext::remembered_host(const std::string& host, int port) const {
    auto it = host_memory_.find({host, port});
    return it == host_memory_.end() ? nullptr : &it->second;
}

}  // namespace pgtether
