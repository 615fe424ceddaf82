// Recognises the one SQL statement pgtether answers for a client in prepared-statement
// translation: a lone `DEALLOCATE [PREPARE] name`.
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

}  // namespace pgtether::protocol
