// Lock-wrapper discovery, the pure part: which functions, procedures, tables and views of one
// database can take or release a session advisory lock without the statement naming a lock
// function (docs/advisory-locks.md, "Wrappers").
//
// The input is one snapshot of the database's catalog (lock_discovery_query()'s rows): every
// function and procedure with its language and body, every user trigger with its table and
// function, every view with its definition. The output is the list of names the tether's trigger
// must match in that database, each with how it was found:
//   * a function whose body calls a session lock function (pg_advisory_lock & co, not the _xact_
//     ones) or a configured name, or — to a fixed point — any name already found (a wrapper that
//     calls a wrapper, a function that inserts into a table whose trigger locks, ...);
//   * a table that has a trigger whose function was found: a statement naming the table may fire
//   it;
//   * a view whose definition mentions a name found: a statement naming the view may call it.
// Bodies are scanned by protocol::SqlScanner, so names match as it matches them in client text:
// any case, schema-qualified, quoted, inside string literals (EXECUTE '...') and nested bodies.
// Functions in C or `internal` have no body to read: they are reported as unknown, never guessed;
// bodies in other languages (PL/Python, PL/Perl, ...) are searched as text, and reported as unknown
// when nothing is found (their code can build a name the search cannot see).
//
// Pure (core/): proxy/pool/lock_catalog.hpp runs the query on a side connection and applies the
// result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/query_result.hpp"  // Row
#include "protocol/known_names.hpp"

namespace pgtether {

struct CatalogFunction {
    std::string oid;
    std::string schema;
    std::string name;
    std::string language;  // pg_language.lanname
    bool procedure = false;
    std::string body;  // prosrc, or the deparsed SQL-standard body (BEGIN ATOMIC / RETURN)
};

struct CatalogTrigger {
    std::string function_oid;
    std::string table_schema;
    std::string table_name;
    std::string trigger_name;
};

struct CatalogView {
    std::string schema;
    std::string name;
    std::string definition;  // pg_get_viewdef()
};

struct CatalogSnapshot {
    std::vector<CatalogFunction> functions;
    std::vector<CatalogTrigger> triggers;
    std::vector<CatalogView> views;
    // Every function, relation, type, access method and keyword name, for spotting calls of a
    // function created since (protocol/known_names.hpp).
    std::vector<std::string> known_names;
    // catalog_fingerprint_query()'s value in the same snapshot.
    std::string fingerprint;
};

// One query for the whole snapshot: seven text columns, the first saying which kind of row it is
// ('f' function, 't' trigger, 'v' view, 'n' a known name, 'c' the catalog's fingerprint in the
// same snapshot). System schemas (pg_catalog,
// information_schema, pg_toast) are left out of the functions and views: their functions are the
// built-in ones. Works on PostgreSQL 11 and later.
const char* lock_discovery_query();
// One text value that changes whenever a function, procedure, trigger or view is created,
// replaced, altered or dropped: read every advisory_lock_catalog_check_interval on an idle pooled
// backend, so that discovery runs again only when it moves. Its last '/'-separated part counts
// the optional event trigger `pgtether_catalog` (enabled).
const char* catalog_fingerprint_query();
// Whether a fingerprint says the optional event trigger is installed and enabled.
[[nodiscard]] bool fingerprint_has_notify_trigger(std::string_view fingerprint);
// nullopt when a row is not what the query returns.
std::optional<CatalogSnapshot> decode_lock_discovery(const std::vector<Row>& rows);

// How a name came to be in a database's trigger.
enum class LockNameSource : std::uint8_t {
    Builtin,       // pg_advisory_lock and friends
    Configured,    // advisory_lock_functions
    Discovered,    // a function or procedure whose body takes or releases locks
    TriggerTable,  // a table with a trigger whose function does
    View,          // a view whose definition calls a wrapper
    Unknown,       // a function whose body cannot be read (C, internal, ...): not in the trigger
};
const char* to_string(LockNameSource source);

struct LockName {
    std::string schema;  // empty for builtin and unqualified configured names
    std::string name;
    std::string kind;  // "function", "procedure", "table", "view"
    LockNameSource source = LockNameSource::Discovered;
    std::string detail;  // TriggerTable: "T (function S.F)", T the trigger; Unknown: "language c"

    bool operator==(const LockName&) const = default;
};

// The session lock functions the scanner always matches.
const std::vector<std::string>& builtin_lock_functions();

// A database with more names than this (relations, mostly) keeps no known-names set: the memory
// would grow with the schema, and the change check still catches new wrappers within a second.
inline constexpr std::size_t kMaxKnownNames = 200'000;

struct LockDiscovery {
    std::vector<LockName> names;
    // The snapshot's known names (null: none, or more than kMaxKnownNames). Immutable and
    // shared by every worker's scanner of the database.
    std::shared_ptr<const protocol::KnownNames> known_names;
    // The catalog's fingerprint when it was read: the catalog watch's baseline.
    std::string fingerprint;
    // False when the fixed point was cut short (more than kMaxDiscoveryRounds rounds, or names
    // past kMaxTriggerNameBytes): the names are incomplete, so every transaction in the database
    // must be probed.
    bool complete = true;
};

// Wrapper chains deeper than this (a wrapper calling a wrapper calling ...) are not followed to
// the end: each round rebuilds a scanner and rescans every body, and discovery runs on the
// worker's loop, so a schema must not be able to make it run for long.
inline constexpr int kMaxDiscoveryRounds = 16;

// Every name of `snapshot` that can take or release a session lock, found to a fixed point,
// starting from the built-in lock functions and `configured`; then the unknown functions. The
// builtin and configured names themselves are not in the result. Ordered by source, then schema,
// then name; one entry per (source, schema, name, kind) — overloads collapse into one.
LockDiscovery discover_lock_names(const CatalogSnapshot& snapshot,
                                  const std::vector<std::string>& configured);

// The names to add to the database's trigger (protocol::SqlScanner's extra names): the
// configured ones and every discovered, trigger-table and view name, unqualified, without
// duplicates.
std::vector<std::string> trigger_names(const std::vector<std::string>& configured,
                                       const std::vector<LockName>& discovered);

// The scanner's automaton grows with the names' total length (a table row per name byte): past
// this many bytes of names, a database's trigger is not built from them — every transaction
// there is probed instead (safe, and what so many wrappers would cost anyway), and the fixed
// point stops early. Bounds what a database's schema can make pgtether hold (~10 MB).
inline constexpr std::size_t kMaxTriggerNameBytes = 64 * 1024;
[[nodiscard]] bool trigger_too_large(const std::vector<std::string>& names);

}  // namespace pgtether
