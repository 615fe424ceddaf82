#include "proxy/client/key_derivations.hpp"

#include <utility>

namespace pgtether {

struct KeyDerivations::Job {
    uv_work_t request{};
    KeyDerivations* owner = nullptr;  // null once the owner is gone: the result is dropped
    std::uint64_t ticket = 0;
    KeyDerivation what;
    Callback done;  // empty once cancelled
    protocol::ScramSecret result;
};

KeyDerivations::~KeyDerivations() {
    for (auto& [ticket, job] : running_jobs_)
        job->owner = nullptr;
}

std::optional<std::uint64_t> KeyDerivations::derive(KeyDerivation what, Callback done) {
    if (queue_.size() >= kMaxQueued) return std::nullopt;
    const std::uint64_t ticket = ++next_ticket_;
    queue_.emplace(ticket, Waiting{std::move(what), std::move(done)});
    start_next();
    return ticket;
}

void KeyDerivations::cancel(std::uint64_t ticket) {
    if (queue_.erase(ticket) != 0) return;
    if (auto it = running_jobs_.find(ticket); it != running_jobs_.end()) {
        it->second->done = nullptr;
    }
}

void KeyDerivations::start_next() {
    while (running_ < kMaxRunning && !queue_.empty()) {
        auto first = queue_.begin();
        auto* job = new Job;
        job->owner = this;
        job->ticket = first->first;
        job->what = std::move(first->second.what);
        job->done = std::move(first->second.done);
        queue_.erase(first);
        job->request.data = job;
        if (uv_queue_work(loop_, &job->request, &KeyDerivations::work,
                          &KeyDerivations::after_work) != 0) {
            // Only fails for a bad argument; derive on the loop rather than strand the login.
            work(&job->request);
            Callback done = std::move(job->done);
            protocol::ScramSecret result = job->result;
            delete job;
            if (done) done(result);
            continue;
        }
        ++running_;
        running_jobs_.emplace(job->ticket, job);
    }
}

void KeyDerivations::work(uv_work_t* request) {
    // On a pool thread: touches nothing but the job.
    auto* job = static_cast<Job*>(request->data);
    job->result =
        protocol::make_scram_secret(job->what.password, job->what.salt, job->what.iterations);
}

void KeyDerivations::after_work(uv_work_t* request, int /*status*/) {
    auto* job = static_cast<Job*>(request->data);
    if (job->owner) job->owner->finished(*job);
    delete job;
}

void KeyDerivations::finished(Job& job) {
    running_jobs_.erase(job.ticket);
    --running_;
    // The next one starts before the callback runs: a callback may queue again or cancel.
    start_next();
    if (job.done) {
        Callback done = std::move(job.done);
        done(job.result);
    }
}

}  // namespace pgtether
