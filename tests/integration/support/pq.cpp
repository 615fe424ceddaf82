// libpq helpers for integration tests.
#include "tests/integration/support/pq.hpp"

#include <sstream>
#include <stdexcept>

namespace pgtether::itest {

namespace {

std::string field(const PGresult* res, int code) {
    const char* value = PQresultErrorField(res, code);
    return value != nullptr ? value : "";
}

std::string chomp(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
        s.pop_back();
    return s;
}

void notice_receiver(void* arg, const PGresult* res) {
    auto* notices = static_cast<std::vector<Notice>*>(arg);
    notices->push_back({field(res, PG_DIAG_SEVERITY_NONLOCALIZED), field(res, PG_DIAG_SQLSTATE),
                        field(res, PG_DIAG_MESSAGE_PRIMARY), field(res, PG_DIAG_MESSAGE_DETAIL),
                        field(res, PG_DIAG_MESSAGE_HINT)});
}

// libpq wants parallel arrays of C strings; nullptr is NULL.
struct ParamArrays {
    explicit ParamArrays(const Params& params) {
        for (const auto& p : params)
            values.push_back(p ? p->c_str() : nullptr);
    }
    [[nodiscard]] int count() const { return static_cast<int>(values.size()); }
    [[nodiscard]] const char* const* data() const {
        return values.empty() ? nullptr : values.data();
    }
    std::vector<const char*> values;
};

Result take(PGresult* res, PGconn* conn) {
    if (res == nullptr) return Result::client_error(chomp(PQerrorMessage(conn)));
    Result r = Result::from(res);
    PQclear(res);
    return r;
}

}  // namespace

Result Result::from(const PGresult* res) {
    Result r;
    r.status = PQresultStatus(res);
    r.command_tag = PQcmdStatus(const_cast<PGresult*>(res));
    int ncols = PQnfields(res);
    for (int c = 0; c < ncols; ++c) {
        const char* name = PQfname(res, c);  // NULL for COPY results, which have no names
        r.columns.emplace_back(name ? name : "");
        r.column_types.push_back(PQftype(res, c));
    }
    for (int i = 0; i < PQnparams(res); ++i)
        r.param_types.push_back(PQparamtype(res, i));
    int nrows = PQntuples(res);
    for (int row = 0; row < nrows; ++row) {
        std::vector<std::optional<std::string>> cells;
        for (int c = 0; c < ncols; ++c) {
            if (PQgetisnull(res, row, c)) {
                cells.emplace_back(std::nullopt);
            } else {
                cells.emplace_back(std::string(PQgetvalue(res, row, c),
                                               static_cast<std::size_t>(PQgetlength(res, row, c))));
            }
        }
        r.rows.push_back(std::move(cells));
    }
    if (r.is_error()) {
        r.severity = field(res, PG_DIAG_SEVERITY_NONLOCALIZED);
        r.sqlstate = field(res, PG_DIAG_SQLSTATE);
        r.message = field(res, PG_DIAG_MESSAGE_PRIMARY);
        r.detail = field(res, PG_DIAG_MESSAGE_DETAIL);
        r.hint = field(res, PG_DIAG_MESSAGE_HINT);
        r.error_text = chomp(PQresultErrorMessage(res));
        // libpq's own errors (lost connection, ...) have no fields: keep the text as the message.
        if (r.message.empty()) r.message = r.error_text;
    }
    return r;
}

Result Result::client_error(const std::string& text) {
    Result r;
    r.status = PGRES_FATAL_ERROR;
    r.message = text;
    r.error_text = text;
    return r;
}

bool Result::ok() const {
    switch (status) {
        case PGRES_COMMAND_OK:
        case PGRES_TUPLES_OK:
        case PGRES_EMPTY_QUERY:
        case PGRES_SINGLE_TUPLE:
        case PGRES_COPY_IN:
        case PGRES_COPY_OUT:
        case PGRES_COPY_BOTH:
        case PGRES_PIPELINE_SYNC:
            return true;
        default:
            return false;
    }
}

bool Result::is_error() const {
    return status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR;
}

const std::string& Result::value(std::size_t row, std::size_t col) const {
    const auto& cell = rows.at(row).at(col);
    if (!cell) {
        throw std::runtime_error("NULL at row " + std::to_string(row) + " column " +
                                 std::to_string(col));
    }
    return *cell;
}

bool Result::is_null(std::size_t row, std::size_t col) const {
    return !rows.at(row).at(col);
}

std::string Result::describe() const {
    std::ostringstream out;
    out << status_name();
    if (!command_tag.empty()) out << " [" << command_tag << "]";
    if (is_error()) {
        out << " " << severity << " " << sqlstate << ": " << message;
        if (!detail.empty()) out << " DETAIL: " << detail;
    } else if (!rows.empty()) {
        out << " first row:";
        for (const auto& cell : rows.front())
            out << " " << (cell ? *cell : "NULL");
    }
    return out.str();
}

Conn::Conn(const std::string& conninfo) : state_(std::make_unique<State>()) {
    state_->conn = PQconnectdb(conninfo.c_str());
    if (state_->conn != nullptr) {
        PQsetNoticeReceiver(state_->conn, notice_receiver, &state_->notices);
    }
}

Conn& Conn::operator=(Conn&& other) noexcept {
    if (this != &other) {
        if (state_) close();
        state_ = std::move(other.state_);
    }
    return *this;
}

Conn::~Conn() {
    if (state_) close();
}

Conn Conn::must(const std::string& conninfo) {
    Conn conn(conninfo);
    if (!conn.ok()) throw std::runtime_error("cannot connect (" + conninfo + "): " + conn.error());
    return conn;
}

bool Conn::ok() const {
    return state_->conn != nullptr && PQstatus(state_->conn) == CONNECTION_OK;
}

std::string Conn::error() const {
    if (state_->conn == nullptr) return "not connected";
    return chomp(PQerrorMessage(state_->conn));
}

std::string Conn::parameter(const std::string& name) const {
    const char* value = PQparameterStatus(state_->conn, name.c_str());
    return value != nullptr ? value : "";
}

Result Conn::exec(const std::string& sql) {
    return take(PQexec(state_->conn, sql.c_str()), state_->conn);
}

std::vector<Result> Conn::exec_all(const std::string& sql) {
    std::vector<Result> results;
    if (!PQsendQuery(state_->conn, sql.c_str())) {
        results.push_back(Result::client_error(chomp(PQerrorMessage(state_->conn))));
        return results;
    }
    while (PGresult* res = PQgetResult(state_->conn)) {
        results.push_back(Result::from(res));
        PQclear(res);
    }
    return results;
}

Result Conn::exec_params(const std::string& sql, const Params& params) {
    ParamArrays p(params);
    return take(
        PQexecParams(state_->conn, sql.c_str(), p.count(), nullptr, p.data(), nullptr, nullptr, 0),
        state_->conn);
}

Result Conn::prepare(const std::string& name, const std::string& sql) {
    return take(PQprepare(state_->conn, name.c_str(), sql.c_str(), 0, nullptr), state_->conn);
}

Result Conn::exec_prepared(const std::string& name, const Params& params) {
    ParamArrays p(params);
    return take(
        PQexecPrepared(state_->conn, name.c_str(), p.count(), p.data(), nullptr, nullptr, 0),
        state_->conn);
}

Result Conn::describe_prepared(const std::string& name) {
    return take(PQdescribePrepared(state_->conn, name.c_str()), state_->conn);
}

Result Conn::exec_ok(const std::string& sql) {
    Result r = exec(sql);
    if (!r.ok()) throw std::runtime_error("query failed: " + sql + "\n  " + r.describe());
    return r;
}

std::vector<Notice> Conn::take_notices() {
    std::vector<Notice> out;
    out.swap(state_->notices);
    return out;
}

void Conn::close() {
    if (state_->conn != nullptr) {
        PQfinish(state_->conn);
        state_->conn = nullptr;
    }
}

std::string conninfo_quote(const std::string& value) {
    std::string out = "'";
    for (char c : value) {
        if (c == '\\' || c == '\'') out += '\\';
        out += c;
    }
    return out + "'";
}

std::string make_conninfo(const std::string& host, int port, const std::string& user,
                          const std::string& dbname, const std::string& password,
                          const std::string& extra) {
    std::string s = "host=" + conninfo_quote(host) + " port=" + std::to_string(port) +
                    " user=" + conninfo_quote(user) + " dbname=" + conninfo_quote(dbname) +
                    " sslmode=disable gssencmode=disable connect_timeout=10";
    if (!password.empty()) s += " password=" + conninfo_quote(password);
    if (!extra.empty()) s += " " + extra;
    return s;
}

std::string direct_conninfo(const std::string& user, const std::string& dbname,
                            const std::string& password, const std::string& extra,
                            const TestEnv& env) {
    return make_conninfo(env.pg_host, env.pg_port, user.empty() ? env.superuser : user,
                         dbname.empty() ? env.database : dbname, password, extra);
}

}  // namespace pgtether::itest
