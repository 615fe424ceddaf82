// Recognises the one SQL statement pgtether answers for a client in prepared-statement
// translation, a lone `DEALLOCATE [PREPARE] name`, and SQL that names one of pgtether's own
// backend statements.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pgtether::protocol {

// The statement name when `sql` is exactly one DEALLOCATE of a single name (optionally followed
// by ';' and white space), as PostgreSQL would resolve it: unquoted names folded to lower case,
// quoted names verbatim. nullopt for anything else, including DEALLOCATE ALL and text with
// comments (those go to the server unchanged).
std::optional<std::string> parse_lone_deallocate(std::string_view sql);

// Whether `sql` PREPAREs, EXECUTEs or DEALLOCATEs (DEALLOCATE PREPARE) a statement whose name, as
// PostgreSQL resolves it (unquoted: folded to lower case; quoted: verbatim), begins with `prefix`
// -- anywhere in the text outside literals and comments, so `EXPLAIN ANALYZE EXECUTE x` and
// `CREATE TABLE t AS EXECUTE x` count too. Where a plain '...' literal holds a backslash (its end
// depends on standard_conforming_strings) both readings are looked at. Dynamic SQL (a name
// inside a string or a function body) is not seen. `prefix` is lower-case ASCII.
[[nodiscard]] bool names_statement_with_prefix(std::string_view sql, std::string_view prefix);

}  // namespace pgtether::protocol
