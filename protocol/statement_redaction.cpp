#include "protocol/statement_redaction.hpp"

#include <cstddef>

namespace pgtether::protocol {

namespace {

constexpr bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}
// scan.l: ident_start [A-Za-z\200-\377_], ident_cont adds [0-9$].
constexpr bool is_ident_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
constexpr bool is_ident_cont(unsigned char c) {
    return is_ident_start(c) || is_digit(c) || c == '$';
}

class Redactor {
  public:
    explicit Redactor(std::string_view sql) : sql_(sql) { out_.reserve(sql.size()); }

    std::string run() {
        const std::size_t n = sql_.size();
        while (pos_ < n) {
            const unsigned char c = at(pos_);
            if (c == '-' && peek(1) == '-') {
                keep_until(line_end());
            } else if (c == '/' && peek(1) == '*') {
                keep_until(block_comment_end());
            } else if (c == '\'') {
                string_literal(pos_ + 1, Escapes::Ambiguous);
            } else if (c == '"') {
                quoted_identifier(pos_ + 1);
            } else if (c == '$') {
                dollar();
            } else if (is_ident_start(c)) {
                word();
            } else if (is_digit(c) || (c == '.' && is_digit(peek(1)))) {
                number();
            } else {
                out_ += static_cast<char>(c);
                ++pos_;
            }
        }
        return std::move(out_);
    }

  private:
    // How a backslash inside '...' reads: E'' always escapes; a plain '' (or N'') escapes only
    // under standard_conforming_strings = off, which we are not told; B'' and X'' never.
    enum class Escapes { Always, Ambiguous, Never };

    [[nodiscard]] unsigned char at(std::size_t i) const {
        return static_cast<unsigned char>(sql_[i]);
    }
    [[nodiscard]] unsigned char peek(std::size_t ahead) const {
        return pos_ + ahead < sql_.size() ? at(pos_ + ahead) : 0;
    }

    void keep_until(std::size_t end) {
        out_.append(sql_.substr(pos_, end - pos_));
        pos_ = end;
    }
    void redact_until(std::size_t end) {
        out_ += kRedactedLiteral;
        pos_ = end;
    }
    void redact_rest() { redact_until(sql_.size()); }

    [[nodiscard]] std::size_t line_end() const {
        std::size_t i = pos_;
        while (i < sql_.size() && at(i) != '\n' && at(i) != '\r')
            ++i;
        return i;
    }

    // Block comments nest (§4.1.5); an unterminated one runs to the end.
    [[nodiscard]] std::size_t block_comment_end() const {
        std::size_t depth = 0;
        std::size_t i = pos_;
        while (i < sql_.size()) {
            if (at(i) == '/' && i + 1 < sql_.size() && at(i + 1) == '*') {
                ++depth;
                i += 2;
            } else if (at(i) == '*' && i + 1 < sql_.size() && at(i + 1) == '/') {
                i += 2;
                if (--depth == 0) return i;
            } else {
                ++i;
            }
        }
        return i;
    }

    // From `i` (just after the opening quote): the literal, prefix included, becomes one marker.
    void string_literal(std::size_t i, Escapes escapes) {
        const std::size_t n = sql_.size();
        while (i < n) {
            const unsigned char c = at(i);
            if (c == '\'') {
                if (i + 1 < n && at(i + 1) == '\'') {
                    i += 2;
                    continue;
                }
                redact_until(i + 1);
                return;
            }
            if (c == '\\') {
                if (escapes == Escapes::Ambiguous) return redact_rest();
                if (escapes == Escapes::Always) ++i;  // the escaped byte, a quote included
            }
            ++i;
        }
        redact_rest();  // unterminated
    }

    // "..." (and U&"..."): a name, kept; an unterminated one hides the rest.
    void quoted_identifier(std::size_t i) {
        const std::size_t n = sql_.size();
        while (i < n) {
            if (at(i) == '"') {
                if (i + 1 < n && at(i + 1) == '"') {
                    i += 2;
                    continue;
                }
                keep_until(i + 1);
                return;
            }
            ++i;
        }
        redact_rest();
    }

    // $1 (a parameter, kept), $tag$...$tag$ (a constant, redacted), or a lone '$'.
    void dollar() {
        const std::size_t n = sql_.size();
        if (is_digit(peek(1))) {
            std::size_t i = pos_ + 1;
            while (i < n && is_digit(at(i)))
                ++i;
            keep_until(i);
            return;
        }
        std::size_t i = pos_ + 1;
        if (i < n && is_ident_start(at(i))) {
            while (i < n && is_ident_cont(at(i)) && at(i) != '$')
                ++i;
        }
        if (i >= n || at(i) != '$') {
            keep_until(pos_ + 1);
            return;
        }
        const std::string_view tag = sql_.substr(pos_, i + 1 - pos_);
        const std::size_t close = sql_.find(tag, i + 1);
        if (close == std::string_view::npos) return redact_rest();
        redact_until(close + tag.size());
    }

    // A keyword or identifier, kept; or the one-letter prefix of a literal (E'', B'', X'', N'',
    // U&'', U&""), which scan.l recognises only as a word of its own (longest match).
    void word() {
        const std::size_t n = sql_.size();
        const auto lead = static_cast<unsigned char>(at(pos_) | 0x20);
        if (peek(1) == '\'') {
            if (lead == 'e') return string_literal(pos_ + 2, Escapes::Always);
            if (lead == 'n') return string_literal(pos_ + 2, Escapes::Ambiguous);
            if (lead == 'b' || lead == 'x') return string_literal(pos_ + 2, Escapes::Never);
        }
        if (lead == 'u' && peek(1) == '&') {
            // Unicode escapes use a backslash but never escape the quote.
            if (peek(2) == '\'') return string_literal(pos_ + 3, Escapes::Never);
            if (peek(2) == '"') return quoted_identifier(pos_ + 3);
        }
        std::size_t i = pos_;
        while (i < n && is_ident_cont(at(i)))
            ++i;
        keep_until(i);
    }

    // 42, 4.2, .5, 1e-10, 0x1F, 1_000 and any trailing junk: one marker.
    void number() {
        const std::size_t n = sql_.size();
        std::size_t i = pos_;
        while (i < n && (is_digit(at(i)) || at(i) == '.' || is_ident_cont(at(i)))) {
            if ((at(i) == 'e' || at(i) == 'E') && i + 1 < n &&
                (at(i + 1) == '+' || at(i + 1) == '-'))
                ++i;
            ++i;
        }
        redact_until(i);
    }

    std::string_view sql_;
    std::size_t pos_ = 0;
    std::string out_;
};

}  // namespace

std::string redact_statement_literals(std::string_view sql) {
    return Redactor(sql).run();
}

}  // namespace pgtether::protocol
