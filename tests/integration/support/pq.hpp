// libpq helpers: an RAII connection, results copied into plain values, conninfo builders, and
// doctest assertions that print the server's error on failure.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/support/test_env.hpp"

namespace pgtether::itest {

using Params = std::vector<std::optional<std::string>>;  // nullopt = SQL NULL

// A NoticeResponse as libpq delivered it.
struct Notice {
    std::string severity;  // non-localized (PG_DIAG_SEVERITY_NONLOCALIZED): NOTICE, WARNING, ...
    std::string sqlstate;
    std::string message;
    std::string detail;
    std::string hint;
};

// One PGresult, copied so it outlives the PGresult and can be compared.
struct Result {
    ExecStatusType status = PGRES_FATAL_ERROR;
    std::vector<std::string> columns;
    std::vector<Oid> column_types;
    std::vector<Oid> param_types;                               // only from describe_prepared()
    std::vector<std::vector<std::optional<std::string>>> rows;  // text format; nullopt = NULL
    std::string command_tag;                                    // PQcmdStatus: "SELECT 1", ...
    // Error fields (empty unless the result is an error).
    std::string severity;  // non-localized
    std::string sqlstate;
    std::string message;  // primary message
    std::string detail;
    std::string hint;
    std::string error_text;  // PQresultErrorMessage, for humans

    static Result from(const PGresult* res);
    // A result for a failure on the client side (no PGresult at all, e.g. connection lost).
    static Result client_error(const std::string& text);

    [[nodiscard]] bool ok() const;        // COMMAND_OK, TUPLES_OK, EMPTY_QUERY, SINGLE_TUPLE,
                                          // COPY_*, PIPELINE_SYNC
    [[nodiscard]] bool is_error() const;  // FATAL_ERROR or NONFATAL_ERROR
    [[nodiscard]] std::string status_name() const { return PQresStatus(status); }
    // The text of a cell; throws std::out_of_range, and std::runtime_error for NULL.
    [[nodiscard]] const std::string& value(std::size_t row = 0, std::size_t col = 0) const;
    [[nodiscard]] bool is_null(std::size_t row, std::size_t col) const;
    // One line for assertion messages: status, tag, rows or the error.
    [[nodiscard]] std::string describe() const;
};

// An RAII libpq connection. Construction never throws: check ok() / error(). Notices are collected
// (a notice receiver replaces libpq's default, which prints to stderr) until take_notices().
class Conn {
  public:
    explicit Conn(const std::string& conninfo);
    Conn(Conn&&) noexcept = default;
    Conn& operator=(Conn&& other) noexcept;
    ~Conn();

    // Connects or throws std::runtime_error with libpq's message.
    static Conn must(const std::string& conninfo);

    [[nodiscard]] bool ok() const;            // CONNECTION_OK
    [[nodiscard]] std::string error() const;  // PQerrorMessage, trailing newline removed
    [[nodiscard]] PGconn* raw() const { return state_->conn; }
    [[nodiscard]] int backend_pid() const { return PQbackendPID(state_->conn); }
    [[nodiscard]] PGTransactionStatusType transaction_status() const {
        return PQtransactionStatus(state_->conn);
    }
    // A ParameterStatus value the server reported ("" if none).
    [[nodiscard]] std::string parameter(const std::string& name) const;

    // Simple query protocol; the last result only (PQexec).
    Result exec(const std::string& sql);
    // Simple query protocol; every result of a multi-statement string, in order.
    std::vector<Result> exec_all(const std::string& sql);
    // Extended protocol, unnamed statement, text parameters of unspecified type.
    Result exec_params(const std::string& sql, const Params& params);
    Result prepare(const std::string& name, const std::string& sql);
    Result exec_prepared(const std::string& name, const Params& params);
    Result describe_prepared(const std::string& name);
    // exec(), but throws std::runtime_error unless the result is ok() (for test set-up steps).
    Result exec_ok(const std::string& sql);

    std::vector<Notice> take_notices();
    // Closes the connection (sends Terminate); ok() is false afterwards.
    void close();

  private:
    // Heap-allocated so the notice receiver's pointer survives moves of Conn.
    struct State {
        PGconn* conn = nullptr;
        std::vector<Notice> notices;
    };
    std::unique_ptr<State> state_;
};

// Quotes a conninfo value: 'value' with \ and ' backslash-escaped (libpq "Connection Strings").
std::string conninfo_quote(const std::string& value);

// host/port/user/dbname[/password] plus `extra` (raw "key=value ..."), with sslmode and
// gssencmode disabled and a connect timeout, so a test never waits on a negotiation it did not
// ask for.
std::string make_conninfo(const std::string& host, int port, const std::string& user,
                          const std::string& dbname, const std::string& password = "",
                          const std::string& extra = "");

// Straight to the throwaway PostgreSQL over TCP; user defaults to the superuser, dbname to the test
// database.
std::string direct_conninfo(const std::string& user = "", const std::string& dbname = "",
                            const std::string& password = "", const std::string& extra = "",
                            const TestEnv& env = TestEnv::get());

}  // namespace pgtether::itest

// doctest assertions on a Result (the expression is evaluated once). Include doctest before use.
#define PGT_CHECK_OK(result_expr)                                \
    do {                                                         \
        const auto& pgt_result_ = (result_expr);                 \
        CHECK_MESSAGE(pgt_result_.ok(), pgt_result_.describe()); \
    } while (false)
#define PGT_REQUIRE_OK(result_expr)                                \
    do {                                                           \
        const auto& pgt_result_ = (result_expr);                   \
        REQUIRE_MESSAGE(pgt_result_.ok(), pgt_result_.describe()); \
    } while (false)
// The result is an error with this SQLSTATE.
#define PGT_CHECK_SQLSTATE(result_expr, expected_sqlstate)                                  \
    do {                                                                                    \
        const auto& pgt_result_ = (result_expr);                                            \
        CHECK_MESSAGE(pgt_result_.is_error(), pgt_result_.describe());                      \
        CHECK_MESSAGE(pgt_result_.sqlstate == (expected_sqlstate), pgt_result_.describe()); \
    } while (false)
