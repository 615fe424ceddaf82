#include "protocol/sql_tokens.hpp"

#include "protocol/ascii.hpp"

namespace pgtether::protocol {

namespace {

constexpr bool is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
constexpr bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}
constexpr bool is_ident_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
constexpr bool is_ident_cont(unsigned char c) {
    return is_ident_start(c) || is_digit(c) || c == '$';
}
constexpr bool is_op_char(unsigned char c) {
    switch (c) {
        case '+':
        case '-':
        case '*':
        case '/':
        case '<':
        case '>':
        case '=':
        case '~':
        case '!':
        case '@':
        case '#':
        case '%':
        case '^':
        case '&':
        case '|':
        case '`':
        case '?':
            return true;
        default:
            return false;
    }
}

// Splits the whole text into tokens. `reliable` turns false where the server might lex the text
// differently (then nothing about it is exact).
class Tokenizer {
  public:
    explicit Tokenizer(std::string_view sql) : sql_(sql) {}

    bool run(std::vector<SqlToken>& out) {
        const std::size_t n = sql_.size();
        while (pos_ < n && reliable_) {
            const auto c = at(pos_);
            const std::size_t start = pos_;
            if (is_space(c)) {
                ++pos_;
            } else if (c == '-' && peek(1) == '-') {
                while (pos_ < n && at(pos_) != '\n' && at(pos_) != '\r')
                    ++pos_;
            } else if (c == '/' && peek(1) == '*') {
                block_comment();
            } else if (c == '\'') {
                quoted(pos_ + 1, '\'', /*backslash_escapes=*/false, /*plain_string=*/true);
                out.push_back({SqlTok::String, slice(start)});
            } else if (c == '"') {
                quoted(pos_ + 1, '"', false, false);
                out.push_back({SqlTok::QuotedIdent, sql_.substr(start + 1, pos_ - start - 2)});
            } else if (c == '$') {
                dollar(out);
            } else if (is_ident_start(c)) {
                word(out);
            } else if (is_digit(c) || (c == '.' && is_digit(peek(1)))) {
                number(out);
            } else if (c == ':' && peek(1) == ':') {
                pos_ += 2;
                out.push_back({SqlTok::DoubleColon, slice(start)});
            } else if (is_op_char(c)) {
                // scan.l: an operator ends where a comment starts.
                while (pos_ < n && is_op_char(at(pos_)) && !(at(pos_) == '-' && peek(1) == '-') &&
                       !(at(pos_) == '/' && peek(1) == '*')) {
                    ++pos_;
                }
                out.push_back({SqlTok::Op, slice(start)});
            } else {
                ++pos_;
                SqlTok kind = SqlTok::Other;
                if (c == '(' || c == '[') kind = SqlTok::Open;
                if (c == ')' || c == ']') kind = SqlTok::Close;
                if (c == ',') kind = SqlTok::Comma;
                if (c == '.') kind = SqlTok::Dot;
                if (c == ';') kind = SqlTok::Semicolon;
                out.push_back({kind, slice(start)});
            }
        }
        return reliable_;
    }

  private:
    [[nodiscard]] unsigned char at(std::size_t i) const {
        return static_cast<unsigned char>(sql_[i]);
    }
    [[nodiscard]] unsigned char peek(std::size_t ahead) const {
        return pos_ + ahead < sql_.size() ? at(pos_ + ahead) : 0;
    }
    [[nodiscard]] std::string_view slice(std::size_t start) const {
        return sql_.substr(start, pos_ - start);
    }

    void block_comment() {
        // Comments nest (§4.1.5).
        std::size_t depth = 0;
        const std::size_t n = sql_.size();
        while (pos_ < n) {
            if (at(pos_) == '/' && peek(1) == '*') {
                ++depth;
                pos_ += 2;
            } else if (at(pos_) == '*' && peek(1) == '/') {
                pos_ += 2;
                if (--depth == 0) return;
            } else {
                ++pos_;
            }
        }
        reliable_ = false;  // unterminated
    }

    // From just after the opening quote to just after the closing one. A backslash in a plain
    // '...' literal means different things under standard_conforming_strings on and off.
    void quoted(std::size_t i, char quote, bool backslash_escapes, bool plain_string) {
        const std::size_t n = sql_.size();
        while (i < n) {
            const auto c = at(i);
            if (c == static_cast<unsigned char>(quote)) {
                if (i + 1 < n && at(i + 1) == static_cast<unsigned char>(quote)) {
                    i += 2;
                    continue;
                }
                pos_ = i + 1;
                return;
            }
            if (c == '\\') {
                if (plain_string) {
                    reliable_ = false;
                    pos_ = n;
                    return;
                }
                if (backslash_escapes) ++i;  // the escaped character, whatever it is
            }
            ++i;
        }
        reliable_ = false;  // unterminated
        pos_ = n;
    }

    void dollar(std::vector<SqlToken>& out) {
        const std::size_t start = pos_;
        const std::size_t n = sql_.size();
        if (is_digit(peek(1))) {
            pos_ += 1;
            while (pos_ < n && is_digit(at(pos_)))
                ++pos_;
            if (pos_ < n && is_ident_cont(at(pos_))) reliable_ = false;  // "$1abc": junk
            out.push_back({SqlTok::Param, slice(start)});
            return;
        }
        // $tag$ ... $tag$ (the tag is an identifier without '$', or empty).
        std::size_t i = pos_ + 1;
        if (i < n && is_ident_start(at(i))) {
            while (i < n && is_ident_cont(at(i)) && at(i) != '$')
                ++i;
        }
        if (i >= n || at(i) != '$') {
            ++pos_;
            out.push_back({SqlTok::Other, slice(start)});
            return;
        }
        const std::string_view tag = sql_.substr(pos_, i + 1 - pos_);
        const std::size_t close = sql_.find(tag, i + 1);
        if (close == std::string_view::npos) {
            reliable_ = false;
            pos_ = n;
            return;
        }
        pos_ = close + tag.size();
        out.push_back({SqlTok::String, slice(start)});
    }

    void word(std::vector<SqlToken>& out) {
        const std::size_t start = pos_;
        const std::size_t n = sql_.size();
        const auto lead = static_cast<unsigned char>(at(pos_) | 0x20);
        // E'', B'', X'', N'' and U&'' / U&"" (only as the whole word: scan.l's longest match).
        if (peek(1) == '\'' && (lead == 'e' || lead == 'b' || lead == 'x' || lead == 'n')) {
            quoted(pos_ + 2, '\'', lead == 'e', lead == 'n');
            out.push_back({SqlTok::String, slice(start)});
            return;
        }
        if (lead == 'u' && peek(1) == '&' && (peek(2) == '\'' || peek(2) == '"')) {
            const char quote = static_cast<char>(peek(2));
            // Unicode escapes use backslash but never escape the quote; under
            // standard_conforming_strings off the server refuses U&'' (an error: uncertain anyway).
            quoted(pos_ + 3, quote, false, false);
            out.push_back({quote == '"' ? SqlTok::QuotedIdent : SqlTok::String, slice(start)});
            return;
        }
        while (pos_ < n && is_ident_cont(at(pos_)))
            ++pos_;
        out.push_back({SqlTok::Word, slice(start)});
    }

    void number(std::vector<SqlToken>& out) {
        const std::size_t start = pos_;
        const std::size_t n = sql_.size();
        bool integer = true;
        while (pos_ < n && is_digit(at(pos_)))
            ++pos_;
        // Anything that continues the literal (a fraction, an exponent, trailing junk, PostgreSQL
        // 16's underscores and 0x prefixes) makes it something other than a plain integer.
        while (pos_ < n && (is_digit(at(pos_)) || at(pos_) == '.' || is_ident_cont(at(pos_)))) {
            integer = false;
            if ((at(pos_) == 'e' || at(pos_) == 'E') && (peek(1) == '+' || peek(1) == '-')) ++pos_;
            ++pos_;
        }
        out.push_back({integer ? SqlTok::Integer : SqlTok::Number, slice(start)});
    }

    std::string_view sql_;
    std::size_t pos_ = 0;
    bool reliable_ = true;
};

}  // namespace

bool tokenize_sql(std::string_view sql, std::vector<SqlToken>& out) {
    return Tokenizer(sql).run(out);
}

bool token_is_name(const SqlToken& token, std::string_view lower) {
    if (token.kind == SqlTok::Word) return ascii_iequals(token.text, lower);
    if (token.kind == SqlTok::QuotedIdent) return token.text == lower;
    return false;
}

std::optional<std::vector<StatementSpan>> split_sql_statements(std::string_view sql) {
    std::vector<SqlToken> tokens;
    if (!tokenize_sql(sql, tokens)) return std::nullopt;
    std::vector<StatementSpan> statements;
    std::size_t depth = 0;
    std::size_t begin = 0;
    bool has_tokens = false;
    for (const SqlToken& t : tokens) {
        // BEGIN ATOMIC ... END: its ';' do not end the statement (PostgreSQL 14+).
        if (token_is_name(t, "atomic")) return std::nullopt;
        if (t.kind == SqlTok::Open) ++depth;
        if (t.kind == SqlTok::Close && depth > 0) --depth;
        if (t.kind == SqlTok::Semicolon && depth == 0) {
            const auto at = static_cast<std::size_t>(t.text.data() - sql.data());
            if (has_tokens) statements.push_back({begin, at});
            begin = at + 1;
            has_tokens = false;
            continue;
        }
        has_tokens = true;
    }
    if (has_tokens) statements.push_back({begin, sql.size()});
    return statements;
}

}  // namespace pgtether::protocol
