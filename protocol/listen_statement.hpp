// Recognises the statements pgtether answers itself when it multiplexes LISTEN
// (docs/session-state.md, "LISTEN and NOTIFY"): a string made of nothing but LISTEN and UNLISTEN.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgtether::protocol {

struct ListenOp {
    enum class Kind { Listen, Unlisten, UnlistenAll };
    Kind kind = Kind::Listen;
    std::string channel;  // as PostgreSQL names it: unquoted folded to lower case; empty for *

    bool operator==(const ListenOp&) const = default;
};

// PostgreSQL's NAMEDATALEN - 1: a longer identifier is truncated (with a NOTICE).
inline constexpr std::size_t kMaxIdentifierBytes = 63;

// The operations of `sql` when it consists only of `LISTEN channel`, `UNLISTEN channel` and
// `UNLISTEN *` statements (one or more, separated by ';', with white space and comments
// anywhere), in order, each channel resolved as PostgreSQL resolves it (unquoted: ASCII folded to
// lower case; quoted: verbatim, "" a quote). nullopt for anything else and for what PostgreSQL
// would answer otherwise than with plain CommandCompletes: a syntax error, a reserved word as a
// name, an empty quoted name, a name it would truncate, a U&"..." name, an empty string. Those
// go to the backend, which gives its own answer.
std::optional<std::vector<ListenOp>> parse_listen_only(std::string_view sql);

// The command tag PostgreSQL answers `op` with: "LISTEN" or "UNLISTEN".
std::string_view listen_command_tag(const ListenOp& op);

// `name` as a double-quoted identifier ("" for each quote inside), safe to splice into SQL.
std::string quote_identifier(std::string_view name);

}  // namespace pgtether::protocol
