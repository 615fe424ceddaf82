// The tether's trigger per database, kept up to date by discovering lock wrappers from the
// catalog (docs/advisory-locks.md, "Wrappers"; the pure part is core/lock_discovery.hpp).
//
// Every database entry a worker pools has a LockTrigger: a protocol::SqlScanner built from the
// built-in lock functions, advisory_lock_functions and what discovery found in that database (the
// names of wrapper functions and procedures, of tables whose triggers lock, of views that call a
// wrapper). Pools hold a pointer to their database's trigger, so a client's statement costs one
// scan, as with the single worker-wide scanner before.
//
// Discovery runs on a side connection (proxy/server/side_query.hpp) logged in as a pool's server
// user: when the database's first pool logs in, on RELOAD/SIGHUP, every
// advisory_lock_discovery_interval, right after a transaction through pgtether that created,
// altered or dropped a function, procedure, trigger or view (protocol::kEffectCatalogChange),
// and whenever the database's catalog watch (catalog_watch.hpp) sees the catalog move, wherever
// it was moved. A statement that calls a name the last discovery did not know is probed
// (protocol::kEffectUnknownCall) and makes the watch check at once.
// From such a transaction's end until the run that follows it finishes, every transaction in the
// database counts as lock-relevant (probe_all): a wrapper created a moment ago is tethered even
// before discovery has seen it. A failed run is
// logged and retried; the database keeps the names it had. Nothing here ever makes a client wait.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/scan_memo.hpp"
#include "protocol/sql_scanner.hpp"
#include "core/lock_discovery.hpp"

namespace pgtether {

class CatalogWatch;
class Pool;
class SideQuery;
class PoolContext;

struct LockTrigger {
    std::shared_ptr<const protocol::SqlScanner> scanner;
    bool probe_all = false;  // discovery is catching up with a catalog change: probe everything

    // The scanner's findings in `sql`, as SqlScanner::scan.
    [[nodiscard]] std::uint32_t scan(std::string_view sql) const {
        const std::uint32_t effects = scanner->scan(sql);
        return probe_all ? effects | protocol::kEffectAdvisoryLock : effects;
    }

    // The same for the text of a Parse, remembered for texts that come again: drivers send the
    // same unnamed Parse for every execution of a query (protocol/scan_memo.hpp). Simple Query
    // texts are not remembered: they usually carry their values as literals and rarely repeat.
    [[nodiscard]] std::uint32_t scan_statement(std::string_view sql) const {
        if (memo_scanner_ != scanner) {
            memo_.clear();
            memo_scanner_ = scanner;
        }
        const std::uint32_t effects = memo_.scan(*scanner, sql);
        return probe_all ? effects | protocol::kEffectAdvisoryLock : effects;
    }

  private:
    // A cache: it changes how fast scan_statement() answers, never what. It holds the scanner
    // its answers came from, so a new scanner (discovery, reload) starts it afresh.
    mutable protocol::ScanMemo memo_;
    mutable std::shared_ptr<const protocol::SqlScanner> memo_scanner_;
};

class LockCatalog {
  public:
    // One database entry's trigger and discovery state.
    struct Database {
        std::string name;
        LockTrigger trigger;
        std::vector<LockName> names;         // the last successful discovery's result
        std::uint64_t discovered_at_ms = 0;  // loop time of that discovery; 0: none yet
        std::uint64_t last_duration_us = 0;  // the last run's query, connection included
        std::uint64_t last_scan_us = 0;      // the last successful run's fixed point
        std::uint64_t runs = 0;              // discovery runs finished, failed ones included
        std::uint64_t failures = 0;
        std::string last_error;         // of the last run; empty if it succeeded
        bool connected = false;         // some pool of the database has logged in
        std::uint64_t next_run_ms = 0;  // loop time of the next periodic run or retry
        bool rerun = false;             // a catalog change came in while a run was going
        // The names found are too many for a scanner (kMaxTriggerNameBytes), or the fixed point
        // was cut short (kMaxDiscoveryRounds): every transaction in the database is probed.
        bool overflow = false;
        SideQuery* running = nullptr;
        std::uint64_t run_started_us = 0;
        // The catalog's names: a call of any other name is probed and asks for a check.
        std::shared_ptr<const protocol::KnownNames> known_names;

        // The catalog's fingerprint in the last discovery's snapshot: what the catalog watch
        // compares its readings with.
        std::string fingerprint;
        // The catalog watch, if this worker runs the database's (`watching`): its checks run
        // on idle pooled backends of the database; `listener` (catalog_watch.hpp) is the
        // connection listening for the optional event trigger, only while the catalog has it.
        bool watching = false;
        bool check_running = false;
        CatalogWatch* listener = nullptr;
        std::uint64_t listener_retry_ms = 0;  // a failed listener reconnects after this
        std::uint64_t checked_at_ms = 0;   // loop time of the last answer; 0: none yet
        std::uint64_t next_check_ms = 0;   // the next periodic check
        std::uint64_t checks = 0;          // answers
        std::uint64_t changes_seen = 0;    // answers that moved
        bool check_requested = false;      // an unknown call asked for a check now
        std::uint64_t check_asked_ms = 0;  // when one last did (rate limit)
    };

    explicit LockCatalog(PoolContext& context);
    ~LockCatalog();
    LockCatalog(const LockCatalog&) = delete;
    LockCatalog& operator=(const LockCatalog&) = delete;

    // The trigger of `database` (an entry name), created on first use; the reference stays valid
    // for the worker's life.
    const LockTrigger& attach(const std::string& database);
    // A pool logged its first server in: the database can be discovered (now, if it never was).
    void on_pool_connected(const Pool& pool);
    // A transaction through pgtether created, altered or dropped a function, procedure, trigger
    // or view in `database`.
    void on_catalog_change(const std::string& database);
    // With several workers: another worker discovered `database` (its result serves this one
    // too), or saw a catalog change in it (every transaction is lock-relevant until the next
    // discovery is adopted).
    void adopt(const std::string& database, LockDiscovery found);
    void on_catalog_change_elsewhere(const std::string& database);
    // A statement in `database` called a name its catalog did not know at the last discovery
    // (protocol::kEffectUnknownCall): the catalog watch checks at once (rate-limited), on
    // whichever worker runs it.
    void on_unknown_call(const std::string& database);
    // The configuration was reloaded: new configured names, maybe discovery turned on or off;
    // every connected database is discovered again.
    void apply_config();
    // Periodic runs and retries (called from the worker's janitor).
    void tick(std::uint64_t now_ms);
    // Shutdown: cancel running discoveries, start no more.
    void shutdown();

    [[nodiscard]] bool enabled() const;
    [[nodiscard]] const std::map<std::string, std::unique_ptr<Database>>& databases() const {
        return databases_;
    }
    // advisory_lock_functions, as shown by SHOW LOCK_FUNCTIONS.
    [[nodiscard]] const std::vector<std::string>& configured() const;

  private:
    // The catalog watch of `database`: checks when due on an idle pooled backend, keeps the
    // listener while the event trigger is installed.
    void watch_tick(Database& database, std::uint64_t now_ms);
    void start_check(Database& database);
    void start_listener(Database& database);
    void on_fingerprint(Database& database, std::string fingerprint);
    void stop_watch(Database& database);
    [[nodiscard]] bool runs_watches() const;
    void start(Database& database);
    void finished(Database& database, std::vector<Row>&& rows, std::string error);
    void install(Database& database, LockDiscovery found);
    // The database's scanner from the configured names and `names`, or the built-in and
    // configured ones only when there are too many (then `overflow` is set).
    void rebuild_scanner(Database& database, const std::vector<LockName>& names, bool complete);
    // A pool of `database` that has logged in, whose entry and credentials discovery uses.
    const Pool* pool_of(const std::string& database) const;

    PoolContext& context_;
    std::shared_ptr<const protocol::SqlScanner> base_;  // builtin + configured names
    std::map<std::string, std::unique_ptr<Database>> databases_;
    bool stopped_ = false;
    // Expires with this object: a catalog check's callback, run by a server that may close
    // after it, looks at it first.
    std::shared_ptr<const int> alive_ = std::make_shared<const int>(0);
};

}  // namespace pgtether
