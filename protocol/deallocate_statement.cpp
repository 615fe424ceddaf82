#include "protocol/deallocate_statement.hpp"

#include <algorithm>
#include <cctype>

#include "protocol/ascii.hpp"

namespace pgtether::protocol {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool is_ident_start(char c) {
    auto b = static_cast<unsigned char>(c);
    return std::isalpha(b) || c == '_' || b >= 0x80;
}
bool is_ident_cont(char c) {
    return is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$';
}

class Cursor {
public:
    explicit Cursor(std::string_view text) : text_(text) {}
    void skip_space() {
        while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
    }
    [[nodiscard]] bool at_end() const { return pos_ == text_.size(); }
    [[nodiscard]] char peek() const { return text_[pos_]; }
    void advance() { ++pos_; }
    // A keyword or unquoted identifier, folded to lower case; empty if none here.
    std::string word() {
        std::string out;
        if (at_end() || !is_ident_start(peek())) return out;
        while (!at_end() && is_ident_cont(peek())) {
            out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(peek()))));
            advance();
        }
        return out;
    }
    // A double-quoted identifier ("" is a quote inside it); nullopt if unterminated or empty.
    std::optional<std::string> quoted() {
        advance();  // opening quote
        std::string out;
        while (!at_end()) {
            char c = peek();
            advance();
            if (c != '"') {
                out.push_back(c);
            } else if (!at_end() && peek() == '"') {
                out.push_back('"');
                advance();
            } else {
                if (out.empty()) return std::nullopt;
                return out;
            }
        }
        return std::nullopt;
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
};

}  // namespace

std::optional<std::string> parse_lone_deallocate(std::string_view sql) {
    Cursor c(sql);
    c.skip_space();
    if (c.word() != "deallocate") return std::nullopt;
    c.skip_space();
    std::optional<std::string> name;
    if (!c.at_end() && c.peek() == '"') {
        name = c.quoted();
    } else {
        std::string w = c.word();
        if (w == "prepare") {
            c.skip_space();
            if (!c.at_end() && c.peek() == '"') {
                name = c.quoted();
            } else {
                w = c.word();
                if (!w.empty()) name = w;
            }
        } else if (!w.empty()) {
            name = w;
        }
    }
    if (!name || *name == "all") return std::nullopt;
    c.skip_space();
    if (!c.at_end() && c.peek() == ';') {
        c.advance();
        c.skip_space();
    }
    if (!c.at_end()) return std::nullopt;
    return name;
}

namespace {

// The tokens that matter for names_statement_with_prefix: words (folded), quoted identifiers,
// and "something else" (an operator, a literal, a parenthesis...), with whitespace and comments
// skipped.
class NameScanner {
  public:
    NameScanner(std::string_view sql, bool backslash_escapes)
        : sql_(sql), backslash_escapes_(backslash_escapes) {}

    bool find(std::string_view prefix) {
        // A state machine over the token stream: after PREPARE / EXECUTE comes the name; after
        // DEALLOCATE an optional PREPARE, then the name.
        enum class Expect { Anything, Name, NameOrPrepare } expect = Expect::Anything;
        while (true) {
            Token token = next();
            if (token.kind == Kind::End) return false;
            if (expect != Expect::Anything &&
                (token.kind == Kind::Word || token.kind == Kind::Quoted)) {
                if (expect == Expect::NameOrPrepare && token.kind == Kind::Word &&
                    token.text == "prepare") {
                    expect = Expect::Name;
                    continue;
                }
                if (std::string_view(token.text).starts_with(prefix)) return true;
            }
            expect = Expect::Anything;
            if (token.kind != Kind::Word) continue;
            if (token.text == "prepare" || token.text == "execute") expect = Expect::Name;
            if (token.text == "deallocate") expect = Expect::NameOrPrepare;
        }
    }

  private:
    enum class Kind { End, Word, Quoted, Other };
    struct Token {
        Kind kind;
        std::string text;
    };

    [[nodiscard]] char at(std::size_t i) const { return i < sql_.size() ? sql_[i] : '\0'; }

    Token next() {
        const std::size_t n = sql_.size();
        while (pos_ < n) {
            const char c = sql_[pos_];
            if (is_space(c)) {
                ++pos_;
            } else if (c == '-' && at(pos_ + 1) == '-') {
                while (pos_ < n && sql_[pos_] != '\n' && sql_[pos_] != '\r')
                    ++pos_;
            } else if (c == '/' && at(pos_ + 1) == '*') {
                skip_block_comment();
            } else {
                break;
            }
        }
        if (pos_ >= n) return {Kind::End, {}};
        const char c = sql_[pos_];
        const auto lead = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (c == '\'') {
            skip_quoted(pos_ + 1, '\'', backslash_escapes_);
        } else if ((lead == 'e' || lead == 'b' || lead == 'x' || lead == 'n') &&
                   at(pos_ + 1) == '\'') {
            skip_quoted(pos_ + 2, '\'', lead == 'e' || (lead == 'n' && backslash_escapes_));
        } else if (lead == 'u' && at(pos_ + 1) == '&' && at(pos_ + 2) == '\'') {
            skip_quoted(pos_ + 3, '\'', false);
        } else if (c == '"') {
            return {Kind::Quoted, quoted_identifier(pos_ + 1)};
        } else if (c == '$' && !std::isdigit(static_cast<unsigned char>(at(pos_ + 1)))) {
            skip_dollar();
        } else if (is_ident_start(c)) {
            std::string word;
            while (pos_ < n && is_ident_cont(sql_[pos_])) {
                word.push_back(
                    static_cast<char>(std::tolower(static_cast<unsigned char>(sql_[pos_]))));
                ++pos_;
            }
            return {Kind::Word, std::move(word)};
        } else {
            ++pos_;
        }
        return {Kind::Other, {}};
    }

    void skip_block_comment() {
        std::size_t depth = 0;
        while (pos_ < sql_.size()) {
            if (sql_[pos_] == '/' && at(pos_ + 1) == '*') {
                ++depth;
                pos_ += 2;
            } else if (sql_[pos_] == '*' && at(pos_ + 1) == '/') {
                pos_ += 2;
                if (--depth == 0) return;
            } else {
                ++pos_;
            }
        }
    }

    void skip_quoted(std::size_t i, char quote, bool escapes) {
        while (i < sql_.size()) {
            if (sql_[i] == quote) {
                if (at(i + 1) == quote) {
                    i += 2;
                    continue;
                }
                pos_ = i + 1;
                return;
            }
            if (escapes && sql_[i] == '\\') ++i;
            ++i;
        }
        pos_ = sql_.size();
    }

    std::string quoted_identifier(std::size_t i) {
        std::string name;
        while (i < sql_.size()) {
            if (sql_[i] == '"') {
                if (at(i + 1) != '"') break;
                ++i;
            }
            name.push_back(sql_[i]);
            ++i;
        }
        pos_ = std::min(i + 1, sql_.size());
        return name;
    }

    // $tag$ ... $tag$; a lone '$' is skipped.
    void skip_dollar() {
        std::size_t i = pos_ + 1;
        if (i < sql_.size() && is_ident_start(sql_[i])) {
            while (i < sql_.size() && is_ident_cont(sql_[i]) && sql_[i] != '$')
                ++i;
        }
        if (at(i) != '$') {
            ++pos_;
            return;
        }
        const std::string_view tag = sql_.substr(pos_, i + 1 - pos_);
        const std::size_t close = sql_.find(tag, i + 1);
        pos_ = close == std::string_view::npos ? sql_.size() : close + tag.size();
    }

    std::string_view sql_;
    bool backslash_escapes_;
    std::size_t pos_ = 0;
};

}  // namespace

bool names_statement_with_prefix(std::string_view sql, std::string_view prefix) {
    // Every Query passes here: most texts do not contain the prefix in any case, and the token
    // scan (which folds words) is skipped for them. (A name written with Unicode escapes,
    // U&"\0070...", is not seen; nor is dynamic SQL.)
    if (!ascii_icontains(sql, prefix)) return false;
    if (NameScanner(sql, false).find(prefix)) return true;
    // Only a backslash can make the two readings of a plain literal differ.
    return sql.find('\\') != std::string_view::npos && NameScanner(sql, true).find(prefix);
}

}  // namespace pgtether::protocol
