// The stateful wire fuzzer: many concurrent raw-socket clients send pgtether generated sequences
// of valid, truncated, reordered and corrupted messages (start-up, SSL/GSS/cancel requests, md5
// login, simple and extended queries, pipelines, COPY in both directions, FunctionCall, session
// state, advisory locks, abrupt closes and resets) in front of the real PostgreSQL, for a bounded
// time. The oracle:
//  * pgtether never crashes: the process stays alive and keeps accepting logins;
//  * it does not leak: its RSS stays within a bound during the storm, and its open file
//    descriptors fall back to about the baseline after it;
//  * a well-behaved libpq client running alongside, in the same pool, always gets correct
//    answers, never an error, and never lands on a backend that carries someone else's state
//    (an open transaction, an advisory lock, a setting, a SQL prepared statement, a cursor, a
//    LISTEN, a temporary table);
//  * after the storm no backend of the pool is left in a transaction or holding an advisory
//    lock, and each of them, pinned one by one, is clean.
//
// Sequences are generated from a seed: PGT_WIRE_FUZZ_SEED (default: from the clock, printed at the
// start), storm client i using seed + i. PGT_WIRE_FUZZ_SECONDS sets the storm's length (default
// 20); PGT_WIRE_FUZZ_VERBOSE=N starts pgtether with N times -v. A failure prints the seed, the tail of
// pgtether's log and the last operations of every storm client. Thread interleavings are not
// reproducible, the sequences are. See docs/fuzzing.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <dirent.h>
#include <poll.h>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/integration/support/helpers.hpp"
#include "tests/integration/support/pooler.hpp"
#include "tests/integration/support/pq.hpp"
#include "tests/integration/support/raw_socket.hpp"
#include "tests/integration/support/test_env.hpp"

using namespace pgtether::itest;

namespace {

constexpr int kPoolSize = 6;
constexpr int kStormClients = 10;
constexpr const char* kPassword = "secret";
// The RSS pgtether may grow by during the storm. Clients send at most a few MB each and pgtether
// must not hold more than its buffers for them (docs/fuzzing.md).
constexpr long kRssGrowthLimitKb = 256 * 1024;

long env_number(const char* name, long fallback) {
    const char* text = std::getenv(name);
    if (!text || !*text) return fallback;
    return std::strtol(text, nullptr, 10);
}

// VmRSS of a process in kB, 0 if it cannot be read.
long rss_kb(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    }
    return 0;
}

int open_fds(pid_t pid) {
    DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
    if (!dir) return -1;
    int count = 0;
    while (::readdir(dir) != nullptr)
        ++count;
    ::closedir(dir);
    return count - 2;  // . and ..
}

// ---- what storm clients know about each other ----

struct Shared {
    std::mutex mutex;
    std::vector<std::pair<std::int32_t, std::int32_t>> cancel_keys;  // from BackendKeyData
    std::atomic<long> sessions{0};
    std::atomic<long> logged_in{0};
    std::atomic<long> operations{0};

    void add_key(std::int32_t pid, std::int32_t secret) {
        std::lock_guard lock(mutex);
        if (cancel_keys.size() < 256) cancel_keys.emplace_back(pid, secret);
    }
    std::optional<std::pair<std::int32_t, std::int32_t>> any_key(std::mt19937_64& rng) {
        std::lock_guard lock(mutex);
        if (cancel_keys.empty()) return std::nullopt;
        return cancel_keys[rng() % cancel_keys.size()];
    }
};

std::int32_t be32(const std::string& body, std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i)
        v = (v << 8) | static_cast<std::uint8_t>(body[at + i]);
    return static_cast<std::int32_t>(v);
}

// ---- one storm client ----

class StormClient {
  public:
    StormClient(int index, std::uint64_t seed, const Pgtether& pooler, std::string user,
                std::string database, Shared& shared)
        : index_(index), seed_(seed), rng_(seed), pooler_(pooler), user_(std::move(user)),
          database_(std::move(database)), shared_(shared) {}

    void run(std::chrono::steady_clock::time_point deadline) {
        while (std::chrono::steady_clock::now() < deadline) {
            try {
                session();
            } catch (const std::exception& e) {
                note(std::string("exception: ") + e.what());
            }
            shared_.sessions++;
        }
    }

    // The last operations, for a failure report.
    std::string history() const {
        std::lock_guard lock(history_mutex_);
        std::ostringstream out;
        out << "storm client " << index_ << " (seed " << seed_ << "):";
        for (const auto& line : history_)
            out << "\n    " << line;
        return out.str();
    }

  private:
    using Messages = std::vector<std::string>;

    std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

    void note(std::string what) {
        std::lock_guard lock(history_mutex_);
        history_.push_back(std::move(what));
        if (history_.size() > 40) history_.pop_front();
    }

    std::string random_bytes(std::size_t max) {
        std::string out(pick(max + 1), '\0');
        for (char& c : out)
            c = static_cast<char>(rng_());
        return out;
    }

    // Advisory locks live per database, and other tests share this one: the storm's keys are its
    // own (24 of them, so storm clients contend with each other).
    std::string key_sql() { return std::to_string(7'700'100 + pick(24)); }

    // A statement from the repertoire: plain work, errors, transaction control, session state of
    // every kind the tether knows, advisory locks on a small key space (so clients contend).
    std::string statement() {
        const std::string k = key_sql();
        const std::vector<std::string> sql = {
            "SELECT 1",
            "SELECT pg_sleep(0.02)",
            "SELECT pg_sleep(0.3)",
            "BEGIN",
            "COMMIT",
            "ROLLBACK",
            "SELECT 1/0",
            "SELECT pg_advisory_lock(" + k + ")",
            "SELECT pg_try_advisory_lock(" + k + ")",
            "SELECT pg_advisory_unlock(" + k + ")",
            "SELECT pg_advisory_lock_shared(770, " + std::to_string(pick(4)) + ")",
            "SELECT pg_advisory_xact_lock(" + k + ")",
            "SELECT pg_advisory_unlock_all()",
            "BEGIN; SELECT pg_advisory_lock(" + k + "); COMMIT",
            "DO $$ BEGIN PERFORM pg_advisory_lock(" + k + "); END $$",
            "SET app.fuzz = 'dirty'",
            "SELECT set_config('app.fuzz', 'dirty', false)",
            "SET work_mem = '7MB'",
            "SET LOCAL work_mem = '9MB'",
            "RESET ALL",
            "PREPARE fz AS SELECT 1",
            "EXECUTE fz",
            "DEALLOCATE fz",
            "DEALLOCATE ALL",
            "CREATE TEMP TABLE IF NOT EXISTS fz_tmp(x int)",
            "LISTEN fz_channel",
            "UNLISTEN *",
            "NOTIFY fz_channel, 'x'",
            "DECLARE fz_cur CURSOR WITH HOLD FOR SELECT 1",
            "CLOSE fz_cur",
            "DISCARD ALL",
            "SAVEPOINT s1",
            "ROLLBACK TO s1",
            "SELECT repeat('x', 200000)",
            "SELECT generate_series(1, 3000)",
            "SELECT 1; SELECT 2; SELECT 1/0; SELECT 3",
            "",
            ";",
            "INSERT INTO wire_fuzz_sink VALUES ('q')",
        };
        return sql[pick(sql.size())];
    }

    Messages extended_batch(bool sync) {
        const bool named = chance(0.3);
        const std::string name = named ? "fz_s" + std::to_string(pick(3)) : "";
        const std::string portal = chance(0.2) ? "fz_p" : "";
        const std::string sql = chance(0.6) ? "SELECT $1::int + 1" : statement();
        Messages out;
        if (!chance(0.1)) {  // sometimes Bind a statement that was never parsed
            out.push_back(wire::message('P', wire::cstr(name) + wire::cstr(sql) + wire::i16(0)));
        }
        const bool with_param = sql.find("$1") != std::string::npos;
        std::string bind = wire::cstr(portal) + wire::cstr(name) + wire::i16(0);
        if (with_param) {
            bind += wire::i16(1) + wire::i32(2) + std::to_string(10 + pick(80));
        } else {
            bind += wire::i16(0);
        }
        bind += wire::i16(0);
        out.push_back(wire::message('B', bind));
        if (chance(0.5)) out.push_back(wire::message('D', "P" + wire::cstr(portal)));
        out.push_back(wire::message('E', wire::cstr(portal) + wire::i32(chance(0.2) ? 1 : 0)));
        if (chance(0.2)) out.push_back(wire::message('C', "S" + wire::cstr(name)));
        if (sync) {
            out.push_back(wire::sync());
        } else if (chance(0.5)) {
            out.push_back(wire::message('H', ""));  // Flush
        }
        return out;
    }

    // One operation: the messages to send, and how many ReadyForQuery replies to wait for.
    std::pair<Messages, int> operation() {
        switch (pick(12)) {
            case 0:
            case 1:
            case 2: {
                std::string sql = statement();
                note("Q " + sql);
                return {{wire::query(sql)}, 1};
            }
            case 3:
            case 4: {
                const bool sync = !chance(0.15);
                note(sync ? "extended" : "extended, unsynced");
                return {extended_batch(sync), sync ? 1 : 0};
            }
            case 5: {
                const int batches = 2 + static_cast<int>(pick(4));
                note("pipeline of " + std::to_string(batches));
                Messages out;
                for (int i = 0; i < batches; ++i) {
                    for (auto& m : extended_batch(true))
                        out.push_back(std::move(m));
                }
                return {out, batches};
            }
            case 6: {
                Messages out{wire::query("COPY wire_fuzz_sink FROM STDIN")};
                const std::size_t rows = pick(20);
                for (std::size_t i = 0; i < rows; ++i)
                    out.push_back(wire::message('d', "row " + std::to_string(i) + "\n"));
                const std::size_t end = pick(10);
                if (end < 6) {
                    out.push_back(wire::message('c', ""));
                } else if (end < 9) {
                    out.push_back(wire::message('f', wire::cstr("fuzz says no")));
                }  // else: neither, the session goes on (or ends) mid-COPY
                note("COPY FROM STDIN, " + std::to_string(rows) + " rows, end " +
                     std::to_string(end));
                return {out, end < 9 ? 1 : 0};
            }
            case 7: {
                const std::size_t n = 1 + pick(200000);
                note("COPY TO STDOUT of " + std::to_string(n) + " rows");
                return {{wire::query("COPY (SELECT generate_series(1, " + std::to_string(n) +
                                     ")) TO STDOUT")},
                        1};
            }
            case 8: {
                note("FunctionCall");
                return {{wire::message('F', wire::i32(static_cast<std::int32_t>(pick(3000))) +
                                                random_bytes(24))},
                        1};
            }
            case 9: {
                // A message of any type with a random body (a valid length).
                char type = static_cast<char>(rng_());
                note(std::string("junk message type ") + std::to_string(static_cast<int>(type)));
                return {{wire::message(type, random_bytes(64))}, 0};
            }
            case 10: {
                note("Sync storm");
                return {{wire::sync(), wire::sync(), wire::message('H', ""), wire::sync()}, 3};
            }
            default: {
                // A header promising more than follows: pgtether waits for the rest (or hits
                // max_packet_size), and the client then goes away.
                const auto promised = static_cast<std::int32_t>(5 + pick(4u << 20));
                note("truncated Query promising " + std::to_string(promised) + " bytes");
                return {{"Q" + wire::i32(promised) + "SELECT "}, 0};
            }
        }
    }

    // Corrupts some messages (a flipped byte, a wrong length, a cut) and swaps neighbours.
    void mutate(Messages& messages) {
        for (auto& m : messages) {
            if (!chance(0.04) || m.empty()) continue;
            switch (pick(3)) {
                case 0:
                    m[pick(m.size())] = static_cast<char>(rng_());
                    note("  flipped a byte");
                    break;
                case 1:
                    if (m.size() >= 5) {
                        const std::string len = wire::i32(static_cast<std::int32_t>(rng_()));
                        m.replace(1, 4, len);
                        note("  corrupted a length");
                    }
                    break;
                default:
                    m.resize(pick(m.size()));
                    note("  cut a message short");
                    break;
            }
        }
        if (messages.size() > 1 && chance(0.05)) {
            const std::size_t i = pick(messages.size() - 1);
            std::swap(messages[i], messages[i + 1]);
            note("  swapped two messages");
        }
    }

    // Sends everything, in one write or split at random points.
    bool send_all(RawConn& conn, const Messages& messages) {
        std::string bytes;
        for (const auto& m : messages)
            bytes += m;
        if (bytes.empty()) return true;
        if (!chance(0.2)) return conn.send(bytes);
        std::size_t at = 0;
        while (at < bytes.size()) {
            const std::size_t n = 1 + pick(std::min<std::size_t>(bytes.size() - at, 64));
            if (!conn.send(std::string_view(bytes).substr(at, n))) return false;
            at += n;
        }
        return true;
    }

    // Reads replies until `ready` ReadyForQuery messages came, the connection ended, or a short
    // wait passed. False when the connection is gone.
    bool drain(RawConn& conn, int ready) {
        const auto deadline = std::chrono::steady_clock::now() + 1500ms;
        while (std::chrono::steady_clock::now() < deadline) {
            auto msg = conn.read_message(ready > 0 ? 500ms : 50ms);
            if (!msg) return !conn.peer_closed();
            if (msg->type == 'Z') {
                if (--ready <= 0) return true;
            }
            if (msg->type == 'E' && wire::error_fields(*msg)['S'] == "FATAL") {
                note("  FATAL " + wire::error_fields(*msg)['C'] + " " +
                     wire::error_fields(*msg)['M']);
            }
        }
        return !conn.peer_closed();
    }

    void cancel_someone() {
        auto key = shared_.any_key(rng_);
        std::int32_t pid = key && chance(0.8) ? key->first : static_cast<std::int32_t>(rng_());
        std::int32_t secret = key && chance(0.8) ? key->second : static_cast<std::int32_t>(rng_());
        note("cancel request");
        RawConn cancel(pooler_.host(), pooler_.port());
        (void)cancel.send(wire::cancel_request(pid, secret));
        (void)cancel.wait_closed(1s);
    }

    // Start-up and md5 login; false when the session ends here.
    bool log_in(RawConn& conn) {
        const std::size_t kind = pick(100);
        if (kind < 8) {
            note("SSLRequest");
            if (!conn.send(wire::ssl_request())) return false;
            auto answer = conn.read_exact(1, 2s);
            if (!answer || *answer != "N") return false;
        } else if (kind < 11) {
            note("GSSENCRequest");
            if (!conn.send(wire::i32(8) + wire::i32(80877104))) return false;
            auto answer = conn.read_exact(1, 2s);
            if (!answer || *answer != "N") return false;
        } else if (kind < 17) {
            note("garbage start-up");
            const std::vector<std::string> garbage = {
                random_bytes(40),
                wire::i32(100000) + wire::i32(196608) + "user",
                wire::startup({{"user", user_}}, 2 << 16),
                wire::i32(12) + wire::i32(196608) + "user",
                wire::i32(3),
                wire::startup({{"user", user_}, {"database", database_}}).substr(0, 20),
            };
            (void)conn.send(garbage[pick(garbage.size())]);
            (void)conn.wait_closed(chance(0.5) ? 1s : 10ms);
            return false;
        } else if (kind < 20) {
            note("connect and leave");
            if (chance(0.5)) conn.reset();
            return false;
        }

        std::vector<std::pair<std::string, std::string>> params = {{"user", user_},
                                                                   {"database", database_}};
        if (chance(0.3)) params.emplace_back("application_name", "fuzz" + std::to_string(pick(9)));
        if (chance(0.15)) params.emplace_back("options", chance(0.7) ? "-c work_mem=5MB" : "-x y");
        if (chance(0.1)) params.emplace_back("DateStyle", "German");
        if (chance(0.03)) params[1].second = "no_such_database";
        note("StartupMessage");
        if (!conn.send(wire::startup(params))) return false;

        auto request = conn.read_message(5s);
        if (!request || request->type != 'R' || request->body.size() != 8 ||
            be32(request->body, 0) != 5) {
            return false;
        }
        const std::string salt = request->body.substr(4, 4);
        const std::size_t answer = pick(100);
        if (answer < 88) {
            const std::string inner = md5_hex(std::string(kPassword) + user_);
            (void)conn.send(wire::message('p', wire::cstr("md5" + md5_hex(inner + salt))));
        } else if (answer < 92) {
            note("wrong password");
            (void)conn.send(wire::message('p', wire::cstr("md5" + std::string(32, '0'))));
        } else if (answer < 96) {
            note("garbage password message");
            (void)conn.send(wire::message('p', random_bytes(40)));
        } else if (answer < 98) {
            note("Query instead of a password");
            (void)conn.send(wire::query("SELECT 1"));
        } else {
            note("leaves during login");
            return false;
        }
        for (;;) {
            auto msg = conn.read_message(5s);
            if (!msg || msg->type == 'E') return false;
            if (msg->type == 'K' && msg->body.size() == 8) {
                shared_.add_key(be32(msg->body, 0), be32(msg->body, 4));
            }
            if (msg->type == 'Z') return true;
        }
    }

    void session() {
        note("-- session");
        if (chance(0.05)) {
            cancel_someone();
            return;
        }
        RawConn conn(pooler_.host(), pooler_.port());
        if (!log_in(conn)) return;
        shared_.logged_in++;
        const std::size_t ops = 1 + pick(12);
        for (std::size_t i = 0; i < ops; ++i) {
            auto [messages, ready] = operation();
            mutate(messages);
            shared_.operations++;
            if (!send_all(conn, messages)) return;
            if (chance(0.1)) {
                note("  does not read");
                continue;
            }
            if (chance(0.05)) cancel_someone();
            if (!drain(conn, ready)) return;
        }
        switch (pick(10)) {
            case 0:
            case 1:
            case 2:
            case 3:
                note("Terminate");
                (void)conn.send(wire::terminate());
                break;
            case 4:
            case 5:
                note("reset");
                conn.reset();
                break;
            case 6:
                note("half-close");
                conn.shutdown_write();
                (void)conn.wait_closed(1s);
                break;
            default:
                note("close");
                break;
        }
    }

    int index_;
    std::uint64_t seed_;
    std::mt19937_64 rng_;
    const Pgtether& pooler_;
    std::string user_;
    std::string database_;
    Shared& shared_;
    mutable std::mutex history_mutex_;
    std::deque<std::string> history_;
};

// ---- the well-behaved client ----

// What a clean backend answers, as one row: the session state that must never leak from one
// client to another. now() = statement_timestamp() holds only outside a transaction block.
constexpr const char* kStateQuery =
    "SELECT (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' "
    "AND pid = pg_catalog.pg_backend_pid()), "
    "coalesce(current_setting('app.fuzz', true), ''), "
    "(SELECT setting = reset_val FROM pg_catalog.pg_settings WHERE name = 'work_mem'), "
    "(SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql), "
    "(SELECT count(*) FROM pg_catalog.pg_cursors), "
    "(SELECT count(*) FROM pg_catalog.pg_listening_channels()), "
    "(SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = pg_catalog.pg_my_temp_schema()), "
    "now() = statement_timestamp(), pg_catalog.current_setting('DateStyle'), "
    // Last, and not compared: which backend answered (its history is in pgtether's log).
    "pg_catalog.pg_backend_pid()";
// The answer of a clean backend (DateStyle as the client asked for nothing).
const std::vector<std::optional<std::string>> kCleanState = {"0", "", "t", "0", "0", "0", "0", "t",
                                                             std::nullopt};

// "" if `r` is the clean state, else what is wrong.
std::string dirt(const Result& r, const std::string& date_style) {
    if (!r.ok() || r.rows.size() != 1 || r.rows[0].size() != kCleanState.size() + 1) {
        return "state query failed: " + r.describe();
    }
    auto expected = kCleanState;
    expected.back() = date_style;
    auto state = r.rows[0];
    const std::string pid = state.back().value_or("?");
    state.pop_back();  // the backend's pid
    if (state != expected) {
        return "a backend carries foreign state (backend pid " + pid + "): " + r.describe();
    }
    return "";
}

// The log lines about the backend whose pid `failure` names ("backend pid N"): the lines that
// name the pid, and every line of the server ids (S-n) those lines name. At most the last 300.
std::string backend_history(const std::string& log, const std::string& failure) {
    const std::string marker = "(backend pid ";
    const auto at = failure.find(marker);
    if (at == std::string::npos) return "";
    const std::string pid =
        failure.substr(at + marker.size(), failure.find(')', at) - at - marker.size());
    std::vector<std::string> lines;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::vector<std::string> ids;
    for (const auto& line : lines) {
        if (line.find("backend pid " + pid) == std::string::npos &&
            line.find("backend " + pid + " ") == std::string::npos) {
            continue;
        }
        const auto s = line.find(" S-");
        if (s == std::string::npos) continue;
        const auto end = line.find_first_not_of("0123456789", s + 3);
        ids.push_back(line.substr(s + 1, end - s - 1));
    }
    std::deque<std::string> out;
    for (const auto& line : lines) {
        bool about = line.find(pid) != std::string::npos;
        for (const auto& id : ids) {
            about = about || line.find(id + " ") != std::string::npos ||
                    line.find(id + ":") != std::string::npos;
        }
        if (!about) continue;
        out.push_back(line);
        if (out.size() > 300) out.pop_front();
    }
    std::string text;
    for (const auto& line : out) text += line + "\n";
    return text;
}

struct GoodClientReport {
    long checks = 0;
    std::vector<std::string> failures;
};

// What pgtether and PostgreSQL say about the pool, for a failure report: the admin console's
// SHOW CLIENTS and SHOW SERVERS, and pg_stat_activity for `user`.
std::string snapshot(const PoolerProcess& pooler, const std::string& user) {
    const TestEnv& env = TestEnv::get();
    std::ostringstream out;
    const auto show = [&](Conn& conn, const std::string& sql) {
        send_query(conn, sql);
        auto r = wait_result(conn, 10s);
        out << sql << ":\n";
        if (!r) {
            out << "  (no answer)\n";
            return;
        }
        for (const auto& row : r->rows) {
            out << " ";
            for (std::size_t i = 0; i < row.size(); ++i)
                out << " " << r->columns[i] << "=" << row[i].value_or("NULL");
            out << "\n";
        }
    };
    Conn console(pooler.conninfo(env.superuser, "pgbouncer", kPassword));
    if (console.ok()) {
        show(console, "SHOW CLIENTS");
        show(console, "SHOW SERVERS");
    } else {
        out << "admin console: " << console.error() << "\n";
    }
    Conn direct(direct_conninfo());
    show(direct, "SELECT pid, state, wait_event_type, wait_event, xact_start, left(query, 80) "
                 "FROM pg_stat_activity WHERE usename = '" + user + "'");
    return out.str();
}

// The bystander's queries go out one at a time with a bounded wait, so a reply that never comes is
// a reported failure, not a hung test.
void good_client(const PoolerProcess& pooler, const std::string& user,
                 const std::string& conninfo, const std::string& date_style,
                 std::chrono::steady_clock::time_point deadline, std::uint64_t seed,
                 GoodClientReport& report) {
    std::mt19937_64 rng(seed);
    Conn conn(conninfo);
    if (!conn.ok()) {
        report.failures.push_back("cannot connect: " + conn.error());
        return;
    }
    // wait_result() waits boundedly for the first result only; a reply cut short after it (a
    // CommandComplete without its ReadyForQuery) would block libpq's next PQgetResult, so every
    // result is waited for with a deadline.
    const auto bounded_result = [&](std::chrono::milliseconds timeout) -> std::optional<Result> {
        const auto until = std::chrono::steady_clock::now() + timeout;
        std::optional<Result> last;
        for (;;) {
            while (PQconsumeInput(conn.raw()) != 0 && PQisBusy(conn.raw())) {
                if (std::chrono::steady_clock::now() >= until) return std::nullopt;
                pollfd pfd{PQsocket(conn.raw()), POLLIN, 0};
                ::poll(&pfd, 1, 100);
            }
            PGresult* res = PQgetResult(conn.raw());
            if (!res) break;
            last = Result::from(res);
            PQclear(res);
        }
        if (!last) last = Result::client_error(conn.error());
        return last;
    };
    const auto ask = [&](const std::string& sql) -> Result {
        send_query(conn, sql);
        auto result = bounded_result(60s);
        if (!result) {
            throw std::runtime_error("no complete answer within 60 s to: " + sql + "\n" +
                                     snapshot(pooler, user));
        }
        return *result;
    };
    long inserted = 0;
    while (std::chrono::steady_clock::now() < deadline && report.failures.size() < 5) {
        const auto n = static_cast<long>(rng() % 1000000);
        const std::string text = "v" + std::to_string(rng());
        Result r = ask("SELECT " + std::to_string(n) + "::int8 * 2, md5('" + text + "')");
        if (!r.ok() || r.rows.size() != 1 || r.rows[0][0] != std::to_string(2 * n) ||
            r.rows[0][1] != md5_hex(text)) {
            report.failures.push_back("wrong answer: " + r.describe());
            continue;
        }
        if (std::string why = dirt(ask(kStateQuery), date_style); !why.empty()) {
            report.failures.push_back(why);
        }
        if (rng() % 4 == 0) {
            // A transaction of its own: every statement must land on the same backend and see
            // only its own writes.
            const bool ok = ask("BEGIN").ok() && ask("INSERT INTO wire_fuzz_good VALUES (1)").ok();
            Result count = ask("SELECT count(*) FROM wire_fuzz_good");
            const bool committed = ask("COMMIT").ok();
            ++inserted;
            if (!ok || !committed || !count.ok() || count.rows.empty() ||
                count.rows[0][0] != std::to_string(inserted)) {
                report.failures.push_back("transaction went wrong: " + count.describe());
            }
        }
        ++report.checks;
    }
}

}  // namespace

TEST_CASE("wire fuzzer: a storm of broken clients never breaks pgtether or a bystander") {
    const TestEnv& env = TestEnv::get();
    const std::string user = private_role("pgt_wire_fuzz");
    {
        Conn admin = Conn::must(direct_conninfo());
        admin.exec_ok("CREATE TABLE IF NOT EXISTS wire_fuzz_sink (line text)");
        admin.exec_ok("DROP TABLE IF EXISTS wire_fuzz_good");
        admin.exec_ok("CREATE TABLE wire_fuzz_good (n int)");
        admin.exec_ok("GRANT ALL ON wire_fuzz_sink, wire_fuzz_good TO " + user);
    }
    REQUIRE(settled(user));

    PoolerConfig config = pool_config("transaction", kPoolSize,
                                      {{"auth_type", "md5"},
                                       {"max_client_conn", "500"},
                                       {"client_login_timeout", "5"},
                                       // A backend lost to the pool shows up as this error.
                                       {"query_wait_timeout", "30"},
                                       {"max_packet_size", "8388608"}});
    // PGT_WIRE_FUZZ_PROBE_DELAY=N: the storm with tether_probe_delay = N (0: probes never deferred;
    // unset: the default).
    if (const long delay = env_number("PGT_WIRE_FUZZ_PROBE_DELAY", -1); delay >= 0) {
        config.settings["tether_probe_delay"] = std::to_string(delay);
    }
    // The superuser only for the admin console (failure reports).
    config.userlist =
        std::vector<std::pair<std::string, std::string>>{{user, kPassword}, {env.superuser, kPassword}};
    // No -v unless asked for (PGT_WIRE_FUZZ_VERBOSE=N: N times -v): the storm writes a big log.
    config.extra_args.assign(
        static_cast<std::size_t>(std::max(0L, env_number("PGT_WIRE_FUZZ_VERBOSE", 0))), "-v");
    Pgtether pooler(config);
    const std::string conninfo = pooler.conninfo(user, env.database, kPassword);

    const auto seconds = env_number("PGT_WIRE_FUZZ_SECONDS", 20);
    const auto seed = static_cast<std::uint64_t>(env_number(
        "PGT_WIRE_FUZZ_SEED",
        static_cast<long>(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007)));
    MESSAGE("wire fuzz: seed " << seed << ", " << seconds
                               << " s (PGT_WIRE_FUZZ_SEED / PGT_WIRE_FUZZ_SECONDS to repeat)");

    // Baselines once the pool has been used.
    {
        Conn warm = Conn::must(conninfo);
        PGT_REQUIRE_OK(warm.exec("SELECT 1"));
    }
    const pid_t pid = pooler.pid();
    const long rss_before = rss_kb(pid);
    const int fds_before = open_fds(pid);

    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    Shared shared;
    std::vector<std::unique_ptr<StormClient>> storm;
    for (int i = 0; i < kStormClients; ++i) {
        storm.push_back(std::make_unique<StormClient>(i, seed + static_cast<std::uint64_t>(i),
                                                      pooler, user, env.database, shared));
    }
    std::atomic<long> rss_peak{rss_before};
    std::atomic<bool> died{false};
    std::atomic<bool> storm_over{false};
    std::thread monitor([&] {
        while (!storm_over) {
            const long rss = rss_kb(pid);
            if (rss == 0) died = true;
            rss_peak = std::max(rss_peak.load(), rss);
            std::this_thread::sleep_for(100ms);
        }
    });
    // The server's default, which a client that asks for nothing must see.
    const std::string date_style = direct_scalar("SHOW DateStyle");
    GoodClientReport good;
    std::thread bystander([&] {
        try {
            good_client(pooler, user, conninfo, date_style, deadline, seed ^ 0x9e3779b97f4a7c15u,
                        good);
        } catch (const std::exception& e) {
            good.failures.push_back(std::string("bystander stopped: ") + e.what());
        }
    });
    std::vector<std::thread> threads;
    for (auto& client : storm)
        threads.emplace_back([&, c = client.get()] { c->run(deadline); });
    for (auto& t : threads)
        t.join();
    bystander.join();
    storm_over = true;
    monitor.join();

    std::string histories;
    for (const auto& client : storm)
        histories += client->history() + "\n";
    INFO("seed " << seed << "; pgtether log tail:\n"
                 << pooler.log().substr(pooler.log().size() > 4000 ? pooler.log().size() - 4000 : 0)
                 << "\nlast operations:\n"
                 << histories);
    MESSAGE("wire fuzz: " << shared.sessions.load() << " sessions, " << shared.logged_in.load()
                          << " logged in, " << shared.operations.load()
                          << " operations; bystander checks: " << good.checks << "; RSS "
                          << rss_before << " kB -> peak " << rss_peak.load() << " kB");

    // pgtether is alive and serves.
    REQUIRE_FALSE(died.load());
    REQUIRE(pooler.running());
    {
        Conn after(conninfo);
        REQUIRE_MESSAGE(after.ok(), after.error());
        PGT_CHECK_OK(after.exec("SELECT 1"));
    }
    // The bystander was served correctly throughout (and did get served).
    for (const auto& failure : good.failures) {
        CHECK_MESSAGE(false, "bystander: " << failure << "\n"
                                           << backend_history(pooler.log(), failure));
    }
    CHECK(good.checks > 0);
    CHECK(shared.logged_in > 0);

    // Bounded memory, and no connection left behind.
    CHECK_MESSAGE(rss_peak.load() - rss_before < kRssGrowthLimitKb,
                  "RSS grew from " << rss_before << " kB to " << rss_peak << " kB");
    CHECK_MESSAGE(eventually([&] { return open_fds(pid) <= fds_before + kPoolSize + 2; }, 20s),
                  "pgtether has " << open_fds(pid) << " open files, " << fds_before
                                  << " before the storm");

    // No backend of the pool is left in a transaction or holding an advisory lock.
    const std::string backends =
        "FROM pg_stat_activity WHERE usename = '" + user + "' AND backend_type = 'client backend'";
    CHECK_MESSAGE(eventually([&] {
                      return direct_scalar("SELECT count(*) " + backends +
                                           " AND state <> 'idle'") == "0";
                  }, 20s),
                  direct_scalar("SELECT coalesce(string_agg(state || ': ' || query, '; '), '') " +
                                backends));
    CHECK_MESSAGE(eventually([&] {
                      return direct_scalar("SELECT count(*) FROM pg_locks WHERE locktype = "
                                           "'advisory' AND pid IN (SELECT pid " +
                                           backends + ")") == "0";
                  }, 20s),
                  "advisory locks are left on idle backends");

    // Each backend, pinned by its own transaction, is clean.
    INFO("after the storm:\n" << snapshot(pooler, user));
    std::vector<Conn> pinned;
    std::vector<int> pids;
    for (int i = 0; i < kPoolSize; ++i) {
        pinned.emplace_back(conninfo);
        REQUIRE_MESSAGE(pinned.back().ok(), pinned.back().error());
        PGT_REQUIRE_OK(pinned.back().exec("BEGIN"));
        Result state = pinned.back().exec(kStateQuery);
        // Inside BEGIN, now() is the transaction's start: only the other columns apply.
        if (state.ok() && state.rows.size() == 1) state.rows[0][7] = "t";
        CHECK_MESSAGE(dirt(state, date_style).empty(), dirt(state, date_style));
        pids.push_back(std::stoi(scalar(pinned.back(), "SELECT pg_backend_pid()")));
    }
    std::sort(pids.begin(), pids.end());
    CHECK(std::adjacent_find(pids.begin(), pids.end()) == pids.end());
    for (auto& c : pinned)
        PGT_CHECK_OK(c.exec("ROLLBACK"));
}
