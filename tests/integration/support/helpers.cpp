// Shared integration-test helpers.
#include "tests/integration/support/helpers.hpp"

#include <openssl/evp.h>
#include <poll.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace pgtether::itest {

std::string scalar(Conn& conn, const std::string& sql) {
    Result r = conn.exec(sql);
    if (!r.ok() || r.rows.size() != 1 || r.rows[0].size() != 1) {
        throw std::runtime_error("expected one value from: " + sql + "\n  got " + r.describe());
    }
    return r.value();
}

void send_query(Conn& conn, const std::string& sql) {
    if (PQsendQuery(conn.raw(), sql.c_str()) != 1) {
        throw std::runtime_error("PQsendQuery(" + sql + "): " + conn.error());
    }
}

std::optional<std::vector<Result>> wait_results(Conn& conn, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (PQconsumeInput(conn.raw()) == 0) {
            // The connection broke; what libpq still holds (an ErrorResponse) comes first.
            break;
        }
        if (!PQisBusy(conn.raw())) break;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left <= 0ms) return std::nullopt;
        pollfd pfd{PQsocket(conn.raw()), POLLIN, 0};
        poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    }
    std::vector<Result> results;
    while (PGresult* res = PQgetResult(conn.raw())) {
        results.push_back(Result::from(res));
        PQclear(res);
    }
    if (results.empty()) results.push_back(Result::client_error(conn.error()));
    return results;
}

std::optional<Result> wait_result(Conn& conn, std::chrono::milliseconds timeout) {
    auto results = wait_results(conn, timeout);
    if (!results) return std::nullopt;
    return std::move(results->back());
}

std::vector<Result> exec_params_all(Conn& conn, const std::string& sql, const Params& params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    std::vector<Result> results;
    if (PQsendQueryParams(conn.raw(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.empty() ? nullptr : values.data(), nullptr, nullptr, 0) != 1) {
        results.push_back(Result::client_error(conn.error()));
        return results;
    }
    while (PGresult* res = PQgetResult(conn.raw())) {
        results.push_back(Result::from(res));
        PQclear(res);
    }
    return results;
}

Result first_error(const std::vector<Result>& results) {
    for (const auto& r : results) {
        if (r.is_error()) return r;
    }
    return Result::client_error("no error among " + std::to_string(results.size()) + " results");
}

namespace {

// One attempt: does a second client's transaction run within `wait` while a first one holds a
// transaction open? Leaves both transactions rolled back.
bool second_transaction_runs_within(const std::string& conninfo, std::chrono::milliseconds wait) {
    auto must_ok = [](const Result& r) {
        if (!r.ok()) throw std::runtime_error("two_transactions_fit: " + r.describe());
    };
    Conn b = Conn::must(conninfo);
    Conn c = Conn::must(conninfo);
    must_ok(b.exec("BEGIN"));
    must_ok(b.exec("SELECT 1"));
    send_query(c, "BEGIN; SELECT 1");
    auto second = wait_result(c, wait);
    bool fit = second.has_value();
    must_ok(b.exec("ROLLBACK"));
    if (!fit) {
        second = wait_result(c, 10s);
        if (!second) throw std::runtime_error("two_transactions_fit: the second never ran");
    }
    must_ok(c.exec("ROLLBACK"));
    return fit;
}

constexpr auto kSecondTransactionWait = 700ms;

}  // namespace

bool two_transactions_fit(const std::string& conninfo) {
    // A tether ends when pgtether has checked the backend (a probe after the client's reply),
    // which a loaded host can delay past one attempt's wait: try again for a while.
    const auto deadline = std::chrono::steady_clock::now() + 6s;
    while (true) {
        if (second_transaction_runs_within(conninfo, kSecondTransactionWait)) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
    }
}

bool second_transaction_waits(const std::string& conninfo) {
    return !second_transaction_runs_within(conninfo, kSecondTransactionWait);
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (pred()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(50ms);
    }
}

std::string direct_scalar(const std::string& sql) {
    Conn conn = Conn::must(direct_conninfo());
    return scalar(conn, sql);
}

int backends_of(const std::string& user, const std::string& extra_condition) {
    Conn conn = Conn::must(direct_conninfo());
    std::string sql =
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND "
        "pid <> pg_backend_pid() AND usename = $1 AND "
        "coalesce(application_name, '') NOT IN ('pgtether lock discovery', "
        "'pgtether catalog watch', 'pgtether listen')";
    if (!extra_condition.empty()) sql += " AND (" + extra_condition + ")";
    Result r = conn.exec_params(sql, {user});
    if (!r.ok()) throw std::runtime_error("pg_stat_activity: " + r.describe());
    return std::stoi(r.value());
}

int advisory_locks_held(long long key) {
    Conn direct = Conn::must(direct_conninfo());
    return std::stoi(scalar(direct,
                            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                            "objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = " +
                                std::to_string(key)));
}

bool settled(const std::string& user, std::chrono::milliseconds timeout) {
    return eventually([&] { return backends_of(user) == 0; }, timeout);
}

std::vector<int> backend_pids_of(const std::string& user) {
    Conn conn = Conn::must(direct_conninfo());
    Result r = conn.exec_params(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND "
        "pid <> pg_backend_pid() AND usename = $1 AND "
        "coalesce(application_name, '') NOT IN ('pgtether lock discovery', "
        "'pgtether catalog watch', 'pgtether listen') ORDER BY pid",
        {user});
    if (!r.ok()) throw std::runtime_error("pg_stat_activity: " + r.describe());
    std::vector<int> pids;
    for (const auto& row : r.rows) pids.push_back(std::stoi(*row.at(0)));
    return pids;
}

Md5::Md5() : ctx_(EVP_MD_CTX_new()) {
    auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_md5(), nullptr) != 1) {
        throw std::runtime_error("EVP md5 init failed");
    }
}

Md5::~Md5() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Md5::update(std::string_view data) {
    EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}

std::string Md5::hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
        out += digits[digest[i] >> 4];
        out += digits[digest[i] & 15];
    }
    return out;
}

std::string md5_hex(std::string_view data) {
    Md5 md5;
    md5.update(data);
    return md5.hex();
}

std::string private_role(const std::string& name) {
    Conn conn = Conn::must(direct_conninfo());
    // CREATE ROLE has no IF NOT EXISTS; a DO block keeps this idempotent and race-free enough
    // (each test file uses its own names).
    Result r = conn.exec("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '" +
                         name + "') THEN CREATE ROLE \"" + name +
                         "\" LOGIN; END IF; END $$");
    if (!r.ok()) throw std::runtime_error("creating role " + name + ": " + r.describe());
    // The tether's probe reads pg_locks. test_tether revokes it from PUBLIC for a while (to make
    // a clean-up fail on purpose); a test running at the same time must not lose it.
    r = exec_privilege_change(conn, "GRANT SELECT ON pg_catalog.pg_locks TO \"" + name + "\"");
    if (!r.ok()) throw std::runtime_error("granting pg_locks to " + name + ": " + r.describe());
    return name;
}

Result exec_privilege_change(Conn& conn, const std::string& sql) {
    Result r = conn.exec(sql);
    for (int attempt = 0; attempt < 50 && !r.ok() && r.sqlstate == "XX000" &&
                          r.message.find("tuple concurrently updated") != std::string::npos;
         ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        r = conn.exec(sql);
    }
    return r;
}

long process_memory_kb(int pid, std::string_view field) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
            line[field.size()] == ':') {
            return std::stol(line.substr(field.size() + 1));
        }
    }
    return -1;
}

}  // namespace pgtether::itest
