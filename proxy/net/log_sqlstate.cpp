#include "proxy/net/log_sqlstate.hpp"

namespace pgtether {

namespace {
thread_local std::string_view current;
}  // namespace

LogSqlstate::LogSqlstate(std::string_view sqlstate) : previous_(current) {
    current = sqlstate;
}

LogSqlstate::~LogSqlstate() {
    current = previous_;
}

std::string_view current_log_sqlstate() {
    return current;
}

}  // namespace pgtether
