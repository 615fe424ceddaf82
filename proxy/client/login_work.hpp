// Blocking login work off the event loop (docs/tls-and-auth.md, "Password hashing", "PAM",
// "LDAP"): the SCRAM key derivations of client logins, PAM conversations and LDAP binds run on
// libuv's thread pool (uv_queue_work), at most kMaxRunning at a time per worker, the others
// queued in order. A derivation costs milliseconds (4096 iterations) to a tenth of a second
// (100,000, kScramMaxIterations); a PAM stack or an LDAP server may take a network round trip or
// more. On the loop, a flood of logins stalled every other client of the worker (issue 27: a
// bystander's SELECT 1 went from 0.9 to 56 ms at 82 start-up packets/s, to over half a second at
// 12 wrong passwords/s against a 100k-iteration secret). Now the loop only queues and collects
// them.
//
// The bound keeps a flood from taking libuv's whole pool (4 threads unless UV_THREADPOOL_SIZE
// says otherwise; DNS lookups share it) and spreads a worker's share fairly: logins queue for
// it, queries do not. Beyond kMaxQueued a login is refused at once (53300), as PgBouncer refuses
// beyond max_client_conn.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "protocol/scram.hpp"
#include "proxy/client/ldap_check.hpp"
#include "proxy/client/pam_check.hpp"

namespace pgtether {

// What to derive: SaltedPassword and the keys from it (protocol::make_scram_secret).
struct KeyDerivation {
    std::string password;
    std::string salt;  // raw bytes
    int iterations = 0;
};

class LoginWork {
  public:
    static constexpr std::size_t kMaxRunning = 2;
    static constexpr std::size_t kMaxQueued = 1000;
    using Derived = std::function<void(const protocol::ScramSecret&)>;
    using Checked = std::function<void(const PasswordVerdict&)>;

    explicit LoginWork(uv_loop_t* loop) : loop_(loop) {}
    // Running work finishes on its threads; its results are dropped.
    ~LoginWork();
    LoginWork(const LoginWork&) = delete;
    LoginWork& operator=(const LoginWork&) = delete;

    // Queue a derivation / a PAM or LDAP check; `done` runs on the loop with the result,
    // exactly once, unless cancel() comes first. nullopt: the queue is full (`done` never runs).
    [[nodiscard]] std::optional<std::uint64_t> derive(KeyDerivation what, Derived done);
    [[nodiscard]] std::optional<std::uint64_t> check_pam(PamRequest what, Checked done);
    [[nodiscard]] std::optional<std::uint64_t> check_ldap(LdapRequest what, Checked done);
    // The client went away: its `done` will not run (running work still finishes).
    void cancel(std::uint64_t ticket);

    [[nodiscard]] std::size_t running() const { return running_; }
    [[nodiscard]] std::size_t queued() const { return queue_.size(); }

  private:
    // One piece of work: `work` runs on a pool thread and touches nothing but what it captured;
    // `done` runs on the loop after it.
    struct Task {
        std::function<void()> work;
        std::function<void()> done;
    };
    struct Job;
    [[nodiscard]] std::optional<std::uint64_t> queue(Task task);
    // A password check (`run`, on the pool thread) whose verdict goes to `done`.
    [[nodiscard]] std::optional<std::uint64_t> check(std::function<PasswordVerdict()> run,
                                                     Checked done);
    static void work(uv_work_t* request);
    static void after_work(uv_work_t* request, int status);
    void start_next();
    void finished(Job& job);

    uv_loop_t* loop_;
    std::uint64_t next_ticket_ = 0;
    std::size_t running_ = 0;
    // Waiting, in ticket (arrival) order.
    std::map<std::uint64_t, Task> queue_;
    // Running: ticket -> job (owned by libuv's request until after_work).
    std::map<std::uint64_t, Job*> running_jobs_;
};

}  // namespace pgtether
