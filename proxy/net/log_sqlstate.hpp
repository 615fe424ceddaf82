// The SQLSTATE of the error a log line is about, for log_format = json's "sqlstate" field
// (proxy/daemon/logging.cpp). Set around a log call by whoever has the error at hand; spdlog
// formats on the logging thread, so a thread-local carries it to the formatter.
#pragma once

#include <string_view>

namespace pgtether {

class LogSqlstate {
  public:
    // `sqlstate` must outlive this object.
    explicit LogSqlstate(std::string_view sqlstate);
    ~LogSqlstate();
    LogSqlstate(const LogSqlstate&) = delete;
    LogSqlstate& operator=(const LogSqlstate&) = delete;

  private:
    std::string_view previous_;
};

// The innermost LogSqlstate's code on this thread; empty when none.
[[nodiscard]] std::string_view current_log_sqlstate();

}  // namespace pgtether
