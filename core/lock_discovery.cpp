#include "core/lock_discovery.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "protocol/sql_scanner.hpp"

namespace pgtether {

namespace {

// Languages whose functions have no source text in pg_proc.prosrc (a C symbol, an internal
// function's name).
bool unreadable_language(std::string_view language) {
    return language == "c" || language == "internal";
}

// Languages whose bodies are SQL that protocol::SqlScanner lexes as the server does.
bool sql_language(std::string_view language) {
    return language == "sql" || language == "plpgsql";
}

bool mentions_lock(const protocol::SqlScanner& scanner, std::string_view text) {
    return (scanner.scan(text) & protocol::kEffectAdvisoryLock) != 0;
}

// Each row version of a catalog has its own xmin: a created, replaced, altered or dropped
// function, trigger or view changes the count or the sum. Only objects made after initdb (OIDs
// from FirstNormalObjectId, 16384, on; the built-in ones never change), read through each
// catalog's OID index: the cost grows with the schema's own functions, not with PostgreSQL's
// 3,000. Not pg_class: temporary tables come and go with traffic, and a new table is no new lock
// wrapper.
constexpr const char* kFingerprint =
    "(SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) "
    "FROM pg_catalog.pg_proc WHERE oid >= 16384) || '/' || "
    "(SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) "
    "FROM pg_catalog.pg_trigger WHERE oid >= 16384) || '/' || "
    "(SELECT count(*) || ':' || coalesce(sum(xmin::text::bigint), 0) "
    "FROM pg_catalog.pg_rewrite WHERE oid >= 16384) || '/' || "
    // Whether docs/advisory-locks.md's optional event trigger is installed and enabled: only
    // then does pgtether keep a connection listening for its notifications.
    "(SELECT count(*) FROM pg_catalog.pg_event_trigger "
    "WHERE evtname = 'pgtether_catalog' AND evtenabled <> 'D')";

}  // namespace

const char* lock_discovery_query() {
    // prosrc is '' for SQL-standard bodies (PostgreSQL 14+, BEGIN ATOMIC / RETURN), whose parsed
    // form is in prosqlbody: pg_get_functiondef() deparses it on every version that has it, and
    // the query needs no version check. Aggregates and window functions (prokind 'a', 'w') have
    // no body of their own.
    static const std::string query =
        "SELECT 'f', p.oid::text, n.nspname::text, p.proname::text, l.lanname::text, "
        "p.prokind::text, CASE WHEN l.lanname = 'sql' AND p.prosrc = '' "
        "THEN pg_catalog.pg_get_functiondef(p.oid) ELSE p.prosrc END "
        "FROM pg_catalog.pg_proc p "
        "JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
        "JOIN pg_catalog.pg_language l ON l.oid = p.prolang "
        "WHERE p.prokind IN ('f', 'p') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg\\_toast%' "
        "UNION ALL "
        "SELECT 't', t.tgfoid::text, n.nspname::text, c.relname::text, t.tgname::text, "
        "NULL, NULL "
        "FROM pg_catalog.pg_trigger t "
        "JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE NOT t.tgisinternal "
        "UNION ALL "
        "SELECT 'v', c.oid::text, n.nspname::text, c.relname::text, NULL, NULL, "
        "pg_catalog.pg_get_viewdef(c.oid) "
        "FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('v', 'm') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        // Every name a statement may put right before '(' without calling a function the
        // catalog does not know (protocol/known_names.hpp).
        "UNION ALL "
        "SELECT 'n', '', '', k.name, NULL, NULL, NULL FROM ("
        "SELECT proname::text AS name FROM pg_catalog.pg_proc "
        "UNION SELECT relname::text FROM pg_catalog.pg_class "
        "UNION SELECT typname::text FROM pg_catalog.pg_type "
        "UNION SELECT amname::text FROM pg_catalog.pg_am "
        "UNION SELECT word FROM pg_catalog.pg_get_keywords()) AS k "
        // The fingerprint of this very snapshot (one statement, one snapshot): the catalog
        // watch compares its later readings with it.
        "UNION ALL SELECT 'c', '', '', " +
        std::string(kFingerprint) + ", NULL, NULL, NULL";
    return query.c_str();
}

const char* catalog_fingerprint_query() {
    static const std::string query = std::string("SELECT ") + kFingerprint;
    return query.c_str();
}

bool fingerprint_has_notify_trigger(std::string_view fingerprint) {
    const auto slash = fingerprint.rfind('/');
    if (slash == std::string_view::npos) return false;
    const std::string_view count = fingerprint.substr(slash + 1);
    // A count: digits only (the parts before it are "count:xmin-sum").
    if (count.empty() || count.find_first_not_of("0123456789") != std::string_view::npos) {
        return false;
    }
    return count.find_first_not_of('0') != std::string_view::npos;
}

std::optional<CatalogSnapshot> decode_lock_discovery(const std::vector<Row>& rows) {
    CatalogSnapshot snapshot;
    for (const Row& row : rows) {
        if (row.size() != 7 || !row[0] || !row[1] || !row[2] || !row[3]) return std::nullopt;
        const std::string& kind = *row[0];
        if (kind == "f") {
            if (!row[4] || !row[5]) return std::nullopt;
            snapshot.functions.push_back(
                {*row[1], *row[2], *row[3], *row[4], *row[5] == "p", row[6].value_or("")});
        } else if (kind == "t") {
            if (!row[4]) return std::nullopt;
            snapshot.triggers.push_back({*row[1], *row[2], *row[3], *row[4]});
        } else if (kind == "v") {
            // A view whose definition cannot be shown has none to search: an empty text.
            snapshot.views.push_back({*row[2], *row[3], row[6].value_or("")});
        } else if (kind == "n") {
            snapshot.known_names.push_back(*row[3]);
        } else if (kind == "c") {
            snapshot.fingerprint = *row[3];
        } else {
            return std::nullopt;
        }
    }
    return snapshot;
}

const char* to_string(LockNameSource source) {
    switch (source) {
        case LockNameSource::Builtin:
            return "builtin";
        case LockNameSource::Configured:
            return "configured";
        case LockNameSource::Discovered:
            return "discovered";
        case LockNameSource::TriggerTable:
            return "via trigger";
        case LockNameSource::View:
            return "via view";
        case LockNameSource::Unknown:
            return "unknown";
    }
    return "?";
}

const std::vector<std::string>& builtin_lock_functions() {
    static const std::vector<std::string> kNames = {
        "pg_advisory_lock",       "pg_advisory_lock_shared",
        "pg_try_advisory_lock",   "pg_try_advisory_lock_shared",
        "pg_advisory_unlock",     "pg_advisory_unlock_shared",
        "pg_advisory_unlock_all",
    };
    return kNames;
}

LockDiscovery discover_lock_names(const CatalogSnapshot& snapshot,
                                  const std::vector<std::string>& configured) {
    const auto& functions = snapshot.functions;
    const auto& views = snapshot.views;
    std::vector<bool> function_found(functions.size(), false);
    std::vector<bool> view_found(views.size(), false);
    std::vector<bool> trigger_found(snapshot.triggers.size(), false);
    std::map<std::string, std::vector<std::size_t>> functions_by_oid;
    for (std::size_t i = 0; i < functions.size(); ++i)
        functions_by_oid[functions[i].oid].push_back(i);

    // Fixed point: each round scans what is not found yet with every name found so far. A round
    // that adds nothing ends it (in practice after the depth of the wrapper chains, plus one).
    std::vector<std::string> names = configured;
    bool changed = true;
    int rounds = 0;
    while (changed && !trigger_too_large(names) && rounds++ < kMaxDiscoveryRounds) {
        changed = false;
        const protocol::SqlScanner scanner(names);
        std::vector<std::string> added;
        for (std::size_t i = 0; i < functions.size(); ++i) {
            const CatalogFunction& f = functions[i];
            if (function_found[i] || unreadable_language(f.language)) continue;
            if (!mentions_lock(scanner, f.body)) continue;
            function_found[i] = true;
            added.push_back(f.name);
        }
        // Functions found in this round already count for the triggers that call them.
        for (std::size_t i = 0; i < snapshot.triggers.size(); ++i) {
            if (trigger_found[i]) continue;
            const auto it = functions_by_oid.find(snapshot.triggers[i].function_oid);
            if (it == functions_by_oid.end()) continue;
            if (std::none_of(it->second.begin(), it->second.end(),
                             [&](std::size_t f) { return function_found[f]; })) {
                continue;
            }
            trigger_found[i] = true;
            added.push_back(snapshot.triggers[i].table_name);
        }
        for (std::size_t i = 0; i < views.size(); ++i) {
            if (view_found[i] || !mentions_lock(scanner, views[i].definition)) continue;
            view_found[i] = true;
            added.push_back(views[i].name);
        }
        if (!added.empty()) {
            changed = true;
            names.insert(names.end(), added.begin(), added.end());
        }
    }

    LockDiscovery discovery;
    discovery.complete = !changed;
    discovery.fingerprint = snapshot.fingerprint;
    // Without the catalog's names (an older snapshot, or too many to hold) calls are not looked
    // at, and a wrapper created since the last discovery waits for the next one.
    if (!snapshot.known_names.empty() && snapshot.known_names.size() <= kMaxKnownNames) {
        discovery.known_names = std::make_shared<const protocol::KnownNames>(snapshot.known_names);
    }
    std::vector<LockName>& result = discovery.names;
    for (std::size_t i = 0; i < functions.size(); ++i) {
        const CatalogFunction& f = functions[i];
        const char* kind = f.procedure ? "procedure" : "function";
        if (function_found[i]) {
            result.push_back({f.schema, f.name, kind, LockNameSource::Discovered, {}});
        } else if (!sql_language(f.language)) {
            // C and internal: nothing to read. Other languages: searched as text and nothing
            // found, which proves nothing about code that builds the name at run time.
            result.push_back(
                {f.schema, f.name, kind, LockNameSource::Unknown, "language " + f.language});
        }
    }
    for (std::size_t i = 0; i < snapshot.triggers.size(); ++i) {
        if (!trigger_found[i]) continue;
        const CatalogTrigger& t = snapshot.triggers[i];
        const CatalogFunction& f = functions[functions_by_oid.at(t.function_oid).front()];
        result.push_back({t.table_schema, t.table_name, "table", LockNameSource::TriggerTable,
                          t.trigger_name + " (function " + f.schema + "." + f.name + ")"});
    }
    for (std::size_t i = 0; i < views.size(); ++i) {
        if (view_found[i]) {
            result.push_back({views[i].schema, views[i].name, "view", LockNameSource::View, {}});
        }
    }

    const auto key = [](const LockName& n) { return std::tie(n.source, n.schema, n.name, n.kind); };
    std::sort(result.begin(), result.end(), [&](const LockName& a, const LockName& b) {
        return std::tie(a.source, a.schema, a.name, a.kind, a.detail) <
               std::tie(b.source, b.schema, b.name, b.kind, b.detail);
    });
    // Overloads and a table with many lock-taking triggers: one entry each (the first detail).
    result.erase(
        std::unique(result.begin(), result.end(),
                    [&](const LockName& a, const LockName& b) { return key(a) == key(b); }),
        result.end());
    return discovery;
}

bool trigger_too_large(const std::vector<std::string>& names) {
    std::size_t bytes = 0;
    for (const std::string& name : names)
        bytes += name.size();
    return bytes > kMaxTriggerNameBytes;
}

std::vector<std::string> trigger_names(const std::vector<std::string>& configured,
                                       const std::vector<LockName>& discovered) {
    std::set<std::string> seen;
    std::vector<std::string> names;
    const auto add = [&](const std::string& name) {
        if (seen.insert(name).second) names.push_back(name);
    };
    for (const std::string& name : configured)
        add(name);
    for (const LockName& n : discovered) {
        if (n.source != LockNameSource::Unknown) add(n.name);
    }
    return names;
}

}  // namespace pgtether
