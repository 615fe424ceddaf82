#include "proxy/client/login_work.hpp"

#include <memory>
#include <utility>

namespace pgtether {

struct LoginWork::Job {
    uv_work_t request{};
    LoginWork* owner = nullptr;  // null once the owner is gone: the result is dropped
    std::uint64_t ticket = 0;
    Task task;  // task.done empty once cancelled
};

LoginWork::~LoginWork() {
    for (auto& [ticket, job] : running_jobs_)
        job->owner = nullptr;
}

std::optional<std::uint64_t> LoginWork::derive(KeyDerivation what, Derived done) {
    // The result lives with the task: written on the pool thread, read on the loop after it.
    auto result = std::make_shared<protocol::ScramSecret>();
    Task task;
    task.work = [result, what = std::move(what)] {
        *result = protocol::make_scram_secret(what.password, what.salt, what.iterations);
    };
    task.done = [result, done = std::move(done)] { done(*result); };
    return queue(std::move(task));
}

std::optional<std::uint64_t> LoginWork::check_pam(PamRequest what, Checked done) {
    return check([what = std::move(what)] { return run_pam_check(what); }, std::move(done));
}

std::optional<std::uint64_t> LoginWork::check_ldap(LdapRequest what, Checked done) {
    return check([what = std::move(what)] { return run_ldap_check(what); }, std::move(done));
}

std::optional<std::uint64_t> LoginWork::check(std::function<PasswordVerdict()> run,
                                              Checked done) {
    auto verdict = std::make_shared<PasswordVerdict>();
    Task task;
    task.work = [verdict, run = std::move(run)] { *verdict = run(); };
    task.done = [verdict, done = std::move(done)] { done(*verdict); };
    return queue(std::move(task));
}

std::optional<std::uint64_t> LoginWork::queue(Task task) {
    if (queue_.size() >= kMaxQueued) return std::nullopt;
    const std::uint64_t ticket = ++next_ticket_;
    queue_.emplace(ticket, std::move(task));
    start_next();
    return ticket;
}

void LoginWork::cancel(std::uint64_t ticket) {
    if (queue_.erase(ticket) != 0) return;
    if (auto it = running_jobs_.find(ticket); it != running_jobs_.end()) {
        it->second->task.done = nullptr;
    }
}

void LoginWork::start_next() {
    while (running_ < kMaxRunning && !queue_.empty()) {
        auto first = queue_.begin();
        auto* job = new Job;
        job->owner = this;
        job->ticket = first->first;
        job->task = std::move(first->second);
        queue_.erase(first);
        job->request.data = job;
        if (uv_queue_work(loop_, &job->request, &LoginWork::work, &LoginWork::after_work) != 0) {
            // Only fails for a bad argument; do the work on the loop rather than strand the login.
            work(&job->request);
            std::function<void()> done = std::move(job->task.done);
            delete job;
            if (done) done();
            continue;
        }
        ++running_;
        running_jobs_.emplace(job->ticket, job);
    }
}

void LoginWork::work(uv_work_t* request) {
    // On a pool thread: touches nothing but the job.
    static_cast<Job*>(request->data)->task.work();
}

void LoginWork::after_work(uv_work_t* request, int /*status*/) {
    auto* job = static_cast<Job*>(request->data);
    if (job->owner) job->owner->finished(*job);
    delete job;
}

void LoginWork::finished(Job& job) {
    running_jobs_.erase(job.ticket);
    --running_;
    // The next one starts before the callback runs: a callback may queue again or cancel.
    start_next();
    if (job.task.done) {
        std::function<void()> done = std::move(job.task.done);
        done();
    }
}

}  // namespace pgtether
