#include "core/state_probe.hpp"

#include <charconv>

#include "core/session_params.hpp"

namespace pgtether {

namespace {

std::optional<std::uint32_t> parse_u32(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    std::uint32_t value = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
    return value;
}

// The reported parameters are tracked through ParameterStatus (session_params.hpp), not here.
constexpr const char* kReportedParameters =
    "'client_encoding', 'datestyle', 'timezone', 'intervalstyle', "
    "'standard_conforming_strings', 'application_name'";

}  // namespace

const char* state_kind_name(std::uint32_t kind) {
    switch (kind) {
        case kStateAdvisoryLock: return "advisory locks";
        case kStateTempTable: return "temp tables";
        case kStateListen: return "listen";
        case kStateCursor: return "hold cursors";
        case kStatePrepare: return "prepared statements (SQL)";
        case kStateLoad: return "load";
        case kStateSettings: return "settings";
        case kStateUnknown: return "unknown (probe failed)";
        default: return "?";
    }
}

const char* state_kind_label(std::uint32_t kind) {
    switch (kind) {
        case kStateAdvisoryLock: return "advisory_locks";
        case kStateTempTable: return "temp_tables";
        case kStateListen: return "listen";
        case kStateCursor: return "hold_cursors";
        case kStatePrepare: return "sql_prepared";
        case kStateLoad: return "load";
        case kStateSettings: return "settings";
        case kStateUnknown: return "unknown";
        default: return "other";
    }
}

std::uint32_t tracked_kinds(const Config& config) {
    std::uint32_t kinds = 0;
    auto keep = [](StateHandling h) { return h == StateHandling::Keep; };
    if (config.advisory_lock_tracking != LockTracking::Off) kinds |= kStateAdvisoryLock;
    if (keep(config.session_state_temp_tables)) kinds |= kStateTempTable;
    if (keep(config.session_state_listen)) kinds |= kStateListen;
    if (keep(config.session_state_cursors)) kinds |= kStateCursor;
    if (keep(config.session_state_prepare)) kinds |= kStatePrepare;
    if (keep(config.session_state_load)) kinds |= kStateLoad;
    if (keep(config.session_settings)) kinds |= kStateSettings;
    return kinds;
}

std::uint32_t kinds_to_probe(std::uint32_t effects, const Config& config) {
    return probe_kinds_for(effects, tracked_kinds(config),
                           config.advisory_lock_tracking == LockTracking::EveryTransaction);
}

std::string build_state_probe(std::uint32_t kinds, const std::vector<std::string>& custom_settings,
                              std::string_view login_user) {
    // Every part yields (kind, a, b, c, d) as text, so they can be UNIONed into one answer.
    std::vector<std::string> parts;
    if (kinds & kStateAdvisoryLock) {
        parts.emplace_back(
            "SELECT 'advisory', classid::text, objid::text, objsubid::text, mode "
            "FROM pg_catalog.pg_locks "
            "WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()");
    }
    auto summary = [&](const char* kind, const char* name, const char* from) {
        parts.emplace_back(std::string("SELECT '") + kind + "', count(*)::text, min(" + name +
                           "), NULL, NULL FROM " + from + " HAVING count(*) > 0");
    };
    if (kinds & kStateTempTable) {
        summary("temp", "relname::text",
                "pg_catalog.pg_class WHERE relnamespace = pg_catalog.pg_my_temp_schema() "
                "AND relkind IN ('r', 'p', 'v', 'm', 'S', 'f')");
    }
    if (kinds & kStateListen) summary("listen", "c", "pg_catalog.pg_listening_channels() AS c");
    if (kinds & kStateCursor) summary("cursor", "name", "pg_catalog.pg_cursors WHERE is_holdable");
    if (kinds & kStatePrepare) {
        summary("prepare", "name", "pg_catalog.pg_prepared_statements WHERE from_sql");
    }
    if (kinds & kStateSettings) {
        parts.emplace_back(std::string(
                               "SELECT 'setting', name, setting, NULL, NULL "
                               "FROM pg_catalog.pg_settings WHERE source = 'session' "
                               "AND lower(name) NOT IN (") +
                           kReportedParameters + ")");
        // Who the session acts as: SET ROLE and SET SESSION AUTHORIZATION (and set_config of
        // either) are settings pg_settings does not list. 'none' is no role (a role cannot
        // have that name).
        parts.emplace_back(
            "SELECT 'setting', 'role', pg_catalog.current_setting('role'), NULL, NULL "
            "WHERE pg_catalog.current_setting('role') <> 'none'");
        parts.emplace_back(
            "SELECT 'setting', 'session_authorization', "
            "pg_catalog.current_setting('session_authorization'), NULL, NULL "
            "WHERE pg_catalog.current_setting('session_authorization') <> " +
            quote_literal(login_user));
        if (!custom_settings.empty()) {
            std::string array = "ARRAY[";
            for (std::size_t i = 0; i < custom_settings.size(); ++i) {
                if (i > 0) array += ", ";
                array += quote_literal(custom_settings[i]);
            }
            array += "]::text[]";
            parts.emplace_back("SELECT 'setting', n, pg_catalog.current_setting(n, true), NULL, "
                               "NULL FROM pg_catalog.unnest(" + array + ") AS n");
        }
    }
    std::string sql;
    for (const auto& part : parts) {
        if (!sql.empty()) sql += " UNION ALL ";
        sql += part;
    }
    return sql;
}

std::optional<StateReport> decode_state_probe(const std::vector<Row>& rows) {
    StateReport report;
    for (const auto& row : rows) {
        if (row.size() != 5 || !row[0]) return std::nullopt;
        const std::string& kind = *row[0];
        if (kind == "advisory") {
            auto classid = parse_u32(row[1]);
            auto objid = parse_u32(row[2]);
            auto objsubid = parse_u32(row[3]);
            if (!classid || !objid || !objsubid || (*objsubid != 1 && *objsubid != 2) ||
                !row[4]) {
                return std::nullopt;
            }
            report.locks.push_back({*classid, *objid, *objsubid == 1, *row[4] != "ShareLock"});
            report.present |= kStateAdvisoryLock;
        } else if (kind == "setting") {
            if (!row[1]) return std::nullopt;
            // A custom setting never set on this backend reads as NULL: not a setting.
            if (row[2]) report.settings.set(*row[1], *row[2]);
        } else {
            std::uint32_t k = 0;
            if (kind == "temp") k = kStateTempTable;
            if (kind == "listen") k = kStateListen;
            if (kind == "cursor") k = kStateCursor;
            if (kind == "prepare") k = kStatePrepare;
            if (k == 0 || !row[1]) return std::nullopt;
            report.present |= k;
            std::string text = *row[1];
            if (row[2]) text += ": " + *row[2] + (*row[1] == "1" ? "" : ", ...");
            report.summaries.emplace_back(k, std::move(text));
        }
    }
    // pg_locks has no order; sorted, the admin console and logs show a tether the same way
    // every time.
    sort_lock_keys(report.locks);
    return report;
}

std::string describe_state(std::uint32_t kinds, const std::string& locks,
                           const std::vector<std::pair<std::uint32_t, std::string>>& summaries) {
    std::string out;
    auto add = [&](std::string part) {
        if (!out.empty()) out += "; ";
        out += std::move(part);
    };
    if (kinds & kStateAdvisoryLock) add("advisory locks " + locks);
    for (const auto& [kind, text] : summaries) {
        if (kinds & kind) add(std::string(state_kind_name(kind)) + " " + text);
    }
    if (kinds & kStateLoad) add("load (a loaded library stays for the whole session)");
    if (kinds & kStateUnknown) add(state_kind_name(kStateUnknown));
    return out;
}

}  // namespace pgtether
