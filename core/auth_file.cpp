// PgBouncer's auth_file format (pgbouncer.5, "Authentication file format"; src/loader.c,
// load_auth_file):
//   "username" "secret" anything else on the line is ignored
// Both fields are in double quotes; a doubled "" inside a field is one literal quote. Blank lines
// are skipped and a line whose first non-blank character is ';' or '#' is a comment.
//
// PgBouncer logs "broken auth file" at the first line it cannot read and silently ignores the
// rest of the file -- including every user after it. pgtether refuses the file instead, naming
// the line, so that no user quietly disappears. A line starting with '#' would be such a line to
// PgBouncer (only ';' starts its comments); it is what people write for a comment, so pgtether
// reads it as one rather than losing the users below it. Text between the two fields other than
// blanks is refused (PgBouncer would skip to the next quote, even on a later line).
#include "core/auth_file.hpp"

#include <cstring>
#include <optional>
#include <string_view>

#include "core/config.hpp"
#include "core/file_text.hpp"

namespace pgtether {

namespace {

bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

bool is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Reads a double-quoted field starting at line[pos] == '"'. On success stores the unquoted text
// in `out` and returns the position after the closing quote.
std::optional<std::size_t> quoted_field(std::string_view line, std::size_t pos, std::string& out) {
    ++pos;  // opening quote
    while (pos < line.size()) {
        if (line[pos] == '"') {
            if (pos + 1 < line.size() && line[pos + 1] == '"') {
                out.push_back('"');
                pos += 2;
                continue;
            }
            return pos + 1;
        }
        out.push_back(line[pos++]);
    }
    return std::nullopt;
}

void parse_line(std::string_view line, const std::string& file, int line_no, AuthFile& result) {
    std::size_t pos = 0;
    while (pos < line.size() && is_blank(line[pos]))
        ++pos;
    if (pos == line.size() || line[pos] == ';' || line[pos] == '#') return;
    if (line[pos] != '"') {
        throw ConfigError(file, line_no, "",
                          "expected \"user\" \"secret\" (comment lines start with ';' or '#')");
    }
    UserSecret entry;
    auto after_user = quoted_field(line, pos, entry.user);
    if (!after_user) throw ConfigError(file, line_no, "", "unterminated quoted user name");
    if (entry.user.empty()) throw ConfigError(file, line_no, "", "empty user name");
    pos = *after_user;
    while (pos < line.size() && is_blank(line[pos]))
        ++pos;
    if (pos == line.size() || line[pos] != '"') {
        throw ConfigError(file, line_no, entry.user,
                          "expected the quoted secret after the user name");
    }
    auto after_secret = quoted_field(line, pos, entry.secret);
    if (!after_secret) throw ConfigError(file, line_no, entry.user, "unterminated quoted secret");
    // The rest of the line is ignored, as in PgBouncer.
    entry.kind = classify_secret(entry.secret);
    std::string user = entry.user;
    result[user] = std::move(entry);  // a later line for the same user wins
}

}  // namespace

SecretKind classify_secret(const std::string& secret) {
    // PostgreSQL's MD5 format: "md5" followed by 32 hex digits (md5(password || user)).
    if (secret.size() == 35 && secret.compare(0, 3, "md5") == 0) {
        bool hex = true;
        for (std::size_t i = 3; i < secret.size(); ++i)
            hex = hex && is_hex(secret[i]);
        if (hex) return SecretKind::Md5;
    }
    // RFC 5803 / PostgreSQL: "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>".
    if (secret.starts_with("SCRAM-SHA-256$")) return SecretKind::Scram;
    return SecretKind::Plain;
}

AuthFile parse_auth_file(const std::string& text, const std::string& file_name_for_errors) {
    AuthFile result;
    int line_no = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        ++line_no;
        parse_line(std::string_view(text).substr(start, end - start), file_name_for_errors, line_no,
                   result);
        start = end + 1;
    }
    return result;
}

AuthFile load_auth_file(const std::string& path) {
    std::string error;
    auto text = read_file_text(path, &error);
    if (!text) throw ConfigError(path, 0, "", "cannot read auth file: " + error);
    return parse_auth_file(*text, path);
}

}  // namespace pgtether
