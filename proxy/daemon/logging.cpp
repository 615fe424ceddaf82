#include "proxy/daemon/logging.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>

#include "core/config.hpp"
#include "core/log_line.hpp"
#include "proxy/net/log_sqlstate.hpp"

namespace pgtether {

LogOptions log_options_for(const Config& config, int command_line_verbose, bool quiet) {
    LogOptions options;
    options.verbose = command_line_verbose + config.verbose;
    options.quiet = quiet;
    options.logfile = config.logfile;
    options.json = config.log_format == "json";
    options.syslog = config.syslog;
    options.syslog_ident = config.syslog_ident;
    options.syslog_facility = config.syslog_facility;
    return options;
}

std::optional<int> syslog_facility_code(const std::string& name) {
    static const std::pair<const char*, int> kFacilities[] = {
        {"auth", LOG_AUTH},     {"authpriv", LOG_AUTHPRIV}, {"daemon", LOG_DAEMON},
        {"user", LOG_USER},     {"local0", LOG_LOCAL0},     {"local1", LOG_LOCAL1},
        {"local2", LOG_LOCAL2}, {"local3", LOG_LOCAL3},     {"local4", LOG_LOCAL4},
        {"local5", LOG_LOCAL5}, {"local6", LOG_LOCAL6},     {"local7", LOG_LOCAL7},
    };
    for (const auto& [facility, code] : kFacilities) {
        if (name == facility) return code;
    }
    return std::nullopt;
}

namespace {

LogLevel level_of(spdlog::level::level_enum level) {
    switch (level) {
        case spdlog::level::trace:
            return LogLevel::Noise;
        case spdlog::level::debug:
            return LogLevel::Debug;
        case spdlog::level::info:
            return LogLevel::Log;
        case spdlog::level::warn:
            return LogLevel::Warning;
        case spdlog::level::err:
            return LogLevel::Error;
        case spdlog::level::critical:
            return LogLevel::Fatal;
        default:
            return LogLevel::Log;
    }
}

// PgBouncer's lines (core/log_line.hpp) in place of spdlog's patterns: its level words and the
// time zone's name, or JSON; for syslog, which adds its own time and "ident[pid]:", the level
// word and the message only.
class LineFormatter final : public spdlog::formatter {
  public:
    enum class Kind { Text, Json, Syslog };
    explicit LineFormatter(Kind kind) : kind_(kind) {}

    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        const std::string_view message(msg.payload.data(), msg.payload.size());
        std::string line;
        if (kind_ == Kind::Syslog) {
            line = std::string(level_word(level_of(msg.level))) + " " + std::string(message);
        } else {
            LogRecord record;
            const auto since_epoch = msg.time.time_since_epoch();
            const std::time_t seconds =
                std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
            record.milliseconds = static_cast<int>(
                std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000);
            localtime_r(&seconds, &record.local);
            gmtime_r(&seconds, &record.utc);
            char zone[16];
            record.zone = std::strftime(zone, sizeof zone, "%Z", &record.local) > 0 ? zone : "UTC";
            record.pid = static_cast<long>(::getpid());
            record.level = level_of(msg.level);
            record.message = message;
            record.sqlstate = current_log_sqlstate();
            line = kind_ == Kind::Json ? format_json_line(record) : format_text_line(record);
        }
        dest.append(line.data(), line.data() + line.size());
    }
    [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
        return std::make_unique<LineFormatter>(kind_);
    }

  private:
    Kind kind_;
};

// One logger for the life of the process, whose sinks change on reload. With `workers` > 1 other
// threads log at any time, so the default logger is never replaced (a replaced one is freed under
// them) and its sinks never change in place: the dist_sink swaps them under its own mutex.
spdlog::sinks::dist_sink_mt& process_sinks() {
    static const std::shared_ptr<spdlog::sinks::dist_sink_mt> sinks = [] {
        auto dist = std::make_shared<spdlog::sinks::dist_sink_mt>();
        spdlog::set_default_logger(std::make_shared<spdlog::logger>("pgtether", dist));
        return dist;
    }();
    return *sinks;
}

// The logfile, appended to through a descriptor we opened ourselves: spdlog's file sink opens by
// name (fopen follows links) and creates files 0644.
class LogfileSink final : public spdlog::sinks::base_sink<std::mutex> {
  public:
    explicit LogfileSink(int fd) : fd_(fd) {}
    ~LogfileSink() override { ::close(fd_); }
    LogfileSink(const LogfileSink&) = delete;
    LogfileSink& operator=(const LogfileSink&) = delete;

  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t line;
        formatter_->format(msg, line);
        const char* data = line.data();
        std::size_t left = line.size();
        while (left > 0) {
            ssize_t n = ::write(fd_, data, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;  // a full disk loses the line, as fwrite would
            data += n;
            left -= static_cast<std::size_t>(n);
        }
    }
    void flush_() override {}  // unbuffered: every line is written at once

  private:
    int fd_;
};

[[noreturn]] void logfile_error(const std::string& path, const std::string& why) {
    throw std::runtime_error("cannot open logfile " + path + ": " + why);
}

// Opens (appends to, creates 0640) the logfile. While root (`owner` set) a link is not followed,
// the file must pass root_path_hazard, and it is handed to the user on the descriptor.
int open_logfile(const std::string& path, const std::optional<FileOwner>& owner) {
    int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
    // Not blocking on a FIFO planted under the name; cleared again below.
    if (owner) flags |= O_NOFOLLOW | O_NONBLOCK;
    int fd = ::open(path.c_str(), flags, 0640);
    if (fd < 0) {
        if (owner && errno == ELOOP) {
            logfile_error(path,
                          "it is a symbolic link, which pgtether does not follow while "
                          "it runs as root");
        }
        logfile_error(path, std::strerror(errno));
    }
    if (owner) {
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            int saved = errno;
            ::close(fd);
            logfile_error(path, std::strerror(saved));
        }
        auto hazard = root_path_hazard("logfile", path,
                                       {st.st_uid, st.st_gid, st.st_mode, st.st_nlink}, *owner);
        if (hazard || ::fchown(fd, owner->uid, owner->gid) != 0 ||
            ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) != 0) {
            int saved = errno;
            ::close(fd);
            if (hazard) throw std::runtime_error("refusing to start as root: " + *hazard);
            logfile_error(path, std::strerror(saved));
        }
    }
    return fd;
}

}  // namespace

void setup_logging(const LogOptions& options) {
    const auto kind = options.json ? LineFormatter::Kind::Json : LineFormatter::Kind::Text;
    std::vector<spdlog::sink_ptr> sinks;
    if (!options.quiet) sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    if (!options.logfile.empty()) {
        // Opens (appends to) the file: a reload after logrotate moved it starts a new one.
        sinks.push_back(
            std::make_shared<LogfileSink>(open_logfile(options.logfile, options.owner)));
    }
    for (auto& sink : sinks)
        sink->set_formatter(std::make_unique<LineFormatter>(kind));
    auto& dist = process_sinks();
    auto logger = spdlog::default_logger_raw();
    // PgBouncer's levels: verbose 0 logs LOG and above, 1 adds DEBUG, 2 and more add NOISE.
    switch (options.verbose) {
        case 0: logger->set_level(spdlog::level::info); break;
        case 1: logger->set_level(spdlog::level::debug); break;
        default: logger->set_level(spdlog::level::trace); break;
    }
    logger->flush_on(spdlog::level::info);
    // The previous sinks go first: a syslog sink's closelog() would otherwise undo the new
    // sink's openlog() and with it the ident.
    dist.set_sinks(std::move(sinks));
    if (options.syslog) {
        // syslog adds its own timestamp, host and "ident[pid]:"; the message carries the level
        // and the text, as PgBouncer's syslog lines do.
        auto sink = std::make_shared<spdlog::sinks::syslog_sink_mt>(
            options.syslog_ident, LOG_PID,
            syslog_facility_code(options.syslog_facility).value_or(LOG_DAEMON), true);
        sink->set_formatter(std::make_unique<LineFormatter>(LineFormatter::Kind::Syslog));
        dist.add_sink(std::move(sink));
    }
}

}  // namespace pgtether
