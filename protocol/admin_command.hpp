// The admin console's command grammar (PgBouncer's src/admin.c), as a pure parser.
//
// A console query is one command, optionally followed by a semicolon:
//
//   WORD [WORD] [;]                      SHOW POOLS, PAUSE mydb, RELOAD, KILL_CLIENT 12 ...
//   SET WORD (= | TO) (WORD | STRING) [;]   SET default_pool_size = 30, SET x TO 'a b'
//
// WORD is either a run of letters, digits and underscores, or a double-quoted identifier in which
// "" stands for one quote ("my db"). STRING is a single-quoted literal in which '' stands for one
// quote. Whitespace is space, tab, CR or LF. Like PgBouncer, the parser accepts no more than that:
// no multi-statement strings, no comments, no SQL. Unquoted values are kept as written (a database
// name is case-sensitive); the command word is lower-cased, because commands are case-insensitive.
// Differences from PgBouncer's regular expressions: `TO` must stand apart from the key and value
// (PgBouncer would also read `SET xtoy` as `SET x TO y`), and argument lengths are bounded by the
// limits below instead of PgBouncer's 64/256-byte buffers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pgtether::protocol {

struct AdminCommand {
    std::string verb;      // lower-cased: "show", "pause", ..., "set" for the SET form
    std::string argument;  // the second word, unquoted ("" when absent); for SET, the key
    std::string value;     // SET only: the value, unquoted
    bool is_set = false;   // the SET key = value form
};

enum class AdminParseError {
    None,
    Syntax,   // not a console command: PgBouncer's "invalid command '...', use SHOW HELP;"
    TooLong,  // a word or value longer than the limits below
};

struct AdminParseResult {
    std::optional<AdminCommand> command;
    AdminParseError error = AdminParseError::None;
};

// Bounds on what a command may carry. Database and user names are at most 63 bytes in
// PostgreSQL; configuration values (server_reset_query, ...) get more room.
inline constexpr std::size_t kAdminMaxWord = 256;
inline constexpr std::size_t kAdminMaxValue = 8192;

[[nodiscard]] AdminParseResult parse_admin_command(std::string_view query);

}  // namespace pgtether::protocol
