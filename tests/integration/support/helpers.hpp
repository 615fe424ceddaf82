// Small helpers shared by the integration tests: asynchronous queries with bounded waits,
// polling, and a look at the server side through pg_stat_activity on a direct connection.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/integration/support/pq.hpp"

namespace pgtether::itest {

using namespace std::chrono_literals;

// Collects failures from worker threads (doctest assertions are not thread-safe).
class Failures {
public:
    void add(const std::string& what) {
        std::lock_guard lock(mutex_);
        if (messages_.size() < 10) messages_.push_back(what);
        ++count_;
    }
    [[nodiscard]] int count() const {
        std::lock_guard lock(mutex_);
        return count_;
    }
    [[nodiscard]] std::string text() const {
        std::lock_guard lock(mutex_);
        std::string out;
        for (const auto& m : messages_) out += m + "\n";
        return out;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> messages_;
    int count_ = 0;
};

// The single value of a one-row, one-column query; throws std::runtime_error otherwise (so a
// helper thread never calls doctest assertions).
std::string scalar(Conn& conn, const std::string& sql);

// PQsendQuery (simple protocol); throws std::runtime_error if libpq refuses to send.
void send_query(Conn& conn, const std::string& sql);
// Waits up to `timeout` for the query sent with send_query() to complete and returns its last
// result; nullopt if it is still running. A lost connection is a client-side error result.
std::optional<Result> wait_result(Conn& conn, std::chrono::milliseconds timeout);
// The same, every result in order (a FATAL ErrorResponse, then libpq's own "server closed the
// connection unexpectedly").
std::optional<std::vector<Result>> wait_results(Conn& conn, std::chrono::milliseconds timeout);

// Extended protocol (unnamed statement, text parameters), every result until libpq's NULL. A
// FATAL error followed by the closed connection gives two results; PQexec would keep only the
// second ("server closed the connection unexpectedly").
std::vector<Result> exec_params_all(Conn& conn, const std::string& sql, const Params& params);
// The first error among `results`, or a client_error("no error") result.
Result first_error(const std::vector<Result>& results);

// Can two more clients (from `conninfo`) both hold a transaction open at once? With a pool of two
// backends and tether_reserve_size = 0 that is true exactly when no client is tethered. For a
// tether that is ending: tries for a few seconds before it says false. Leaves both transactions
// rolled back.
bool two_transactions_fit(const std::string& conninfo);
// The opposite, asked once: a second client's transaction waits (700 ms) while a first one holds
// a transaction open -- a client is tethered. Leaves both transactions rolled back.
bool second_transaction_waits(const std::string& conninfo);

// Polls `pred` every 50 ms until it is true; false if it never was within `timeout`.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 10s);

// Runs `sql` on a fresh direct superuser connection and returns the single value.
std::string direct_scalar(const std::string& sql);

// Server connections currently open to the test database by `user` from anything but the direct
// superuser connection doing the counting, pgtether's short-lived lock-discovery connections and
// its catalog watch (pg_stat_activity, client backends only).
int backends_of(const std::string& user, const std::string& extra_condition = "");
// Waits until `user` has no backends (those of a pooler stopped a moment ago take a moment to
// go); false after `timeout`. Tests that count a role's backends start with it.
bool settled(const std::string& user, std::chrono::milliseconds timeout = 10s);
// Session advisory locks on the bigint key `key` held by anyone (pg_locks on a direct connection).
int advisory_locks_held(long long key);
// Backend pids of `user` (client backends, not pgtether's side connections), sorted.
std::vector<int> backend_pids_of(const std::string& user);

// A memory figure of a process in kB from /proc/<pid>/status: "VmRSS" (resident now) or
// "VmHWM" (the peak so far); -1 if it cannot be read.
long process_memory_kb(int pid, std::string_view field = "VmRSS");

// Lower-case hex MD5 of `data` (as PostgreSQL's md5()).
class Md5 {
  public:
    Md5();
    ~Md5();
    Md5(const Md5&) = delete;
    Md5& operator=(const Md5&) = delete;
    void update(std::string_view data);
    std::string hex();  // finishes; call once

  private:
    void* ctx_;
};
std::string md5_hex(std::string_view data);

// A role used by one test file only, so pg_stat_activity counts are not disturbed by tests
// running in parallel. Created on first use (LOGIN, trusted by pg_hba as every non-auth role).
// It may always read pg_locks (granted to it, not through PUBLIC, which test_tether revokes
// for a while).
std::string private_role(const std::string& name);

// Runs a GRANT or REVOKE on a shared catalog object (pg_locks), retrying while another test's
// GRANT on the same object is committing: PostgreSQL refuses the second of two concurrent
// updates of one catalog row with "tuple concurrently updated" (XX000) instead of waiting.
Result exec_privilege_change(Conn& conn, const std::string& sql);

}  // namespace pgtether::itest
