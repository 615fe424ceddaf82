#include "protocol/lock_statement.hpp"

#include <limits>
#include <string>

namespace pgtether::protocol {

namespace {

// ---------------------------------------------------------------------------------------------
// Tokens (scan.l's lexical rules, §4.1; only as fine as exact accounting needs)

enum class Tok : std::uint8_t {
    Word,         // unquoted identifier or keyword
    QuotedIdent,  // "..." (the text is the raw body; "" not undone, see name_is)
    Integer,      // digits only
    Number,       // any other numeric literal
    String,       // '...', E'...', $tag$...$tag$, B'', X'', N'', U&''
    Param,        // $n
    Op,           // a run of operator characters
    Open,         // ( or [
    Close,        // ) or ]
    Comma,
    Dot,
    DoubleColon,
    Semicolon,
    Other,
};

struct Token {
    Tok kind;
    std::string_view text;
};

constexpr bool is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
constexpr bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
constexpr bool is_ident_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
constexpr bool is_ident_cont(unsigned char c) {
    return is_ident_start(c) || is_digit(c) || c == '$';
}
constexpr bool is_op_char(unsigned char c) {
    switch (c) {
        case '+': case '-': case '*': case '/': case '<': case '>': case '=': case '~':
        case '!': case '@': case '#': case '%': case '^': case '&': case '|': case '`':
        case '?':
            return true;
        default:
            return false;
    }
}

bool equals_lower(std::string_view word, std::string_view lower) {
    if (word.size() != lower.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i) {
        auto c = static_cast<unsigned char>(word[i]);
        if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c | 0x20);
        if (c != static_cast<unsigned char>(lower[i])) return false;
    }
    return true;
}

// Splits the whole text into tokens. `reliable` turns false where the server might lex the text
// differently (then nothing about it is exact).
class Tokenizer {
  public:
    explicit Tokenizer(std::string_view sql) : sql_(sql) {}

    bool run(std::vector<Token>& out) {
        const std::size_t n = sql_.size();
        while (pos_ < n && reliable_) {
            const auto c = at(pos_);
            const std::size_t start = pos_;
            if (is_space(c)) {
                ++pos_;
            } else if (c == '-' && peek(1) == '-') {
                while (pos_ < n && at(pos_) != '\n' && at(pos_) != '\r') ++pos_;
            } else if (c == '/' && peek(1) == '*') {
                block_comment();
            } else if (c == '\'') {
                quoted(pos_ + 1, '\'', /*backslash_escapes=*/false, /*plain_string=*/true);
                out.push_back({Tok::String, slice(start)});
            } else if (c == '"') {
                quoted(pos_ + 1, '"', false, false);
                out.push_back({Tok::QuotedIdent, sql_.substr(start + 1, pos_ - start - 2)});
            } else if (c == '$') {
                dollar(out);
            } else if (is_ident_start(c)) {
                word(out);
            } else if (is_digit(c) || (c == '.' && is_digit(peek(1)))) {
                number(out);
            } else if (c == ':' && peek(1) == ':') {
                pos_ += 2;
                out.push_back({Tok::DoubleColon, slice(start)});
            } else if (is_op_char(c)) {
                // scan.l: an operator ends where a comment starts.
                while (pos_ < n && is_op_char(at(pos_)) &&
                       !(at(pos_) == '-' && peek(1) == '-') &&
                       !(at(pos_) == '/' && peek(1) == '*')) {
                    ++pos_;
                }
                out.push_back({Tok::Op, slice(start)});
            } else {
                ++pos_;
                Tok kind = Tok::Other;
                if (c == '(' || c == '[') kind = Tok::Open;
                if (c == ')' || c == ']') kind = Tok::Close;
                if (c == ',') kind = Tok::Comma;
                if (c == '.') kind = Tok::Dot;
                if (c == ';') kind = Tok::Semicolon;
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

    void dollar(std::vector<Token>& out) {
        const std::size_t start = pos_;
        const std::size_t n = sql_.size();
        if (is_digit(peek(1))) {
            pos_ += 1;
            while (pos_ < n && is_digit(at(pos_))) ++pos_;
            if (pos_ < n && is_ident_cont(at(pos_))) reliable_ = false;  // "$1abc": junk
            out.push_back({Tok::Param, slice(start)});
            return;
        }
        // $tag$ ... $tag$ (the tag is an identifier without '$', or empty).
        std::size_t i = pos_ + 1;
        if (i < n && is_ident_start(at(i))) {
            while (i < n && is_ident_cont(at(i)) && at(i) != '$') ++i;
        }
        if (i >= n || at(i) != '$') {
            ++pos_;
            out.push_back({Tok::Other, slice(start)});
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
        out.push_back({Tok::String, slice(start)});
    }

    void word(std::vector<Token>& out) {
        const std::size_t start = pos_;
        const std::size_t n = sql_.size();
        const auto lead = static_cast<unsigned char>(at(pos_) | 0x20);
        // E'', B'', X'', N'' and U&'' / U&"" (only as the whole word: scan.l's longest match).
        if (peek(1) == '\'' && (lead == 'e' || lead == 'b' || lead == 'x' || lead == 'n')) {
            quoted(pos_ + 2, '\'', lead == 'e', lead == 'n');
            out.push_back({Tok::String, slice(start)});
            return;
        }
        if (lead == 'u' && peek(1) == '&' && (peek(2) == '\'' || peek(2) == '"')) {
            const char quote = static_cast<char>(peek(2));
            // Unicode escapes use backslash but never escape the quote; under
            // standard_conforming_strings off the server refuses U&'' (an error: uncertain anyway).
            quoted(pos_ + 3, quote, false, false);
            out.push_back({quote == '"' ? Tok::QuotedIdent : Tok::String, slice(start)});
            return;
        }
        while (pos_ < n && is_ident_cont(at(pos_))) ++pos_;
        out.push_back({Tok::Word, slice(start)});
    }

    void number(std::vector<Token>& out) {
        const std::size_t start = pos_;
        const std::size_t n = sql_.size();
        bool integer = true;
        while (pos_ < n && is_digit(at(pos_))) ++pos_;
        // Anything that continues the literal (a fraction, an exponent, trailing junk, PostgreSQL
        // 16's underscores and 0x prefixes) makes it something other than a plain integer.
        while (pos_ < n && (is_digit(at(pos_)) || at(pos_) == '.' || is_ident_cont(at(pos_)))) {
            integer = false;
            if ((at(pos_) == 'e' || at(pos_) == 'E') && (peek(1) == '+' || peek(1) == '-')) ++pos_;
            ++pos_;
        }
        out.push_back({integer ? Tok::Integer : Tok::Number, slice(start)});
    }

    std::string_view sql_;
    std::size_t pos_ = 0;
    bool reliable_ = true;
};

// ---------------------------------------------------------------------------------------------
// The exact shape: SELECT call [, call ...]

struct FunctionName {
    std::string_view name;
    LockFunction function;
    std::uint8_t min_args;
    std::uint8_t max_args;
};
constexpr FunctionName kFunctions[] = {
    {"pg_advisory_lock", LockFunction::Lock, 1, 2},
    {"pg_advisory_lock_shared", LockFunction::LockShared, 1, 2},
    {"pg_try_advisory_lock", LockFunction::TryLock, 1, 2},
    {"pg_try_advisory_lock_shared", LockFunction::TryLockShared, 1, 2},
    {"pg_advisory_unlock", LockFunction::Unlock, 1, 2},
    {"pg_advisory_unlock_shared", LockFunction::UnlockShared, 1, 2},
    {"pg_advisory_unlock_all", LockFunction::UnlockAll, 0, 0},
};

// An unquoted name matches in any case (it is folded to lower case); a quoted one exactly.
bool name_is(const Token& token, std::string_view lower) {
    if (token.kind == Tok::Word) return equals_lower(token.text, lower);
    if (token.kind == Tok::QuotedIdent) return token.text == lower;
    return false;
}

// Width in bytes of an integer type name, 0 if it is not one.
std::uint8_t integer_type_bytes(const Token& token) {
    if (token.kind != Tok::Word) return 0;
    if (equals_lower(token.text, "smallint") || equals_lower(token.text, "int2")) return 2;
    if (equals_lower(token.text, "integer") || equals_lower(token.text, "int") ||
        equals_lower(token.text, "int4")) {
        return 4;
    }
    if (equals_lower(token.text, "bigint") || equals_lower(token.text, "int8")) return 8;
    return 0;
}

bool fits(std::int64_t value, std::uint8_t bytes) {
    switch (bytes) {
        case 2: return value >= std::numeric_limits<std::int16_t>::min() &&
                       value <= std::numeric_limits<std::int16_t>::max();
        case 4: return value >= std::numeric_limits<std::int32_t>::min() &&
                       value <= std::numeric_limits<std::int32_t>::max();
        default: return true;
    }
}

class ShapeParser {
  public:
    ShapeParser(const Token* begin, const Token* end) : p_(begin), end_(end) {}

    std::optional<LockCalls> statement() {
        if (!take_if([](const Token& t) { return name_is(t, "select"); })) return std::nullopt;
        LockCalls calls;
        do {
            auto c = parenthesized_call();
            if (!c) return std::nullopt;
            calls.push_back(*c);
            if (!output_name()) return std::nullopt;
        } while (take(Tok::Comma));
        if (p_ != end_) return std::nullopt;
        return calls;
    }

  private:
    [[nodiscard]] bool at(Tok kind) const { return p_ != end_ && p_->kind == kind; }
    bool take(Tok kind) {
        if (!at(kind)) return false;
        ++p_;
        return true;
    }
    template <typename Pred>
    bool take_if(Pred pred) {
        if (p_ == end_ || !pred(*p_)) return false;
        ++p_;
        return true;
    }

    // `(pg_try_advisory_lock($1))`: parentheses change neither the call nor its result.
    std::optional<LockCall> parenthesized_call() {
        if (!take(Tok::Open)) return call();
        auto c = parenthesized_call();
        if (!c || !take(Tok::Close)) return std::nullopt;
        return c;
    }

    // An output column name renames the result column and nothing else (migration tools write
    // `SELECT pg_try_advisory_lock($1) AS locked`): `AS name`, `AS "Name"`, or a bare name
    // right before the next column or the end. A bare word anywhere else (FROM, IS, ...) is
    // left unread, so the statement is not exact. Returns false only for an AS without a name.
    bool output_name() {
        if (take_if([](const Token& t) { return name_is(t, "as"); })) {
            return take(Tok::Word) || take(Tok::QuotedIdent);
        }
        if ((at(Tok::Word) || at(Tok::QuotedIdent)) &&
            (p_ + 1 == end_ || (p_ + 1)->kind == Tok::Comma)) {
            ++p_;
        }
        return true;
    }

    std::optional<LockCall> call() {
        // Optionally qualified with pg_catalog (any other schema is a different function).
        if (p_ + 1 < end_ && name_is(*p_, "pg_catalog") && (p_ + 1)->kind == Tok::Dot) p_ += 2;
        if (p_ == end_) return std::nullopt;
        const FunctionName* found = nullptr;
        for (const auto& f : kFunctions) {
            if (name_is(*p_, f.name)) found = &f;
        }
        if (!found) return std::nullopt;
        ++p_;
        if (!take(Tok::Open)) return std::nullopt;
        LockCall result;
        result.function = found->function;
        if (!at(Tok::Close)) {
            do {
                if (result.argument_count == 2) return std::nullopt;
                auto a = argument();
                if (!a) return std::nullopt;
                result.arguments[result.argument_count++] = *a;
            } while (take(Tok::Comma));
        }
        if (!take(Tok::Close)) return std::nullopt;
        if (result.argument_count < found->min_args || result.argument_count > found->max_args) {
            return std::nullopt;
        }
        // Two keys are int4 (the other key space): a bigint there finds no function (an error,
        // which the accounting would see, but it is simpler not to claim it).
        for (std::uint8_t i = 0; i < result.argument_count; ++i) {
            const auto& a = result.arguments[i];
            if (result.argument_count == 2 &&
                (a.cast_bytes == 8 || (a.parameter == 0 && !fits(a.literal, 4)))) {
                return std::nullopt;
            }
        }
        return result;
    }

    std::optional<LockArgument> argument() {
        LockArgument a;
        bool negative = false;
        if (at(Tok::Op) && (p_->text == "-" || p_->text == "+")) {
            negative = p_->text == "-";
            ++p_;
            if (!at(Tok::Integer)) return std::nullopt;  // no sign on parameters
        }
        if (at(Tok::Integer)) {
            // Larger than bigint: the server makes it numeric, and no lock function takes that.
            std::uint64_t value = 0;
            for (char c : p_->text) {
                auto digit = static_cast<std::uint64_t>(c - '0');
                if (value > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) -
                             digit) / 10) {
                    return std::nullopt;
                }
                value = value * 10 + digit;
            }
            a.literal = negative ? -static_cast<std::int64_t>(value)
                                 : static_cast<std::int64_t>(value);
            ++p_;
        } else if (at(Tok::Param)) {
            unsigned long n = 0;
            for (char c : p_->text.substr(1)) {
                n = n * 10 + static_cast<unsigned long>(c - '0');
                if (n > 65535) return std::nullopt;
            }
            if (n == 0) return std::nullopt;
            a.parameter = static_cast<std::uint16_t>(n);
            ++p_;
        } else {
            return std::nullopt;
        }
        if (take(Tok::DoubleColon)) {
            if (p_ == end_) return std::nullopt;
            a.cast_bytes = integer_type_bytes(*p_);
            if (a.cast_bytes == 0) return std::nullopt;
            ++p_;
            // A literal out of the cast's range fails on the server; claim nothing.
            if (a.parameter == 0 && !fits(a.literal, a.cast_bytes)) return std::nullopt;
        }
        return a;
    }

    const Token* p_;
    const Token* end_;
};

}  // namespace

const char* lock_function_name(LockFunction function) {
    for (const auto& f : kFunctions) {
        if (f.function == function) return f.name.data();
    }
    return "?";
}

bool lock_function_returns_bool(LockFunction function) {
    switch (function) {
        case LockFunction::TryLock:
        case LockFunction::TryLockShared:
        case LockFunction::Unlock:
        case LockFunction::UnlockShared:
            return true;
        case LockFunction::Lock:
        case LockFunction::LockShared:
        case LockFunction::UnlockAll:
            return false;
    }
    return false;
}

QueryLockPlan plan_query_locks(std::string_view sql, const SqlScanner& scanner) {
    // A text we may split differently from the server: nothing exact, and nothing known about
    // its transaction control either.
    QueryLockPlan unknown;
    QueryLockPlan plan;
    plan.safe_to_follow = true;
    std::vector<Token> tokens;
    if (!Tokenizer(sql).run(tokens)) return unknown;
    bool exact = true;
    std::size_t depth = 0;
    std::size_t first = 0;  // first token of the current statement
    auto end_statement = [&](std::size_t end) {
        if (end == first) return;  // an empty statement produces no result
        const Token* b = tokens.data() + first;
        const Token* e = tokens.data() + end;
        const std::uint32_t index = plan.statement_count++;
        for (const char* word : {"begin", "start", "commit", "end", "rollback", "abort",
                                 "savepoint", "release", "prepare", "copy"}) {
            if (b->kind == Tok::Word && name_is(*b, word)) plan.safe_to_follow = false;
        }
        if (auto calls = ShapeParser(b, e).statement()) {
            plan.lock_statements.emplace_back(index, std::move(*calls));
            return;
        }
        // Not exact: does it touch session locks at all? The scanner decides (over-inclusively)
        // on the statement's own text.
        const char* from = b->text.data();
        const char* to = (e - 1)->text.data() + (e - 1)->text.size();
        std::string_view text(from, static_cast<std::size_t>(to - from));
        if (scanner.scan(text) & (kEffectAdvisoryLock | kEffectDiscard)) exact = false;
    };
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const Token& t = tokens[i];
        // BEGIN ATOMIC ... END: its ';' do not end the statement (PostgreSQL 14+).
        if (name_is(t, "atomic")) return unknown;
        if (t.kind == Tok::Open) ++depth;
        if (t.kind == Tok::Close && depth > 0) --depth;
        if (t.kind == Tok::Semicolon && depth == 0) {
            end_statement(i);
            first = i + 1;
        }
    }
    end_statement(tokens.size());
    plan.exact = exact;
    return plan;
}

std::optional<LockCalls> parse_lock_select(std::string_view sql) {
    std::vector<Token> tokens;
    if (!Tokenizer(sql).run(tokens)) return std::nullopt;
    // One statement, optionally followed by ';'.
    std::size_t end = tokens.size();
    if (end > 0 && tokens[end - 1].kind == Tok::Semicolon) --end;
    for (std::size_t i = 0; i < end; ++i) {
        if (tokens[i].kind == Tok::Semicolon) return std::nullopt;
    }
    return ShapeParser(tokens.data(), tokens.data() + end).statement();
}

}  // namespace pgtether::protocol
