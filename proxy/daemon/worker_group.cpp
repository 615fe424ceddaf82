#include "proxy/daemon/worker_group.hpp"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "proxy/daemon/worker.hpp"

namespace pgtether {

std::size_t WorkerGroup::add(Worker& worker) {
    workers_.push_back(&worker);
    return workers_.size() - 1;
}

void WorkerGroup::gather(Worker& caller, const std::function<void(Worker&)>& fn) {
    fn(caller);
    struct Pending {
        std::mutex mutex;
        std::condition_variable done;
        std::size_t left = 0;
    };
    auto pending = std::make_shared<Pending>();
    for (Worker* worker : workers_) {
        if (worker == &caller) continue;
        {
            std::lock_guard lock(pending->mutex);
            ++pending->left;
        }
        // `fn` outlives the task: this function returns only when every task has run.
        bool posted = worker->post(
            [worker, &fn, pending]() {
                fn(*worker);
                std::lock_guard lock(pending->mutex);
                --pending->left;
                pending->done.notify_all();
            },
            true);
        if (!posted) {
            std::lock_guard lock(pending->mutex);
            --pending->left;
        }
    }
    std::unique_lock lock(pending->mutex);
    while (pending->left > 0) {
        // Another worker may be gathering from this one at the same moment.
        lock.unlock();
        caller.serve_gathers();
        lock.lock();
        pending->done.wait_for(lock, std::chrono::milliseconds(1),
                               [&] { return pending->left == 0; });
    }
}

void WorkerGroup::post_to_others(const Worker& caller, const std::function<void(Worker&)>& fn) {
    for (Worker* worker : workers_) {
        if (worker != &caller) (void)worker->post([worker, fn]() { fn(*worker); });
    }
}

bool WorkerGroup::post_to(std::size_t index, std::function<void(Worker&)> fn) {
    Worker& worker = at(index);
    return worker.post([&worker, fn = std::move(fn)]() { fn(worker); });
}

}  // namespace pgtether
