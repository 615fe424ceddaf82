// Protocol-level prepared statements under transaction pooling (docs/prepared-statements.md).
//
// A client's named statement (Parse with a name) lives on the backend that parsed it; the client's
// next transaction may run on another backend. pgtether therefore keeps, per client, the name →
// statement mapping, gives every distinct statement (query text + parameter types) one server-side
// name, and prepares it on whichever backend needs it just before use. Three pieces:
//   StatementRegistry — per worker: one PreparedStatement per distinct (query, parameter types),
//                       shared by every client that prepared the same text under any name;
//   ClientStatements  — per client: the names it prepared and what they stand for;
//   ServerStatements  — per backend: which statements are prepared on it, bounded by
//                       max_prepared_statements with least-recently-used eviction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "protocol/bytes.hpp"
#include "protocol/lock_statement.hpp"
#include "protocol/sql_scanner.hpp"

namespace pgtether {

// The bytes of statement text all clients' names stand for, all workers together
// (ClientStatements::bytes summed; max_prepared_statement_bytes_total bounds it: a Parse that
// would pass it is refused). Server connections' prepared sets are bounded per connection instead
// (max_prepared_statement_bytes).
[[nodiscard]] std::size_t client_statement_bytes_in_process();

struct PreparedStatement {
    std::uint64_t id = 0;
    std::string server_name;  // its name on every backend: "pgtether_<token>_<id>"
    std::string query;
    std::string parameter_types;  // the Parse message's Int16 count + Int32 OIDs, as sent
    std::uint32_t effects = 0;    // the tether's trigger findings in the query text
    // Exact lock accounting: the calls when the text is a SELECT of lock calls only
    // (protocol/lock_statement.hpp), null otherwise.
    std::shared_ptr<const protocol::LockCalls> lock_calls;
    // The scanner `effects` came from (a database's tether trigger, proxy/pool/lock_catalog.hpp). A
    // Bind through another one (another database, or the same after a discovery changed its
    // names) scans the text again.
    std::shared_ptr<const protocol::SqlScanner> scanned_with;
    // The text was larger than client_buffer_limit and was streamed to the backend unscanned
    // and not kept (core/message_budget.hpp): `query` is empty, `effects` are assumed, and the
    // statement cannot be prepared on another backend.
    bool text_withheld = false;
};
using StatementPtr = std::shared_ptr<const PreparedStatement>;

// The memory a statement's text holds (max_prepared_statement_bytes counts this).
[[nodiscard]] inline std::size_t statement_bytes(const PreparedStatement& statement) {
    return statement.query.size() + statement.parameter_types.size();
}

class StatementRegistry {
public:
  // Draws the token of its backend names (core/statement_translation.hpp) from the OpenSSL
  // random generator: 64 bits, so a name can be neither guessed nor found by trying.
  StatementRegistry();
  // The statement for this text and these parameter types, created on first use.
  StatementPtr intern(std::string_view query, protocol::ByteSpan parameter_types,
                      std::uint32_t effects,
                      std::shared_ptr<const protocol::SqlScanner> scanned_with = nullptr);
  [[nodiscard]] std::size_t size() const { return by_text_.size(); }

private:
    // Weak: a statement lives as long as a client names it or a backend has it prepared.
    std::unordered_map<std::string, std::weak_ptr<const PreparedStatement>> by_text_;
    std::string token_;
    std::uint64_t next_id_ = 0;
    std::size_t interned_since_sweep_ = 0;
};

class ClientStatements {
public:
    [[nodiscard]] StatementPtr find(std::string_view name) const;
    void add(std::string_view name, StatementPtr statement);
    // Returns what the name stood for (for undoing a removal), or nullptr.
    StatementPtr remove(std::string_view name);
    void clear() { by_name_.reset(); }
    [[nodiscard]] std::size_t size() const { return by_name_ ? by_name_->map.size() : 0; }
    // The text bytes of the statements the names stand for (a text named twice counts twice).
    [[nodiscard]] std::size_t bytes() const { return by_name_ ? by_name_->bytes : 0; }

private:
    // Looked up by string_view without building a std::string (C++20 heterogeneous lookup).
    struct NameHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view name) const {
            return std::hash<std::string_view>{}(name);
        }
    };
    using Map = std::unordered_map<std::string, StatementPtr, NameHash, std::equal_to<>>;
    struct Names {
        Map map;
        std::size_t bytes = 0;
        Names() = default;
        Names(const Names&) = delete;
        Names& operator=(const Names&) = delete;
        // Its bytes leave client_statement_bytes_in_process() with it (a client that goes, a
        // DEALLOCATE ALL).
        ~Names();
        void add_bytes(std::size_t n);
        void remove_bytes(std::size_t n);
    };
    // Allocated on first use: most clients never name a statement, and an empty unordered_map
    // would cost every client 56 bytes (idle memory per client, docs/benchmarks.md).
    std::unique_ptr<Names> by_name_;
};

class ServerStatements {
public:
    [[nodiscard]] bool contains(const PreparedStatement& statement) const {
        return index_.count(statement.id) != 0;
    }
    // Marks a statement as just used (least recently used goes first).
    void touch(const PreparedStatement& statement);
    // Records a statement as prepared; returns the ones evicted to stay within `capacity`
    // statements and `byte_capacity` bytes of text, which the caller closes on the backend.
    // `pinned` statements (needed by messages not yet answered) are never evicted, so the set
    // may exceed the capacity for a moment.
    std::vector<StatementPtr> add(StatementPtr statement, std::size_t capacity,
                                  const std::vector<std::uint64_t>& pinned,
                                  std::size_t byte_capacity = SIZE_MAX);
    void remove(const PreparedStatement& statement);
    void clear();
    [[nodiscard]] std::size_t size() const { return index_.size(); }
    // Text bytes of the statements in the set (stale ones not counted).
    [[nodiscard]] std::size_t bytes() const { return bytes_; }

    // A statement the backend still has under its name, but whose plan must not be used any
    // more: it was planned while the session had temporary objects that are gone now, or it
    // failed with "cached plan must not change result type". It leaves the set above; the next
    // use closes it on the backend and prepares it afresh (take_stale).
    void mark_stale(StatementPtr statement);
    void mark_all_stale();
    // Whether the backend holds a stale copy of `statement`; forgets it (the caller closes it).
    [[nodiscard]] bool take_stale(const PreparedStatement& statement);
    // Stale statements beyond what `capacity` leaves room for, forgotten; the caller closes them.
    std::vector<StatementPtr> trim_stale(std::size_t capacity);

private:
    std::list<StatementPtr> lru_;  // front = most recently used
    std::unordered_map<std::uint64_t, std::list<StatementPtr>::iterator> index_;
    std::vector<StatementPtr> stale_;  // on the backend, not in lru_; almost always empty
    std::size_t bytes_ = 0;            // statement_bytes() of lru_
};

}  // namespace pgtether
