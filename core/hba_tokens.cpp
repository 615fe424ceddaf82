#include "core/hba_tokens.hpp"

#include "core/config.hpp"

namespace pgtether {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

}  // namespace

std::vector<std::vector<HbaToken>> split_hba_line(std::string_view line, const std::string& file,
                                                  int line_no) {
    std::vector<std::vector<HbaToken>> fields;
    std::size_t pos = 0;
    bool continue_list = false;
    while (true) {
        while (pos < line.size() && is_space(line[pos]))
            ++pos;
        if (pos >= line.size() || line[pos] == '#') break;
        if (line[pos] == ',') {
            if (fields.empty() || fields.back().empty() || continue_list) {
                throw ConfigError(file, line_no, "", "unexpected comma");
            }
            fields.back().back().comma_after = true;
            continue_list = true;
            ++pos;
            continue;
        }
        HbaToken token;
        if (line[pos] == '"') {
            token.quoted = true;
            ++pos;
            bool closed = false;
            while (pos < line.size()) {
                if (line[pos] == '"') {
                    if (pos + 1 < line.size() && line[pos + 1] == '"') {
                        token.text.push_back('"');
                        pos += 2;
                        continue;
                    }
                    ++pos;
                    closed = true;
                    break;
                }
                token.text.push_back(line[pos++]);
            }
            if (!closed) throw ConfigError(file, line_no, "", "unterminated quoted name");
        } else {
            while (pos < line.size() && !is_space(line[pos]) && line[pos] != ',' &&
                   line[pos] != '#' && line[pos] != '"') {
                token.text.push_back(line[pos++]);
            }
        }
        if (continue_list) {
            fields.back().push_back(std::move(token));
            continue_list = false;
        } else {
            fields.push_back({std::move(token)});
        }
    }
    if (continue_list) throw ConfigError(file, line_no, "", "list ends with a comma");
    return fields;
}

}  // namespace pgtether
