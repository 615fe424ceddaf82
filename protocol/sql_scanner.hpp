// Finds the statements in SQL text that can change session state the pooler must know about.
//
// This is the cheap, over-inclusive *trigger* half of the tether (docs/advisory-locks.md): it never
// decides that a client holds a lock — the backend's pg_locks does — it only decides whether a
// transaction is worth asking about. A miss is dangerous, a false hit costs one probe, so when in
// doubt it reports a hit.
//
// What is looked at (the lexical rules follow PostgreSQL's scan.l, §4.1 "Lexical Structure"):
//  * Function names (kEffectAdvisoryLock, plus `set_config` and `pg_temp`) are found as
//    case-insensitive substrings of every identifier, quoted identifier, string literal (with E''
//    and U&'' escapes decoded as well as raw) and dollar-quoted body, so dynamic SQL in DO blocks
//    and EXECUTE '...' is covered. Only comments at the top level hide a name; inside a string or
//    a body nothing is skipped. A name that merely contains one (my_pg_advisory_lock_wrapper) is a
//    hit: a wrapper of that name very likely takes the lock.
//  * Statement kinds (the other flags) come from the leading keywords of each top-level statement,
//    statements being separated by ';' outside quotes, parentheses, comments and dollar bodies.
//    Bodies of DO blocks and functions are not split into statements.
//
// The server's lexing of '...' depends on standard_conforming_strings, which the scanner is not
// told: if a plain literal contains a backslash, the text is lexed once more with backslash
// escapes in plain literals and the flags of both readings are combined.
//
// Cost: O(n) in the text length with a small constant — one pass over the bytes (two when a
// plain literal contains a backslash; U&'' bodies and the gaps after literals are looked at at
// most twice more), a two-load table step per identifier or body byte, no allocation and no copy.
// Unterminated quotes, dollar bodies and comments run to the end of the text; the rest of the
// text after an unterminated block comment is still searched for names (the server rejects such
// a text, but a difference between its lexing and ours must never hide a name).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/known_names.hpp"
#include "protocol/substring_matcher.hpp"

namespace pgtether::protocol {

// Bit flags, combined with |.
enum SessionEffect : std::uint32_t {
    kEffectNone = 0,
    // A call to a session-level advisory lock or unlock function (pg_advisory_lock[_shared],
    // pg_try_advisory_lock[_shared], pg_advisory_unlock[_shared], pg_advisory_unlock_all), or to
    // one of the configured extra function names. The _xact_ variants alone do not set it.
    kEffectAdvisoryLock = 1u << 0,
    // DISCARD ALL / DISCARD ... (releases session state, including advisory locks).
    kEffectDiscard = 1u << 1,
    // CREATE [OR REPLACE] [GLOBAL|LOCAL] TEMP|TEMPORARY ..., SELECT ... INTO [GLOBAL|LOCAL]
    // TEMP|TEMPORARY ..., any mention of the pg_temp schema, or a DROP statement (which may end
    // a temporary table).
    kEffectTempObject = 1u << 2,
    // LISTEN, UNLISTEN.
    kEffectListen = 1u << 3,
    // DECLARE ... WITH HOLD (a cursor that outlives its transaction), CLOSE.
    kEffectCursor = 1u << 4,
    // SQL-level PREPARE, EXECUTE, DEALLOCATE (not the protocol's Parse/Bind).
    kEffectSqlPrepare = 1u << 5,
    // LOAD (a shared library stays loaded in the backend).
    kEffectLoad = 1u << 6,
    // SET / RESET of a session setting (not SET LOCAL, SET TRANSACTION, SET CONSTRAINTS), or any
    // mention of set_config. SET SESSION CHARACTERISTICS counts: it changes the session's defaults.
    kEffectSet = 1u << 7,
    // CREATE / ALTER / DROP of a FUNCTION, PROCEDURE, ROUTINE, TRIGGER, VIEW or EXTENSION (with
    // OR REPLACE, TEMP, RECURSIVE, CONSTRAINT, ... in between): the statement may change which
    // functions take advisory locks, so the lock-function discovery should run again
    // (proxy/pool/lock_catalog.hpp). Not session state: it never causes a probe.
    kEffectCatalogChange = 1u << 8,
    // DO: an anonymous code block whose effects the text does not show (EXECUTE of a string
    // built at run time can take a lock, LISTEN, SET, or create a temporary table under any
    // name). Every kind of session state is probed at the transaction's end.
    kEffectOpaque = 1u << 9,
    // CREATE (any object, anywhere in the statement) or SELECT ... INTO: may create a relation
    // in the first schema of the search_path, which is the temporary schema when the path
    // names pg_temp first. Not session state by itself: the client adds kEffectTempObject
    // while its search_path names pg_temp (docs/session-state.md).
    kEffectCreate = 1u << 10,
    // A call (a name right before '(') of a name the database's catalog did not know when it was
    // last read (KnownNames): maybe a lock wrapper created since. Comes with kEffectAdvisoryLock,
    // so the transaction is probed; the caller also asks for the catalog to be read again. Only
    // from a scanner given known names.
    kEffectUnknownCall = 1u << 11,
    // SAVEPOINT: the transaction has a subtransaction that ROLLBACK TO may undo. Not session
    // state: a LISTEN inside such a transaction is left to the backend (docs/session-state.md),
    // since pgtether, answering it, could not tell whether a ROLLBACK TO undid it.
    kEffectSavepoint = 1u << 12,
};

class SqlScanner {
  public:
    // `extra_lock_functions`: names (unqualified, any case) that also count as kEffectAdvisoryLock,
    // for user functions that take session locks internally. `known_names`: the database's
    // catalog names; with them, a top-level call of any other name is kEffectUnknownCall.
    explicit SqlScanner(const std::vector<std::string>& extra_lock_functions = {},
                        std::shared_ptr<const KnownNames> known_names = nullptr);

    // Scans one statement text (a Query string, possibly with many statements, or a Parse query).
    [[nodiscard]] std::uint32_t scan(std::string_view sql) const;

    [[nodiscard]] const std::shared_ptr<const KnownNames>& known_names() const {
        return known_names_;
    }

  private:
    SubstringMatcher matcher_;  // the function names, and which flag each one sets
    std::shared_ptr<const KnownNames> known_names_;
};

}  // namespace pgtether::protocol
