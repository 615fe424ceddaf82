#include "proxy/pool/lock_catalog.hpp"

#include <algorithm>
#include <set>

#include "proxy/net/log.hpp"

#include "proxy/pool/catalog_watch.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/pool/pool_context.hpp"
#include "proxy/server/server.hpp"
#include "proxy/server/side_query.hpp"

namespace pgtether {

namespace {

// A failed discovery is tried again after this long (or the interval, if shorter).
constexpr std::uint64_t kRetryMs = 10'000;
// Bounds of one discovery's answer: a catalog larger than this is not scanned (the run fails and
// the database keeps its configured names).
constexpr std::size_t kMaxRows = 1'000'000;
constexpr std::size_t kMaxRowBytes = 256u << 20;
constexpr std::uint32_t kMaxMessage = 64u << 20;  // one function body

std::uint64_t interval_ms(const Config& config) {
    return duration_ms(config.advisory_lock_discovery_interval);
}

std::uint64_t check_interval_ms(const Config& config) {
    return duration_ms(config.advisory_lock_catalog_check_interval);
}

// A catalog watch listener whose connection failed is opened again after this long, and a
// check that failed is run again.
constexpr std::uint64_t kWatchRetryMs = 5'000;
// Checks asked for by calls of unknown names, at most one per this long: a name that stays
// unknown (a CTE's, say) must not turn the watch into a busy loop.
constexpr std::uint64_t kRequestedCheckGapMs = 250;

bool same_names(const std::shared_ptr<const protocol::KnownNames>& a,
                const std::shared_ptr<const protocol::KnownNames>& b) {
    if (!a || !b) return a == b;
    return a == b || *a == *b;
}

// Names listed in one log line; the rest are counted (SHOW LOCK_FUNCTIONS has them all).
constexpr std::size_t kLoggedNames = 10;

// "a, b, c" of the names in `a` and not in `b` (schema-qualified; the kind for tables and views).
std::string difference(const std::vector<LockName>& a, const std::vector<LockName>& b) {
    std::string out;
    std::size_t listed = 0;
    std::size_t more = 0;
    for (const LockName& n : a) {
        if (n.source == LockNameSource::Unknown) continue;
        if (std::find(b.begin(), b.end(), n) != b.end()) continue;
        if (listed == kLoggedNames) {
            ++more;
            continue;
        }
        if (listed++ > 0) out += ", ";
        out += n.schema + "." + n.name;
        if (n.kind == "table" || n.kind == "view") out += " (" + n.kind + ")";
    }
    if (more > 0) out += " and " + std::to_string(more) + " more";
    return out;
}

std::size_t count_known(const std::vector<LockName>& names) {
    return static_cast<std::size_t>(
        std::count_if(names.begin(), names.end(),
                      [](const LockName& n) { return n.source != LockNameSource::Unknown; }));
}

}  // namespace

LockCatalog::LockCatalog(PoolContext& context)
    : context_(context),
      base_(std::make_shared<protocol::SqlScanner>(context.config().advisory_lock_functions)) {}

LockCatalog::~LockCatalog() {
    shutdown();
}

bool LockCatalog::enabled() const {
    const Config& config = context_.config();
    // Without the trigger (off) or with a probe after every transaction, names do not matter.
    return config.advisory_lock_discovery && config.advisory_lock_tracking == LockTracking::On;
}

const std::vector<std::string>& LockCatalog::configured() const {
    return context_.config().advisory_lock_functions;
}

const LockTrigger& LockCatalog::attach(const std::string& database) {
    auto& slot = databases_[database];
    if (!slot) {
        slot = std::make_unique<Database>();
        slot->name = database;
        // Until the first discovery has finished (milliseconds after the first login), the
        // built-in and configured names. Probing everything meanwhile would be safer, but would
        // probe the first transactions of every fresh pool, which every client would notice.
        slot->trigger.scanner = base_;
    }
    return slot->trigger;
}

void LockCatalog::on_pool_connected(const Pool& pool) {
    auto it = databases_.find(pool.database_name());
    if (it == databases_.end()) return;
    Database& db = *it->second;
    db.connected = true;
    // Not when another worker's discovery of the database has been adopted already.
    if (enabled() && !stopped_ && !db.running && db.runs == 0 && db.discovered_at_ms == 0) {
        start(db);
    }
}

void LockCatalog::adopt(const std::string& database, LockDiscovery found) {
    if (!enabled() || stopped_) return;
    (void)attach(database);
    Database& db = *databases_.at(database);
    const std::uint64_t now = context_.now_ms();
    install(db, std::move(found));
    db.last_error.clear();
    db.discovered_at_ms = now;
    db.next_run_ms = now + interval_ms(context_.config());
    if (!db.running && !db.rerun) db.trigger.probe_all = db.overflow;
}

void LockCatalog::on_catalog_change_elsewhere(const std::string& database) {
    if (!enabled() || stopped_) return;
    (void)attach(database);
    // Until the discovery that worker runs now is adopted, every transaction is lock-relevant.
    databases_.at(database)->trigger.probe_all = true;
}

void LockCatalog::on_unknown_call(const std::string& database) {
    if (!enabled() || stopped_) return;
    auto it = databases_.find(database);
    if (it == databases_.end()) return;
    Database& db = *it->second;
    const std::uint64_t now = context_.now_ms();
    if (db.check_requested || now < db.check_asked_ms + kRequestedCheckGapMs) return;
    db.check_asked_ms = now;
    if (db.watching) {
        db.check_requested = true;
        watch_tick(db, now);
    } else if (context_.worker_count() > 1) {
        // The worker that runs the database's watch checks; the others ignore it.
        context_.post_to_other_workers(
            [database](PoolContext& other) { other.lock_catalog().on_unknown_call(database); });
    }
}

void LockCatalog::on_catalog_change(const std::string& database) {
    if (!enabled() || stopped_) return;
    auto it = databases_.find(database);
    if (it == databases_.end()) return;
    Database& db = *it->second;
    db.trigger.probe_all = true;
    if (context_.worker_count() > 1) {
        context_.post_to_other_workers([database](PoolContext& other) {
            other.lock_catalog().on_catalog_change_elsewhere(database);
        });
    }
    if (db.running) {
        db.rerun = true;  // the running query may have read the catalog before the change
    } else {
        start(db);
    }
}

void LockCatalog::apply_config() {
    base_ = std::make_shared<protocol::SqlScanner>(context_.config().advisory_lock_functions);
    for (auto& [name, db] : databases_) {
        if (!runs_watches()) stop_watch(*db);
        if (!enabled()) {
            if (db->running) {
                db->running->cancel();
                db->running = nullptr;
            }
            db->rerun = false;
            db->names.clear();
            db->discovered_at_ms = 0;
            db->overflow = false;
            db->trigger.scanner = base_;
            db->trigger.probe_all = false;
            db->known_names.reset();
            continue;
        }
        // The configured names seed the fixed point: rediscover with them. Meanwhile the old
        // discovered names stay, with the new configured ones.
        rebuild_scanner(*db, db->names, !db->overflow);
        if (db->overflow) db->trigger.probe_all = true;
        if (db->running) {
            db->rerun = true;
        } else if (db->connected && !stopped_) {
            start(*db);
        }
    }
}

void LockCatalog::tick(std::uint64_t now_ms) {
    if (!enabled() || stopped_) return;
    for (auto& [name, db] : databases_) {
        if (db->connected && !db->running && db->next_run_ms != 0 && now_ms >= db->next_run_ms) {
            start(*db);
        }
        if (db->connected) watch_tick(*db, now_ms);
    }
}

// ---------------------------------------------------------------------------------------------
// The catalog watch

bool LockCatalog::runs_watches() const {
    return enabled() && !stopped_ && check_interval_ms(context_.config()) > 0;
}

void LockCatalog::watch_tick(Database& db, std::uint64_t now_ms) {
    if (!runs_watches()) return;
    if (!db.watching) {
        // One watch per database and process: the first worker to get here with a pool of the
        // database runs it (its discoveries reach the others).
        if (!context_.catalog_watches().claim(db.name, context_.index())) return;
        db.watching = true;
        // The first check an interval from now: the discovery that runs at the database's
        // first login reads the fingerprint in its own snapshot already.
        db.next_check_ms = now_ms + check_interval_ms(context_.config());
    }
    // The listener only while the catalog has the event trigger (the last discovery's
    // snapshot or the last check said so): without it nothing would ever be notified.
    const bool wants_listener = fingerprint_has_notify_trigger(db.fingerprint);
    if (wants_listener && !db.listener && now_ms >= db.listener_retry_ms) start_listener(db);
    if (!wants_listener && db.listener) {
        db.listener->stop();
        db.listener = nullptr;
    }
    if (!db.check_running && (db.check_requested || now_ms >= db.next_check_ms)) start_check(db);
}

void LockCatalog::start_check(Database& db) {
    // On an idle backend of one of this worker's pools of the database: no connection of its
    // own. When every one is busy (or there is none), the next tick (100 ms) tries again.
    Server* server = nullptr;
    for (const auto& [key, pool] : context_.pools()) {
        if (key.first != db.name) continue;
        if ((server = pool->idle_server_to_lend()) != nullptr) break;
    }
    if (server == nullptr) {
        if (pool_of(db.name) == nullptr) {
            // No pool of the database is logged in here (any more): another worker may watch it.
            context_.catalog_watches().release(db.name, context_.index());
            db.watching = false;
            db.connected = false;
        }
        return;
    }
    db.check_requested = false;
    db.check_running = true;
    db.next_check_ms = context_.now_ms() + check_interval_ms(context_.config());
    Database* target = &db;
    // The server may outlive this catalog at shutdown (and then calls back): `alive` tells.
    server->check_catalog([this, target, alive = std::weak_ptr<const int>(alive_)](
                              std::optional<std::string> fingerprint) {
        if (alive.expired()) return;
        target->check_running = false;
        if (!fingerprint) {
            // The query failed (no access to the catalog?) or its backend closed under it: tried
            // again later on another backend, not at every tick.
            spdlog::debug("catalog check of database \"{}\" failed; checking again in {} s",
                          target->name, kWatchRetryMs / 1000);
            target->next_check_ms = context_.now_ms() + kWatchRetryMs;
            return;
        }
        on_fingerprint(*target, std::move(*fingerprint));
    });
}

void LockCatalog::start_listener(Database& db) {
    const Pool* pool = pool_of(db.name);
    if (!pool) return;
    SideConnection::Setup setup;
    setup.database = pool->database();
    setup.credentials = pool->server_credentials();
    setup.application_name = "pgtether catalog watch";
    setup.host_index = pool->side_host();
    setup.max_message = 64 * 1024;
    setup.limits = ResultLimits{1, 4096};
    Database* target = &db;
    CatalogWatch::Events events;
    events.notified = [this, target]() {
        // The optional event trigger: DDL has just been committed. Checked at once, so that
        // the fingerprint moves with the discovery it starts (one discovery, not two).
        spdlog::debug("catalog of database \"{}\": notified of DDL", target->name);
        target->check_requested = true;
        watch_tick(*target, context_.now_ms());
    };
    events.failed = [this, target](const std::string& why) {
        target->listener = nullptr;
        target->listener_retry_ms = context_.now_ms() + kWatchRetryMs;
        spdlog::warn("catalog watch of database \"{}\" failed: {}; reconnecting in {} s",
                     target->name, why, kWatchRetryMs / 1000);
    };
    // The connection may fail inside begin(): the pointer is set first and cleared there.
    db.listener = CatalogWatch::create(context_, std::move(setup), std::move(events));
    db.listener->begin();
}

void LockCatalog::on_fingerprint(Database& db, std::string fingerprint) {
    db.checks++;
    db.checked_at_ms = context_.now_ms();
    // The baseline is the fingerprint of the last discovery's own snapshot. A discovery running
    // now brings its own; one that failed is retried on its timer, not at every check.
    if (fingerprint == db.fingerprint || db.running || !db.last_error.empty()) return;
    db.changes_seen++;
    spdlog::info("catalog of database \"{}\" changed; discovering lock functions again", db.name);
    on_catalog_change(db.name);
}

void LockCatalog::stop_watch(Database& db) {
    if (db.listener) {
        db.listener->stop();
        db.listener = nullptr;
    }
    if (!db.watching) return;
    db.watching = false;
    context_.catalog_watches().release(db.name, context_.index());
}

void LockCatalog::shutdown() {
    stopped_ = true;
    for (auto& [name, db] : databases_) {
        stop_watch(*db);
        if (db->running) {
            db->running->cancel();
            db->running = nullptr;
        }
    }
}

const Pool* LockCatalog::pool_of(const std::string& database) const {
    for (const auto& [key, pool] : context_.pools()) {
        if (key.first == database && pool->has_welcome()) return pool.get();
    }
    return nullptr;
}

void LockCatalog::start(Database& db) {
    db.next_run_ms = 0;
    db.rerun = false;
    const Pool* pool = pool_of(db.name);
    if (!pool) {
        // No pool has logged in (any more): the next login starts it.
        db.connected = false;
        return;
    }
    SideQuery::Request request;
    request.database = pool->database();
    request.credentials = pool->server_credentials();
    request.application_name = "pgtether lock discovery";
    request.host_index = pool->side_host();
    request.query = lock_discovery_query();
    request.max_rows = kMaxRows;
    request.max_row_bytes = kMaxRowBytes;
    request.max_message = kMaxMessage;
    db.run_started_us = PoolContext::now_us();
    Database* target = &db;
    db.running =
        SideQuery::create(context_, std::move(request), [this, target](SideQuery::Result&& r) {
            target->running = nullptr;
            std::string error = !r.error.empty() ? r.error
                                : !r.query_error.empty()
                                    ? "discovery query failed: " + r.query_error
                                : r.row_count > r.rows.size()
                                    ? "more than " + std::to_string(kMaxRows) + " catalog objects"
                                    : std::string();
            finished(*target, std::move(r.rows), std::move(error));
        });
    // begin() may call back at once (no socket): keep nothing of `request` after it.
    db.running->begin();
}

void LockCatalog::finished(Database& db, std::vector<Row>&& rows, std::string error) {
    const std::uint64_t now = context_.now_ms();
    db.runs++;
    db.last_duration_us = PoolContext::now_us() - db.run_started_us;
    std::optional<CatalogSnapshot> snapshot;
    if (error.empty()) {
        snapshot = decode_lock_discovery(rows);
        if (!snapshot) error = "unexpected rows from the discovery query";
    }
    if (!error.empty()) {
        db.failures++;
        db.last_error = error;
        const std::uint64_t retry = std::min(kRetryMs, interval_ms(context_.config()));
        spdlog::warn(
            "lock function discovery for database \"{}\" failed: {}; keeping the {} "
            "names found before, retrying in {} s",
            db.name, error, count_known(db.names), retry / 1000);
        // Waiting for a success could take forever: fall back to the names known so far.
        db.trigger.probe_all = db.overflow;
        db.next_run_ms = now + retry;
        return;
    }
    db.last_error.clear();
    const std::uint64_t scan_started_us = PoolContext::now_us();
    LockDiscovery found = discover_lock_names(*snapshot, configured());
    db.last_scan_us = PoolContext::now_us() - scan_started_us;
    if (context_.worker_count() > 1) {
        // One discovery serves every worker: the others' clients of the database are tethered by
        // the same names (and do not each query the catalog).
        context_.post_to_other_workers([name = db.name, found](PoolContext& other) {
            other.lock_catalog().adopt(name, found);
        });
    }
    install(db, std::move(found));
    db.discovered_at_ms = now;
    db.next_run_ms = now + interval_ms(context_.config());
    if (db.rerun && !stopped_) {
        start(db);  // a catalog change arrived meanwhile: probe_all stays until this one is done
    } else {
        db.trigger.probe_all = db.overflow;
    }
}

void LockCatalog::install(Database& db, LockDiscovery found) {
    std::vector<LockName>& names = found.names;
    const bool first = db.discovered_at_ms == 0;
    const std::string added = difference(names, db.names);
    const std::string removed = difference(db.names, names);
    const std::size_t unknown = names.size() - count_known(names);
    const std::size_t unknown_before = db.names.size() - count_known(db.names);
    const bool overflow_before = db.overflow;
    const bool names_moved = !same_names(db.known_names, found.known_names);
    db.known_names = std::move(found.known_names);
    db.fingerprint = std::move(found.fingerprint);
    if (!added.empty() || !removed.empty() || unknown != unknown_before || first ||
        overflow_before != !found.complete || names_moved) {
        rebuild_scanner(db, names, found.complete);
        if (db.overflow && !overflow_before) {
            spdlog::warn(
                "lock functions of database \"{}\": more than {} bytes of names or wrapper "
                "chains deeper than {}; every transaction in it is probed, as with "
                "advisory_lock_tracking = every_transaction",
                db.name, kMaxTriggerNameBytes, kMaxDiscoveryRounds);
        }
        const auto level =
            added.empty() && removed.empty() ? spdlog::level::debug : spdlog::level::info;
        spdlog::log(
            level,
            "lock functions of database \"{}\": {} discovered{}{}; {} unreadable (unknown); "
            "discovery took {} ms (catalog query {} ms, scan {} ms)",
            db.name, count_known(names), added.empty() ? "" : ", added: " + added,
            removed.empty() ? "" : ", removed: " + removed, unknown,
            (db.last_duration_us + db.last_scan_us) / 1000, db.last_duration_us / 1000,
            db.last_scan_us / 1000);
    }
    db.names = std::move(names);
}

void LockCatalog::rebuild_scanner(Database& db, const std::vector<LockName>& names, bool complete) {
    std::vector<std::string> trigger = trigger_names(configured(), names);
    db.overflow = !complete || trigger_too_large(trigger);
    db.trigger.scanner =
        db.overflow ? base_ : std::make_shared<protocol::SqlScanner>(trigger, db.known_names);
}

}  // namespace pgtether
