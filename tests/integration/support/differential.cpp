// Differential testing of two client sessions.
#include "tests/integration/support/differential.hpp"

#include <algorithm>
#include <sstream>

namespace pgtether::itest {

namespace {

std::string shorten(std::string_view s, std::size_t max = 70) {
    std::string out;
    for (char c : s)
        out += (c == '\n' || c == '\t') ? ' ' : c;
    if (out.size() > max) out = out.substr(0, max - 3) + "...";
    return out;
}

std::string render_params(const Params& params) {
    std::string out = "(";
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (i > 0) out += ", ";
        out += params[i] ? "'" + *params[i] + "'" : "NULL";
    }
    return out + ")";
}

const char* transaction_status_name(PGTransactionStatusType status) {
    switch (status) {
        case PQTRANS_IDLE:
            return "idle";
        case PQTRANS_ACTIVE:
            return "active";
        case PQTRANS_INTRANS:
            return "in transaction";
        case PQTRANS_INERROR:
            return "in failed transaction";
        case PQTRANS_UNKNOWN:
            break;
    }
    return "unknown";
}

// Collects every result of the current command until PQgetResult returns NULL.
void drain(PGconn* conn, std::vector<Result>& results) {
    while (PGresult* res = PQgetResult(conn)) {
        results.push_back(Result::from(res));
        PQclear(res);
    }
}

bool send_in_pipeline(PGconn* conn, const Step& step) {
    Params none;
    const Params& params = step.kind == Step::Kind::Simple ? none : step.params;
    std::vector<const char*> values;
    for (const auto& p : params)
        values.push_back(p ? p->c_str() : nullptr);
    const char* const* data = values.empty() ? nullptr : values.data();
    int count = static_cast<int>(values.size());
    switch (step.kind) {
        case Step::Kind::Simple:
        case Step::Kind::Extended:
            return PQsendQueryParams(conn, step.sql.c_str(), count, nullptr, data, nullptr, nullptr,
                                     0) == 1;
        case Step::Kind::Prepare:
            return PQsendPrepare(conn, step.name.c_str(), step.sql.c_str(), 0, nullptr) == 1;
        case Step::Kind::ExecPrepared:
            return PQsendQueryPrepared(conn, step.name.c_str(), count, data, nullptr, nullptr, 0) ==
                   1;
        case Step::Kind::Describe:
            return PQsendDescribePrepared(conn, step.name.c_str()) == 1;
        case Step::Kind::Pipeline:
            break;
    }
    return false;
}

std::vector<Result> run_pipeline(Conn& conn, const Step& step) {
    PGconn* pg = conn.raw();
    std::vector<Result> results;
    auto client_error = [&](const std::string& what) {
        results.push_back(Result::client_error(what + ": " + PQerrorMessage(pg)));
    };
    if (PQenterPipelineMode(pg) != 1) {
        client_error("PQenterPipelineMode");
        return results;
    }
    std::size_t sent = 0;
    for (const auto& sub : step.steps) {
        if (!send_in_pipeline(pg, sub)) {
            client_error("sending pipeline step " + sub.label());
            break;
        }
        ++sent;
    }
    if (PQpipelineSync(pg) != 1) client_error("PQpipelineSync");
    // Each command's results end with a NULL from PQgetResult; after an error the server skips to
    // the Sync and libpq reports the skipped commands as PGRES_PIPELINE_ABORTED.
    for (std::size_t i = 0; i < sent && PQstatus(pg) == CONNECTION_OK; ++i)
        drain(pg, results);
    // Then the Sync's own result (PGRES_PIPELINE_SYNC). Bounded: a dead connection yields NULLs.
    for (int guard = 0; guard < 100 && PQstatus(pg) == CONNECTION_OK; ++guard) {
        PGresult* res = PQgetResult(pg);
        if (res == nullptr) continue;
        bool is_sync = PQresultStatus(res) == PGRES_PIPELINE_SYNC;
        results.push_back(Result::from(res));
        PQclear(res);
        if (is_sync) break;
    }
    if (PQexitPipelineMode(pg) != 1) {
        client_error("PQexitPipelineMode");
        drain(pg, results);
    }
    return results;
}

std::vector<Result> run_step(Conn& conn, const Step& step) {
    switch (step.kind) {
        case Step::Kind::Simple:
            return conn.exec_all(step.sql);
        case Step::Kind::Extended:
            return {conn.exec_params(step.sql, step.params)};
        case Step::Kind::Prepare:
            return {conn.prepare(step.name, step.sql)};
        case Step::Kind::ExecPrepared:
            return {conn.exec_prepared(step.name, step.params)};
        case Step::Kind::Describe:
            return {conn.describe_prepared(step.name)};
        case Step::Kind::Pipeline:
            return run_pipeline(conn, step);
    }
    return {};
}

// Longest-common-subsequence line diff; the blocks are a few dozen lines at most.
std::vector<std::string> line_diff(const std::vector<std::string>& a,
                                   const std::vector<std::string>& b) {
    std::size_t n = a.size(), m = b.size();
    std::vector<std::vector<std::size_t>> lcs(n + 1, std::vector<std::size_t>(m + 1, 0));
    for (std::size_t i = n; i-- > 0;) {
        for (std::size_t j = m; j-- > 0;) {
            lcs[i][j] =
                a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
        }
    }
    std::vector<std::string> out;
    std::size_t i = 0, j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && a[i] == b[j]) {
            out.push_back("    " + a[i++]);
            ++j;
        } else if (j >= m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1])) {
            out.push_back("  - " + a[i++]);
        } else {
            out.push_back("  + " + b[j++]);
        }
    }
    return out;
}

}  // namespace

std::string Step::label() const {
    switch (kind) {
        case Kind::Simple:
            return "simple: " + shorten(sql);
        case Kind::Extended:
            return "params: " + shorten(sql) + " " + render_params(params);
        case Kind::Prepare:
            return "prepare " + name + ": " + shorten(sql);
        case Kind::ExecPrepared:
            return "execute " + name + " " + render_params(params);
        case Kind::Describe:
            return "describe " + name;
        case Kind::Pipeline: {
            std::string out = "pipeline [";
            for (std::size_t i = 0; i < steps.size(); ++i) {
                out += (i > 0 ? "; " : "") + steps[i].label();
            }
            return shorten(out + "]", 160);
        }
    }
    return "?";
}

namespace steps {
Step simple(std::string sql) {
    return {Step::Kind::Simple, std::move(sql), {}, {}, {}};
}
Step params(std::string sql, Params params) {
    return {Step::Kind::Extended, std::move(sql), {}, std::move(params), {}};
}
Step prepare(std::string name, std::string sql) {
    return {Step::Kind::Prepare, std::move(sql), std::move(name), {}, {}};
}
Step exec_prepared(std::string name, Params params) {
    return {Step::Kind::ExecPrepared, {}, std::move(name), std::move(params), {}};
}
Step describe(std::string name) {
    return {Step::Kind::Describe, {}, std::move(name), {}, {}};
}
Step pipeline(std::vector<Step> sub_steps) {
    return {Step::Kind::Pipeline, {}, {}, {}, std::move(sub_steps)};
}
}  // namespace steps

Transcript run_steps(Conn& conn, const std::vector<Step>& steps) {
    Transcript transcript;
    for (const auto& step : steps) {
        StepOutcome outcome;
        outcome.results = run_step(conn, step);
        outcome.notices = conn.take_notices();
        outcome.transaction_status = conn.transaction_status();
        outcome.connection_ok = conn.ok();
        transcript.push_back(std::move(outcome));
    }
    return transcript;
}

std::vector<std::string> render(const StepOutcome& outcome) {
    std::vector<std::string> lines;
    for (std::size_t i = 0; i < outcome.results.size(); ++i) {
        const Result& r = outcome.results[i];
        std::string head = "result " + std::to_string(i + 1) + ": " + r.status_name();
        if (!r.command_tag.empty()) head += " tag=\"" + r.command_tag + "\"";
        lines.push_back(head);
        if (!r.columns.empty()) {
            std::string cols = "  columns:";
            for (std::size_t c = 0; c < r.columns.size(); ++c) {
                cols += " " + r.columns[c] + "::" + std::to_string(r.column_types[c]);
            }
            lines.push_back(cols);
        }
        if (!r.param_types.empty()) {
            std::string types = "  parameter types:";
            for (Oid t : r.param_types) {
                types += ' ';  // not " " + to_string(): GCC 12 warns falsely (-Wrestrict)
                types += std::to_string(t);
            }
            lines.push_back(types);
        }
        for (const auto& row : r.rows) {
            std::string text = "  row:";
            for (const auto& cell : row)
                text += cell ? " '" + *cell + "'" : " NULL";
            lines.push_back(text);
        }
        if (r.is_error()) {
            lines.push_back("  error: " + r.severity + " " + r.sqlstate + " " + r.message);
            if (!r.detail.empty()) lines.push_back("  detail: " + r.detail);
            if (!r.hint.empty()) lines.push_back("  hint: " + r.hint);
        }
    }
    for (const auto& n : outcome.notices) {
        lines.push_back("notice: " + n.severity + " " + n.sqlstate + " " + n.message);
        if (!n.detail.empty()) lines.push_back("  detail: " + n.detail);
        if (!n.hint.empty()) lines.push_back("  hint: " + n.hint);
    }
    lines.push_back(std::string("transaction: ") +
                    transaction_status_name(outcome.transaction_status));
    lines.push_back(std::string("connection: ") + (outcome.connection_ok ? "ok" : "BAD"));
    return lines;
}

std::string diff_transcripts(const std::vector<Step>& steps, const Transcript& a,
                             const Transcript& b, std::string_view name_a,
                             std::string_view name_b) {
    std::ostringstream out;
    std::size_t count = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < count; ++i) {
        std::vector<std::string> la =
            i < a.size() ? render(a[i]) : std::vector<std::string>{"(not run)"};
        std::vector<std::string> lb =
            i < b.size() ? render(b[i]) : std::vector<std::string>{"(not run)"};
        if (la == lb) continue;
        if (out.tellp() == 0) out << "replies differ (- " << name_a << ", + " << name_b << ")\n";
        out << "step " << i + 1 << " " << (i < steps.size() ? steps[i].label() : "?") << "\n";
        for (const auto& line : line_diff(la, lb))
            out << line << "\n";
    }
    return out.str();
}

std::string run_differential(Conn& a, Conn& b, const std::vector<Step>& steps,
                             std::string_view name_a, std::string_view name_b) {
    Transcript ta = run_steps(a, steps);
    Transcript tb = run_steps(b, steps);
    return diff_transcripts(steps, ta, tb, name_a, name_b);
}

}  // namespace pgtether::itest
