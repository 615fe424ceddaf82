// How a log line is written (log_format, docs/admin.md "Logging"): PgBouncer's text line or one
// JSON object per line. Pure: the daemon's spdlog formatter (proxy/daemon/logging.cpp) passes the
// time already broken down, the pid, the level and the message; nothing here reads a clock.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace pgtether {

// PgBouncer's levels (its log.c): NOISE (-vv), DEBUG (-v), LOG, WARNING, ERROR, FATAL.
enum class LogLevel { Noise, Debug, Log, Warning, Error, Fatal };
[[nodiscard]] const char* level_word(LogLevel level);

// The connection a message is about, read from the prefix every client and server log line
// starts with: "C-12 db/user@addr: ..." (Client::describe) or "S-7 db/user: ...". Empty fields
// when the message has no such prefix.
struct LogContext {
    std::string client_id;  // "12" of "C-12"
    std::string server_id;
    std::string database;
    std::string user;
};
[[nodiscard]] LogContext parse_log_context(std::string_view message);

struct LogRecord {
    std::tm local{};  // the time in the local time zone (text)
    std::tm utc{};    // the same time in UTC (JSON)
    int milliseconds = 0;
    std::string zone;  // the local zone's abbreviation ("UTC", "CET")
    long pid = 0;
    LogLevel level = LogLevel::Log;
    std::string_view message;
    std::string_view sqlstate;  // empty when the message is not about an error with one
};

// "2026-12-03 20:50:01.123 UTC [4242] LOG message\n": PgBouncer's line (log_format = text).
[[nodiscard]] std::string format_text_line(const LogRecord& record);
// {"time":"2026-12-03T20:50:01.123Z","level":"LOG","pid":4242,"client_id":"C-12",
//  "database":"app","user":"bob","sqlstate":"53300","message":"..."}\n  (log_format = json):
// connection fields and sqlstate only when known; strings escaped as JSON requires (RFC 8259).
[[nodiscard]] std::string format_json_line(const LogRecord& record);

}  // namespace pgtether
