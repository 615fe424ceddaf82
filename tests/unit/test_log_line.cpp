// Log lines (core/log_line.hpp): PgBouncer's text line, the JSON object, and the connection
// fields read from a message's prefix.
#include <doctest/doctest.h>

#include <string>

#include "core/log_line.hpp"

using namespace pgtether;

namespace {

LogRecord record_at(std::string_view message, LogLevel level = LogLevel::Log) {
    LogRecord r;
    r.local.tm_year = 2026 - 1900;
    r.local.tm_mon = 11;
    r.local.tm_mday = 3;
    r.local.tm_hour = 21;
    r.local.tm_min = 5;
    r.local.tm_sec = 9;
    r.utc = r.local;
    r.utc.tm_hour = 20;
    r.milliseconds = 7;
    r.zone = "CET";
    r.pid = 4242;
    r.level = level;
    r.message = message;
    return r;
}

}  // namespace

TEST_CASE("PgBouncer's level words") {
    CHECK(std::string(level_word(LogLevel::Noise)) == "NOISE");
    CHECK(std::string(level_word(LogLevel::Debug)) == "DEBUG");
    CHECK(std::string(level_word(LogLevel::Log)) == "LOG");
    CHECK(std::string(level_word(LogLevel::Warning)) == "WARNING");
    CHECK(std::string(level_word(LogLevel::Error)) == "ERROR");
    CHECK(std::string(level_word(LogLevel::Fatal)) == "FATAL");
}

TEST_CASE("text: date, milliseconds, the local zone's name, [pid], the level word") {
    CHECK(format_text_line(record_at("stats: 1 xacts/s")) ==
          "2026-12-03 21:05:09.007 CET [4242] LOG stats: 1 xacts/s\n");
    CHECK(format_text_line(record_at("x", LogLevel::Warning)) ==
          "2026-12-03 21:05:09.007 CET [4242] WARNING x\n");
}

TEST_CASE("the connection a message is about, from its prefix") {
    struct Row {
        const char* message;
        const char* client;
        const char* server;
        const char* database;
        const char* user;
    };
    const Row rows[] = {
        {"C-12 app/bob@127.0.0.1:5000: closing because: client close request", "12", "", "app",
         "bob"},
        {"C-3@127.0.0.1:5000: closing: bad packet", "3", "", "", ""},
        {"S-7 app/bob: server login failed: refused", "", "7", "app", "bob"},
        {"S-7: running probe", "", "7", "", ""},
        {"S-3 app/bob@127.0.0.1:5432 new connection to server", "", "3", "app", "bob"},
        {"app/bob: taking connection from reserve_pool", "", "", "", ""},
        {"C-x app/bob@a: no id", "", "", "", ""},
        {"Connection made", "", "", "", ""},
        {"C-", "", "", "", ""},
    };
    for (const auto& row : rows) {
        CAPTURE(row.message);
        auto c = parse_log_context(row.message);
        CHECK(c.client_id == row.client);
        CHECK(c.server_id == row.server);
        CHECK(c.database == row.database);
        CHECK(c.user == row.user);
    }
}

TEST_CASE("json: one object per line, UTC time, the fields that are known, escaped") {
    CHECK(format_json_line(record_at("listening on 127.0.0.1:6432")) ==
          "{\"time\":\"2026-12-03T20:05:09.007Z\",\"level\":\"LOG\",\"pid\":4242,"
          "\"message\":\"listening on 127.0.0.1:6432\"}\n");
    auto r = record_at(
        "C-12 app/bob@127.0.0.1:5000: pooler error: no more connections allowed "
        "(max_client_conn)",
        LogLevel::Warning);
    r.sqlstate = "53300";
    CHECK(format_json_line(r) ==
          "{\"time\":\"2026-12-03T20:05:09.007Z\",\"level\":\"WARNING\",\"pid\":4242,"
          "\"client_id\":\"C-12\",\"database\":\"app\",\"user\":\"bob\",\"sqlstate\":\"53300\","
          "\"message\":\"C-12 app/bob@127.0.0.1:5000: pooler error: no more connections allowed "
          "(max_client_conn)\"}\n");
    auto s = record_at("S-7 app/bob: server login failed: x");
    CHECK(format_json_line(s).find("\"server_id\":\"S-7\",\"database\":\"app\",\"user\":\"bob\"") !=
          std::string::npos);
    const std::string odd = std::string("a \"quoted\" \\ line\nnext\ttab\x01");
    CHECK(format_json_line(record_at(odd))
              .find("\"message\":\"a \\\"quoted\\\" \\\\ line\\nnext\\ttab\\u0001\"}\n") !=
          std::string::npos);
}
