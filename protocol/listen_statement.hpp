// Recognises the statements pgtether answers itself when it multiplexes LISTEN
// (docs/session-state.md, "LISTEN and NOTIFY"): a string made of nothing but LISTEN and UNLISTEN,
// and the LISTEN/UNLISTEN statements of a string that mixes them with others.
#pragma once

#include <cstddef>
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

// A simple Query that mixes LISTEN/UNLISTEN statements with others (docs/session-state.md,
// "LISTEN and NOTIFY"): the text the backend runs in its place. Each LISTEN/UNLISTEN statement
// (with the white space and comments around it, up to its ';') becomes kListenStandIn, a
// statement that changes nothing and takes no snapshot, whose result row pgtether swallows and
// whose CommandComplete it replaces with the LISTEN's. The backend so runs the other statements
// as sent, as many statements in one implicit transaction as before, and the replies keep their
// order.
inline constexpr std::string_view kListenStandIn = "SHOW datestyle";

struct ListenSplice {
    std::string sql;  // what the backend runs
    // The client's top-level statements, in order: a replaced LISTEN/UNLISTEN's operation, or
    // nullopt for one the backend runs as sent.
    std::vector<std::optional<ListenOp>> statements;
    // Where `sql` has a stand-in: its offset there, and the offset and length in the client's
    // text of the statement it replaces.
    struct Replacement {
        std::size_t at = 0;
        std::size_t client_at = 0;
        std::size_t client_length = 0;
    };
    std::vector<Replacement> replacements;

    // An ErrorResponse's position (its 'P' field: 1-based, in characters) in `sql`, as a
    // position in the client's text; one inside a stand-in is its statement's start.
    [[nodiscard]] std::size_t client_position(std::size_t position) const;
};

// The splice of `sql`, or nullopt where pgtether leaves the text to the backend as it is: no
// LISTEN/UNLISTEN in it, or nothing else; a LISTEN/UNLISTEN statement parse_listen_only does not
// take (the backend gives its own answer); a statement that controls transactions (BEGIN,
// START, COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE, PREPARE: whether a LISTEN takes effect
// would depend on where it stands) or a COPY; a byte above 0x7F (positions count characters,
// which only in ASCII are the bytes); a text whose statements pgtether might split otherwise
// than the server (split_sql_statements).
std::optional<ListenSplice> splice_listen_statements(std::string_view sql);

// The command tag PostgreSQL answers `op` with: "LISTEN" or "UNLISTEN".
std::string_view listen_command_tag(const ListenOp& op);

// `name` as a double-quoted identifier ("" for each quote inside), safe to splice into SQL.
std::string quote_identifier(std::string_view name);

}  // namespace pgtether::protocol
