#include "core/ini_file.hpp"

#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

#include "core/config.hpp"
#include "core/file_text.hpp"

namespace pgtether {

namespace {

// isspace() without the newline, which ends a line.
bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

bool is_key_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '*';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_blank(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back()))
        s.remove_suffix(1);
    return s;
}

std::string canonical_name(const std::string& path) {
    std::error_code ec;
    auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    return ec ? path : p.string();
}

class IniReader {
  public:
    // With `errors`, a line with a problem is reported there and reading goes on (pgtether
    // --check lists every problem); without, the first problem is thrown.
    explicit IniReader(IniIncludeReader read_include, std::vector<ConfigError>* errors = nullptr)
        : read_include_(std::move(read_include)), errors_(errors) {}

    std::vector<IniEntry> take() { return std::move(entries_); }

    void read_text(const std::string& text, const std::string& file, int depth) {
        stack_.push_back({file, canonical_name(file)});
        int line_no = 0;
        std::size_t start = 0;
        while (start <= text.size()) {
            std::size_t end = text.find('\n', start);
            if (end == std::string::npos) end = text.size();
            ++line_no;
            const std::string_view line = std::string_view(text).substr(start, end - start);
            if (errors_) {
                try {
                    parse_line(line, file, line_no, depth);
                } catch (const ConfigError& e) {
                    errors_->push_back(e);
                }
            } else {
                parse_line(line, file, line_no, depth);
            }
            start = end + 1;
        }
        stack_.pop_back();
    }

  private:
    struct Open {
        std::string name;       // as written
        std::string canonical;  // for loop detection
    };

    void parse_line(std::string_view line, const std::string& file, int line_no, int depth) {
        std::size_t pos = 0;
        while (pos < line.size() && is_blank(line[pos]))
            ++pos;
        if (pos == line.size()) return;
        char c = line[pos];
        if (c == ';' || c == '#') return;
        if (c == '%') return parse_directive(line.substr(pos), file, line_no, depth);
        if (c == '[') return parse_section(line.substr(pos), file, line_no);
        parse_key_value(line.substr(pos), file, line_no);
    }

    void parse_directive(std::string_view rest, const std::string& file, int line_no, int depth) {
        constexpr std::string_view kInclude = "%include";
        // Like PgBouncer, the directive is case-sensitive and must be followed by a blank.
        if (!rest.starts_with(kInclude) ||
            (rest.size() > kInclude.size() && !is_blank(rest[kInclude.size()]))) {
            throw ConfigError(file, line_no, "", "unknown directive (only %include is supported)");
        }
        std::string target(trim(rest.substr(kInclude.size())));
        if (target.empty()) throw ConfigError(file, line_no, "", "%include needs a file name");
        include(target, file, line_no, depth);
    }

    void include(const std::string& target, const std::string& from, int line_no, int depth) {
        std::string canonical = canonical_name(target);
        for (const auto& open : stack_) {
            if (open.canonical == canonical) {
                std::string chain;
                for (const auto& o : stack_)
                    chain += o.name + " -> ";
                throw ConfigError(from, line_no, "",
                                  "include loop: \"" + target + "\" is already being read (" +
                                      chain + target + ")");
            }
        }
        if (depth >= kMaxIncludeDepth) {
            throw ConfigError(
                from, line_no, "",
                "%include nested more than " + std::to_string(kMaxIncludeDepth) + " levels deep");
        }
        std::string error;
        auto text = read_include_ ? read_include_(target, &error) : read_file_text(target, &error);
        if (!text) {
            throw ConfigError(from, line_no, "",
                              "cannot read included file \"" + target + "\": " + error);
        }
        read_text(*text, target, depth + 1);
    }

    void parse_section(std::string_view rest, const std::string& file, int line_no) {
        std::size_t close = rest.find(']');
        if (close == std::string_view::npos) {
            throw ConfigError(file, line_no, "", "missing ']' in section header");
        }
        std::string_view after = trim(rest.substr(close + 1));
        if (!after.empty() && after[0] != ';' && after[0] != '#') {
            throw ConfigError(file, line_no, "", "unexpected text after section header");
        }
        entries_.push_back(
            {IniEntry::Kind::Section, file, line_no, std::string(rest.substr(1, close - 1)), {}});
    }

    void parse_key_value(std::string_view rest, const std::string& file, int line_no) {
        std::string key;
        std::size_t pos = 0;
        if (rest[0] == '"') {
            // SQL identifier quoting: "" inside the quotes is one ".
            pos = 1;
            bool closed = false;
            while (pos < rest.size()) {
                if (rest[pos] == '"') {
                    if (pos + 1 < rest.size() && rest[pos + 1] == '"') {
                        key.push_back('"');
                        pos += 2;
                        continue;
                    }
                    ++pos;
                    closed = true;
                    break;
                }
                key.push_back(rest[pos++]);
            }
            if (!closed) throw ConfigError(file, line_no, "", "unterminated quoted name");
            if (key.empty()) throw ConfigError(file, line_no, "", "empty quoted name");
        } else {
            while (pos < rest.size() && is_key_char(rest[pos]))
                ++pos;
            if (pos == 0) {
                throw ConfigError(file, line_no, "",
                                  "syntax error: expected \"key = value\", \"[section]\", "
                                  "\"%include FILE\" or a comment");
            }
            key.assign(rest.substr(0, pos));
        }
        while (pos < rest.size() && (rest[pos] == ' ' || rest[pos] == '\t'))
            ++pos;
        if (pos >= rest.size() || rest[pos] != '=') {
            throw ConfigError(file, line_no, key,
                              "missing '=' after the name (names with characters other than "
                              "A-Z a-z 0-9 _ . - * must be written in double quotes)");
        }
        ++pos;
        entries_.push_back({IniEntry::Kind::Value, file, line_no, std::move(key),
                            std::string(trim(rest.substr(pos)))});
    }

    IniIncludeReader read_include_;  // empty: read_file_text
    std::vector<ConfigError>* errors_;
    std::vector<IniEntry> entries_;
    std::vector<Open> stack_;
};

}  // namespace

std::vector<IniEntry> read_ini_file(const std::string& path) {
    std::string error;
    auto text = read_file_text(path, &error);
    if (!text) throw ConfigError(path, 0, "", "cannot read config file: " + error);
    IniReader reader({});
    reader.read_text(*text, path, 0);
    return reader.take();
}

std::optional<std::vector<IniEntry>> read_ini_file(const std::string& path,
                                                   std::vector<ConfigError>& errors) {
    std::string error;
    auto text = read_file_text(path, &error);
    if (!text) {
        errors.emplace_back(path, 0, "", "cannot read config file: " + error);
        return std::nullopt;
    }
    IniReader reader({}, &errors);
    reader.read_text(*text, path, 0);
    return reader.take();
}

std::vector<IniEntry> parse_ini_text(const std::string& text, const std::string& file_name,
                                     const IniIncludeReader& read_include) {
    IniReader reader(read_include);
    reader.read_text(text, file_name, 0);
    return reader.take();
}

}  // namespace pgtether
