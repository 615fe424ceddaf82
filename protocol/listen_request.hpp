// LISTEN multiplexing (docs/session-state.md, "LISTEN and NOTIFY"): whether the request at the
// start of a client's input, between its transactions or inside an open one, is one pgtether
// answers itself, and the answer PostgreSQL would give. Pure: bytes in, a decision and the reply
// out.
//
// Answered: a simple Query made of nothing but LISTEN/UNLISTEN statements (parse_listen_only),
// or an extended-protocol batch of one such statement -- Parse of the unnamed statement, then its
// Bind, Describe and Execute, up to Sync: what psycopg, pgjdbc, node-postgres and libpq's
// PQexecParams send.
//
// A request may arrive in pieces (a batch over several writes, a message over two reads). While
// what has arrived is the start of such a request, and small enough for the caller to hold, the
// answer is Incomplete: wait for more input rather than send it to a backend, where the LISTEN
// would tether the client. A batch that Flushes before its Sync is not waited for: its client may
// be waiting for the replies before it sends the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/listen_statement.hpp"

namespace pgtether::protocol {

struct ListenRequest {
    enum class Kind : std::uint8_t {
        Other,       // not one pgtether answers: it goes to a backend
        Incomplete,  // the start of one; nothing is consumed until the rest is here
        Answered,    // `consumed` bytes, answered by `reply`
    };
    Kind kind = Kind::Other;
    std::vector<ListenOp> ops;  // Answered: what the request does, in order
    std::string reply;          // Answered: PostgreSQL's messages, up to ReadyForQuery
    std::size_t consumed = 0;   // Answered: the request's bytes
};

// `max_message`: the largest message looked at (longer ones are Other). `wait_limit`: Incomplete
// only while the request's bytes -- those here and the announced rest of a message begun --
// stay below it; beyond, Other. `tx_status`: the ReadyForQuery status the reply ends with
// ('I' between transactions, 'T' inside one).
[[nodiscard]] ListenRequest recognise_listen_request(ByteSpan data, std::uint32_t max_message,
                                                     std::size_t wait_limit, char tx_status);

}  // namespace pgtether::protocol
