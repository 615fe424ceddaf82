#include "core/log_line.hpp"

#include <cstdio>

namespace pgtether {

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

void append_json_string(std::string& out, std::string_view text) {
    out += '"';
    for (char c : text) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                    out += buf;
                } else {
                    out += c;  // UTF-8 passes through; other bytes as they are
                }
        }
    }
    out += '"';
}

void append_field(std::string& out, const char* name, std::string_view value) {
    out += ",\"";
    out += name;
    out += "\":";
    append_json_string(out, value);
}

}  // namespace

const char* level_word(LogLevel level) {
    switch (level) {
        case LogLevel::Noise:
            return "NOISE";
        case LogLevel::Debug:
            return "DEBUG";
        case LogLevel::Log:
            return "LOG";
        case LogLevel::Warning:
            return "WARNING";
        case LogLevel::Error:
            return "ERROR";
        case LogLevel::Fatal:
            return "FATAL";
    }
    return "LOG";
}

LogContext parse_log_context(std::string_view message) {
    LogContext context;
    if (message.size() < 3 || (message[0] != 'C' && message[0] != 'S') || message[1] != '-' ||
        !is_digit(message[2])) {
        return context;
    }
    const bool client = message[0] == 'C';
    std::size_t pos = 2;
    while (pos < message.size() && is_digit(message[pos]))
        ++pos;
    std::string id(message.substr(2, pos - 2));
    // The id is followed by " db/user", then '@' (a client's address) or ':'; or by '@' or ':'
    // at once (a client before its start-up packet, a server line without its pool).
    if (pos >= message.size() ||
        (message[pos] != ' ' && message[pos] != '@' && message[pos] != ':')) {
        return context;
    }
    (client ? context.client_id : context.server_id) = std::move(id);
    if (message[pos] != ' ') return context;
    const std::string_view rest = message.substr(pos + 1);
    const std::size_t end = rest.find_first_of("@:");
    const std::size_t slash = rest.find('/');
    if (end == std::string_view::npos || slash == std::string_view::npos || slash > end) {
        return context;
    }
    context.database.assign(rest.substr(0, slash));
    context.user.assign(rest.substr(slash + 1, end - slash - 1));
    return context;
}

std::string format_text_line(const LogRecord& r) {
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02d %02d:%02d:%02d.%03d", r.local.tm_year + 1900,
                  r.local.tm_mon + 1, r.local.tm_mday, r.local.tm_hour, r.local.tm_min,
                  r.local.tm_sec, r.milliseconds);
    std::string out = stamp;
    out += ' ';
    out += r.zone;
    out += " [" + std::to_string(r.pid) + "] ";
    out += level_word(r.level);
    out += ' ';
    out += r.message;
    out += '\n';
    return out;
}

std::string format_json_line(const LogRecord& r) {
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", r.utc.tm_year + 1900,
                  r.utc.tm_mon + 1, r.utc.tm_mday, r.utc.tm_hour, r.utc.tm_min, r.utc.tm_sec,
                  r.milliseconds);
    std::string out = "{\"time\":\"";
    out += stamp;
    out += "\",\"level\":\"";
    out += level_word(r.level);
    out += "\",\"pid\":" + std::to_string(r.pid);
    const LogContext context = parse_log_context(r.message);
    if (!context.client_id.empty()) append_field(out, "client_id", "C-" + context.client_id);
    if (!context.server_id.empty()) append_field(out, "server_id", "S-" + context.server_id);
    if (!context.database.empty()) append_field(out, "database", context.database);
    if (!context.user.empty()) append_field(out, "user", context.user);
    if (!r.sqlstate.empty()) append_field(out, "sqlstate", r.sqlstate);
    append_field(out, "message", r.message);
    out += "}\n";
    return out;
}

}  // namespace pgtether
