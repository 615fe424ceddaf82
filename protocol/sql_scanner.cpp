#include "protocol/sql_scanner.hpp"

#include <array>
#include <cstddef>

namespace pgtether::protocol {

namespace {

constexpr std::size_t kNone = std::string_view::npos;

// ---------------------------------------------------------------------------------------------
// Bytes, as PostgreSQL's lexer (src/backend/parser/scan.l) sees them.

enum class Char : std::uint8_t {
    Other,       // operators and punctuation
    Space,       // space, \t, \n, \r, \f, \v
    IdentStart,  // [A-Za-z_\x80-\xff]: starts an identifier or a dollar-quote tag
    Digit,
    Quote,
    DoubleQuote,
    Dollar,
    Minus,
    Slash,
    Semicolon,
    OpenParen,
    CloseParen,
};

constexpr std::array<Char, 256> make_char_table() {
    std::array<Char, 256> t{};
    for (std::size_t b = 0; b < t.size(); ++b) {
        if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_' || b >= 0x80) {
            t[b] = Char::IdentStart;
        } else if (b >= '0' && b <= '9') {
            t[b] = Char::Digit;
        }
    }
    for (char c : {' ', '\t', '\n', '\r', '\f', '\v'})
        t[static_cast<std::uint8_t>(c)] = Char::Space;
    t['\''] = Char::Quote;
    t['"'] = Char::DoubleQuote;
    t['$'] = Char::Dollar;
    t['-'] = Char::Minus;
    t['/'] = Char::Slash;
    t[';'] = Char::Semicolon;
    t['('] = Char::OpenParen;
    t[')'] = Char::CloseParen;
    return t;
}
constexpr std::array<Char, 256> kChar = make_char_table();

constexpr bool is_space(std::uint8_t b) {
    return kChar[b] == Char::Space;
}
constexpr bool is_digit(std::uint8_t b) {
    return kChar[b] == Char::Digit;
}
// Dollar-quote tags are identifiers without '$' (scan.l dolq_start / dolq_cont).
constexpr bool is_tag_start(std::uint8_t b) {
    return kChar[b] == Char::IdentStart;
}
constexpr bool is_tag_cont(std::uint8_t b) {
    return is_tag_start(b) || is_digit(b);
}
// Unquoted identifiers may contain '$' after the first character (scan.l ident_cont). A table of
// its own: this test runs on every byte of every word.
constexpr std::array<bool, 256> make_ident_cont_table() {
    std::array<bool, 256> t{};
    for (std::size_t b = 0; b < t.size(); ++b) {
        t[b] = is_tag_cont(static_cast<std::uint8_t>(b)) || b == '$';
    }
    return t;
}
constexpr std::array<bool, 256> kIdentCont = make_ident_cont_table();
constexpr bool is_ident_cont(std::uint8_t b) {
    return kIdentCont[b];
}

// A number runs over digits, '.' and '_' (a loose superset of scan.l's numeric forms: it only has
// to end where an identifier or a keyword could start).
constexpr std::array<bool, 256> make_number_cont_table() {
    std::array<bool, 256> t{};
    for (std::size_t b = 0; b < t.size(); ++b) {
        t[b] = is_digit(static_cast<std::uint8_t>(b)) || b == '.' || b == '_';
    }
    return t;
}
constexpr std::array<bool, 256> kNumberCont = make_number_cont_table();

constexpr int hex_value(std::uint8_t b) {
    if (b >= '0' && b <= '9') return b - '0';
    if (b >= 'a' && b <= 'f') return b - 'a' + 10;
    if (b >= 'A' && b <= 'F') return b - 'A' + 10;
    return -1;
}

// Compares an identifier with a lower-case, letters-only keyword. `b | 0x20` folds exactly the
// ASCII letters onto lower case here: the other identifier bytes ('_', digits, '$', >= 0x80)
// never fold onto a letter.
constexpr bool equals_keyword(std::string_view word, std::string_view keyword) {
    if (word.size() != keyword.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i) {
        if ((static_cast<std::uint8_t>(word[i]) | 0x20) != static_cast<std::uint8_t>(keyword[i])) {
            return false;
        }
    }
    return true;
}

// Feeds the UTF-8 encoding of a code point decoded from an escape (U&'\0061', E'\u0061'), so
// names spelt with escapes still match. Values beyond Unicode, which the server rejects, feed a
// byte that is in no name.
void feed_code_point(MatchCursor& cursor, std::uint32_t cp) {
    if (cp < 0x80) {
        cursor.feed(static_cast<std::uint8_t>(cp));
    } else if (cp < 0x800) {
        cursor.feed(static_cast<std::uint8_t>(0xC0 | (cp >> 6)));
        cursor.feed(static_cast<std::uint8_t>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        cursor.feed(static_cast<std::uint8_t>(0xE0 | (cp >> 12)));
        cursor.feed(static_cast<std::uint8_t>(0x80 | ((cp >> 6) & 0x3F)));
        cursor.feed(static_cast<std::uint8_t>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0x10FFFF) {
        cursor.feed(static_cast<std::uint8_t>(0xF0 | (cp >> 18)));
        cursor.feed(static_cast<std::uint8_t>(0x80 | ((cp >> 12) & 0x3F)));
        cursor.feed(static_cast<std::uint8_t>(0x80 | ((cp >> 6) & 0x3F)));
        cursor.feed(static_cast<std::uint8_t>(0x80 | (cp & 0x3F)));
    } else {
        cursor.feed(0);
    }
}

// ---------------------------------------------------------------------------------------------
// Statement kinds, from the keywords of each top-level statement.

enum class Keyword : std::uint8_t {
    Other,  // any other word or token
    Alter,
    Close,
    Constraint,
    Constraints,
    Create,
    Deallocate,
    Declare,
    Discard,
    Do,
    Drop,
    Execute,
    Extension,
    Function,
    Global,
    Hold,
    Insert,
    Into,
    Listen,
    Load,
    Local,
    Materialized,
    Merge,
    Or,
    Prepare,
    Procedure,
    Recursive,
    Replace,
    Reset,
    Routine,
    Savepoint,
    Set,
    Temp,
    Temporary,
    Transaction,
    Trigger,
    Unlisten,
    View,
    With,
};

struct KeywordEntry {
    std::string_view text;
    Keyword keyword;
};

constexpr KeywordEntry kKeywords[] = {
    {"alter", Keyword::Alter},
    {"close", Keyword::Close},
    {"constraint", Keyword::Constraint},
    {"constraints", Keyword::Constraints},
    {"create", Keyword::Create},
    {"deallocate", Keyword::Deallocate},
    {"declare", Keyword::Declare},
    {"discard", Keyword::Discard},
    {"do", Keyword::Do},
    {"drop", Keyword::Drop},
    {"execute", Keyword::Execute},
    {"extension", Keyword::Extension},
    {"function", Keyword::Function},
    {"global", Keyword::Global},
    {"hold", Keyword::Hold},
    {"insert", Keyword::Insert},
    {"into", Keyword::Into},
    {"listen", Keyword::Listen},
    {"load", Keyword::Load},
    {"local", Keyword::Local},
    {"materialized", Keyword::Materialized},
    {"merge", Keyword::Merge},
    {"or", Keyword::Or},
    {"prepare", Keyword::Prepare},
    {"procedure", Keyword::Procedure},
    {"recursive", Keyword::Recursive},
    {"replace", Keyword::Replace},
    {"reset", Keyword::Reset},
    {"routine", Keyword::Routine},
    {"savepoint", Keyword::Savepoint},
    {"set", Keyword::Set},
    {"temp", Keyword::Temp},
    {"temporary", Keyword::Temporary},
    {"transaction", Keyword::Transaction},
    {"trigger", Keyword::Trigger},
    {"unlisten", Keyword::Unlisten},
    {"view", Keyword::View},
    {"with", Keyword::With},
};
constexpr std::size_t kLongestKeyword = 12;

// Runs on every word of every statement, so it must reject most words at once: the keywords are
// indexed by first letter and length (at most two share both), and a word is compared only with
// those.
constexpr std::size_t kCandidates = 2;
using KeywordCandidates = std::array<std::uint8_t, kCandidates>;
using KeywordIndex = std::array<std::array<KeywordCandidates, kLongestKeyword + 1>, 26>;
constexpr std::uint8_t kNoKeyword = 0xFF;

constexpr KeywordIndex make_keyword_index() {
    KeywordIndex index{};
    for (auto& by_length : index) {
        for (auto& candidates : by_length)
            candidates.fill(kNoKeyword);
    }
    for (std::size_t i = 0; i < std::size(kKeywords); ++i) {
        const std::string_view text = kKeywords[i].text;
        auto& candidates = index[static_cast<std::size_t>(text[0] - 'a')].at(text.size());
        std::size_t slot = 0;
        while (slot < kCandidates && candidates[slot] != kNoKeyword)
            ++slot;
        candidates.at(slot) = static_cast<std::uint8_t>(i);  // a full slot fails to compile
    }
    return index;
}
constexpr KeywordIndex kKeywordIndex = make_keyword_index();

Keyword classify(std::string_view word) {
    if (word.size() < 2 || word.size() > kLongestKeyword) return Keyword::Other;
    const std::uint8_t first = static_cast<std::uint8_t>(word[0]) | 0x20;
    if (first < 'a' || first > 'z') return Keyword::Other;
    for (std::uint8_t candidate : kKeywordIndex[first - 'a'][word.size()]) {
        if (candidate == kNoKeyword) break;
        if (equals_keyword(word, kKeywords[candidate].text)) return kKeywords[candidate].keyword;
    }
    return Keyword::Other;
}

// Follows the tokens of one top-level statement at a time. Only unquoted words are keywords;
// every other token (quoted identifier, literal, number, operator, parenthesis) is Other, so it
// breaks the keyword sequences below.
class StatementTracker {
  public:
    void token(Keyword keyword) {
        // Most tokens of most statements: nothing pending, nothing to start.
        if (keyword == Keyword::Other && lead_ == Lead::Other && !temp_chain_) {
            previous_ = keyword;
            return;
        }
        switch (lead_) {
            case Lead::None:
                lead_ = first_token(keyword);
                break;
            case Lead::Set:
                // SET LOCAL, SET TRANSACTION and SET CONSTRAINTS end with the transaction; any
                // other SET (including SET SESSION ...) outlives it.
                if (keyword != Keyword::Local && keyword != Keyword::Transaction &&
                    keyword != Keyword::Constraints) {
                    flags_ |= kEffectSet;
                }
                lead_ = Lead::Other;
                break;
            case Lead::Declare:
                if (previous_ == Keyword::With && keyword == Keyword::Hold) {
                    flags_ |= kEffectCursor;
                }
                break;
            case Lead::Ddl:
                // CREATE OR REPLACE TEMP RECURSIVE VIEW: only modifiers stand between the verb
                // and the object word.
                if (is_catalog_object(keyword)) {
                    flags_ |= kEffectCatalogChange;
                    lead_ = Lead::Other;
                } else if (!is_ddl_modifier(keyword)) {
                    lead_ = Lead::Other;
                }
                break;
            case Lead::Insert:
            case Lead::Other:
                break;
        }
        // CREATE [OR REPLACE] [GLOBAL|LOCAL] TEMP|TEMPORARY, and SELECT ... INTO [GLOBAL|LOCAL]
        // TEMP|TEMPORARY, anywhere in the statement, so EXPLAIN ANALYZE CREATE TEMP ... and
        // WITH ... SELECT ... INTO TEMP count too. After INSERT/MERGE, INTO names a table that
        // may well be called "temp".
        if (temp_chain_ && (keyword == Keyword::Temp || keyword == Keyword::Temporary)) {
            flags_ |= kEffectTempObject;
        }
        if (keyword == Keyword::Create || (keyword == Keyword::Into && lead_ != Lead::Insert)) {
            flags_ |= kEffectCreate;
        }
        temp_chain_ = keyword == Keyword::Create ||
                      (keyword == Keyword::Into && lead_ != Lead::Insert) ||
                      (temp_chain_ && (keyword == Keyword::Or || keyword == Keyword::Replace ||
                                       keyword == Keyword::Global || keyword == Keyword::Local));
        previous_ = keyword;
    }

    void end_statement() {
        if (lead_ == Lead::Set) flags_ |= kEffectSet;  // a bare "SET": never hide a setting
        lead_ = Lead::None;
        previous_ = Keyword::Other;
        temp_chain_ = false;
    }

    [[nodiscard]] std::uint32_t flags() const { return flags_; }

  private:
    enum class Lead : std::uint8_t {
        None,     // no token yet in this statement
        Set,      // "SET", waiting for the word that says which kind
        Declare,  // DECLARE: looking for WITH HOLD
        Insert,   // INSERT or MERGE
        Ddl,      // CREATE / ALTER / DROP: looking for FUNCTION, VIEW, ...
        Other,
    };

    // Words that may stand between CREATE and VIEW (OR REPLACE TEMP RECURSIVE, MATERIALIZED)
    // or TRIGGER (CONSTRAINT, OR REPLACE).
    static bool is_ddl_modifier(Keyword keyword) {
        return keyword == Keyword::Or || keyword == Keyword::Replace || keyword == Keyword::Temp ||
               keyword == Keyword::Temporary || keyword == Keyword::Global ||
               keyword == Keyword::Local || keyword == Keyword::Recursive ||
               keyword == Keyword::Constraint || keyword == Keyword::Materialized;
    }

    static bool is_catalog_object(Keyword keyword) {
        return keyword == Keyword::Function || keyword == Keyword::Procedure ||
               keyword == Keyword::Routine || keyword == Keyword::Trigger ||
               keyword == Keyword::View || keyword == Keyword::Extension;
    }

    Lead first_token(Keyword keyword) {
        switch (keyword) {
            case Keyword::Listen:
            case Keyword::Unlisten:
                flags_ |= kEffectListen;
                return Lead::Other;
            case Keyword::Close:
                flags_ |= kEffectCursor;
                return Lead::Other;
            case Keyword::Prepare:
            case Keyword::Execute:
            case Keyword::Deallocate:
                flags_ |= kEffectSqlPrepare;
                return Lead::Other;
            case Keyword::Load:
                flags_ |= kEffectLoad;
                return Lead::Other;
            case Keyword::Discard:
                flags_ |= kEffectDiscard;
                return Lead::Other;
            case Keyword::Do:
                flags_ |= kEffectOpaque;
                return Lead::Other;
            case Keyword::Drop:
                // DROP may end a temporary table's life (over-inclusive: any DROP).
                flags_ |= kEffectTempObject;
                return Lead::Ddl;
            case Keyword::Create:
            case Keyword::Alter:
                return Lead::Ddl;
            case Keyword::Reset:
                flags_ |= kEffectSet;
                return Lead::Other;
            case Keyword::Savepoint:
                flags_ |= kEffectSavepoint;
                return Lead::Other;
            case Keyword::Set:
                return Lead::Set;
            case Keyword::Declare:
                return Lead::Declare;
            case Keyword::Insert:
            case Keyword::Merge:
                return Lead::Insert;
            default:
                return Lead::Other;
        }
    }

    Lead lead_ = Lead::None;
    Keyword previous_ = Keyword::Other;
    bool temp_chain_ = false;  // after CREATE or INTO, through OR REPLACE / GLOBAL / LOCAL
    std::uint32_t flags_ = 0;
};

// ---------------------------------------------------------------------------------------------
// One pass over the text.

class Lexer {
  public:
    // `plain_backslash_escapes`: lex '...' as if standard_conforming_strings were off, i.e. with
    // the backslash escapes of E'...' (§4.1.2.2).
    Lexer(const SubstringMatcher& matcher, const KnownNames* known, std::string_view sql,
          bool plain_backslash_escapes)
        : matcher_(matcher),
          known_(known),
          sql_(sql),
          plain_backslash_escapes_(plain_backslash_escapes) {}

    std::uint32_t run() {
        const std::size_t n = sql_.size();
        while (pos_ < n) {
            const Char kind = kChar[at(pos_)];
            // Spaces and words are most of any text: test for them before the jump table.
            if (kind == Char::Space) {
                ++pos_;
                continue;
            }
            if (kind == Char::IdentStart) {
                word();
                continue;
            }
            switch (kind) {
                case Char::Space:
                case Char::IdentStart:
                    break;  // handled above
                case Char::Digit:
                    while (pos_ < n && kNumberCont[at(pos_)])
                        ++pos_;
                    statement_.token(Keyword::Other);
                    break;
                case Char::Quote:
                    pos_ = string_literal(pos_ + 1, plain_backslash_escapes_);
                    statement_.token(Keyword::Other);
                    break;
                case Char::DoubleQuote: {
                    MatchCursor cursor(matcher_);
                    const std::size_t body = pos_ + 1;
                    pos_ = quoted_body(body, '"', -1, cursor);
                    hits_ |= cursor.hits();
                    if (known_ && called_at(pos_)) {
                        // The name between the quotes; "" inside stands for one quote, which
                        // no catalog name here is worth unescaping for: unknown.
                        const std::string_view name =
                            sql_.substr(body, pos_ > body ? pos_ - body - 1 : 0);
                        if (name.find('"') != std::string_view::npos ||
                            !known_->contains_exact(name)) {
                            hits_ |= kEffectUnknownCall | kEffectAdvisoryLock;
                        }
                    }
                    statement_.token(Keyword::Other);
                    break;
                }
                case Char::Dollar:
                    dollar();
                    break;
                case Char::Minus:
                    if (pos_ + 1 < n && at(pos_ + 1) == '-') {
                        pos_ = line_comment_end(pos_);
                    } else {
                        other_token();
                    }
                    break;
                case Char::Slash:
                    if (pos_ + 1 < n && at(pos_ + 1) == '*') {
                        block_comment();
                    } else {
                        other_token();
                    }
                    break;
                case Char::Semicolon:
                    if (depth_ == 0) {
                        statement_.end_statement();
                        ++pos_;
                    } else {
                        other_token();
                    }
                    break;
                case Char::OpenParen:
                    ++depth_;
                    other_token();
                    break;
                case Char::CloseParen:
                    if (depth_ > 0) --depth_;
                    other_token();
                    break;
                case Char::Other:
                    other_token();
                    break;
            }
        }
        statement_.end_statement();
        return hits_ | statement_.flags();
    }

    // True when some '...' literal held a backslash while lexed with standard_conforming_strings
    // on: only then can the other setting split the text differently.
    [[nodiscard]] bool plain_literal_had_backslash() const { return plain_literal_backslash_; }

  private:
    [[nodiscard]] std::uint8_t at(std::size_t i) const {
        return static_cast<std::uint8_t>(sql_[i]);
    }

    void other_token() {
        ++pos_;
        statement_.token(Keyword::Other);
    }

    // An unquoted word: keyword, identifier, or the prefix of E'', B'', X'', N'', U&'' and U&"".
    // A prefix counts only as the whole word (scan.l's longest match: "be'x'" is be followed by
    // a plain literal).
    void word() {
        const std::size_t n = sql_.size();
        const std::size_t start = pos_;
        // Names are matched while the word is read; the masks are collected in the rare word
        // that has a hit.
        const SubstringMatcher::Word word = matcher_.read_word(sql_, start);
        const std::size_t i = word.end;
        if (i - start == 1 && i < n) {
            const std::uint8_t lead = at(start) | 0x20;
            const std::uint8_t next = at(i);
            if (next == '\'' && (lead == 'e' || lead == 'b' || lead == 'x' || lead == 'n')) {
                // E'' always has backslash escapes; B'' and X'' never do; N'' is a plain literal.
                const bool escapes = lead == 'e' || (lead == 'n' && plain_backslash_escapes_);
                pos_ = string_literal(i + 1, escapes);
                statement_.token(Keyword::Other);
                return;
            }
            if (lead == 'u' && next == '&' && i + 1 < n &&
                (at(i + 1) == '\'' || at(i + 1) == '"')) {
                unicode_literal(i + 1);
                statement_.token(Keyword::Other);
                return;
            }
        }
        const std::string_view text(sql_.data() + start, i - start);  // no bounds check: i <= n
        if (word.hit) hits_ |= matcher_.find_all(text);
        if (known_ && called_at(i) && !known_->contains_word(text)) {
            hits_ |= kEffectUnknownCall | kEffectAdvisoryLock;
        }
        statement_.token(classify(text));
        pos_ = i;
    }

    // Whether the name that ends at `i` is called: '(' follows, after blanks and comments.
    [[nodiscard]] bool called_at(std::size_t i) const {
        i = skip_blanks(i);
        return i < sql_.size() && at(i) == '(';
    }

    // '...' or E'...' from just after the opening quote; returns the position after the closing
    // quote (the end of the text if there is none). Names are looked for in the raw bytes and, for
    // escaped literals, in the decoded ones as well.
    std::size_t string_literal(std::size_t i, bool backslash_escapes) {
        const std::size_t n = sql_.size();
        MatchCursor raw(matcher_);
        MatchCursor decoded(matcher_);
        while (i < n) {
            const std::uint8_t b = at(i);
            if (b == '\'') {
                if (i + 1 < n && at(i + 1) == '\'') {  // '' stands for one quote
                    raw.feed(b);
                    raw.feed(b);
                    decoded.feed(b);
                    i += 2;
                    continue;
                }
                const std::size_t next = continuation(i + 1);
                if (next == kNone) {
                    ++i;
                    break;
                }
                i = next + 1;  // 'pg_advisory'<newline>'_lock' is one literal: keep the cursors
                continue;
            }
            if (b == '\\') {
                if (backslash_escapes) {
                    i = backslash_escape(i, raw, decoded);
                    continue;
                }
                plain_literal_backslash_ = true;
            }
            raw.feed(b);
            decoded.feed(b);
            ++i;
        }
        hits_ |= raw.hits() | decoded.hits();
        return i;
    }

    // A backslash escape at `i` in an escaped literal (§4.1.2.2): \b \f \n \r \t, \ooo, \xhh,
    // \uXXXX, \UXXXXXXXX, or \c standing for c (including \' and \\, which must not end the
    // literal). Returns the position after it.
    std::size_t backslash_escape(std::size_t i, MatchCursor& raw, MatchCursor& decoded) {
        const std::size_t n = sql_.size();
        if (i + 1 >= n) {
            raw.feed('\\');
            return n;
        }
        const std::uint8_t c = at(i + 1);
        std::size_t end = i + 2;
        if (c >= '0' && c <= '7') {
            std::uint32_t value = c - '0';
            while (end < n && end < i + 4 && at(end) >= '0' && at(end) <= '7') {
                value = value * 8 + (at(end++) - '0');
            }
            decoded.feed(static_cast<std::uint8_t>(value & 0xFF));
        } else if (c == 'x' && end < n && hex_value(at(end)) >= 0) {
            std::uint32_t value = 0;
            while (end < n && end < i + 4 && hex_value(at(end)) >= 0) {
                value = value * 16 + static_cast<std::uint32_t>(hex_value(at(end++)));
            }
            decoded.feed(static_cast<std::uint8_t>(value));
        } else if ((c == 'u' || c == 'U') && hex_digits(end, c == 'u' ? 4 : 8)) {
            const std::size_t digits = c == 'u' ? 4 : 8;
            feed_code_point(decoded, hex_number(end, digits));
            end += digits;
        } else {
            switch (c) {
                case 'b':
                    decoded.feed('\b');
                    break;
                case 'f':
                    decoded.feed('\f');
                    break;
                case 'n':
                    decoded.feed('\n');
                    break;
                case 'r':
                    decoded.feed('\r');
                    break;
                case 't':
                    decoded.feed('\t');
                    break;
                default:
                    decoded.feed(c);
                    break;
            }
        }
        for (std::size_t k = i; k < end; ++k)
            raw.feed(at(k));
        return end;
    }

    [[nodiscard]] bool hex_digits(std::size_t i, std::size_t count) const {
        if (sql_.size() - i < count) return false;
        for (std::size_t k = i; k < i + count; ++k) {
            if (hex_value(at(k)) < 0) return false;
        }
        return true;
    }
    [[nodiscard]] std::uint32_t hex_number(std::size_t i, std::size_t count) const {
        std::uint32_t value = 0;
        for (std::size_t k = i; k < i + count; ++k) {
            value = (value << 4) | static_cast<std::uint32_t>(hex_value(at(k)));
        }
        return value;
    }

    // After the closing quote of a string literal: if only whitespace and -- comments separate
    // it from another quote, the two are one literal (§4.1.2.1; the server also insists on a
    // newline in between, which does not matter for finding names). Returns that quote's
    // position, or kNone.
    [[nodiscard]] std::size_t continuation(std::size_t i) const {
        const std::size_t n = sql_.size();
        while (i < n) {
            const std::uint8_t b = at(i);
            if (is_space(b)) {
                ++i;
            } else if (b == '-' && i + 1 < n && at(i + 1) == '-') {
                i = line_comment_end(i);
            } else {
                return b == '\'' ? i : kNone;
            }
        }
        return kNone;
    }

    // The body of "..." or of a U& literal from just after the opening quote; a doubled quote
    // stands for one. With `escape` >= 0 the U& escapes (escape char followed by 4 hex digits, by
    // '+' and 6 hex digits, or by itself) are decoded. Returns the position after the closing
    // quote (the end of the text if there is none).
    std::size_t quoted_body(std::size_t i, std::uint8_t quote, int escape, MatchCursor& cursor) {
        const std::size_t n = sql_.size();
        while (i < n) {
            const std::uint8_t b = at(i);
            if (b == quote) {
                if (i + 1 < n && at(i + 1) == quote) {
                    cursor.feed(b);
                    i += 2;
                    continue;
                }
                if (quote == '\'') {
                    const std::size_t next = continuation(i + 1);
                    if (next != kNone) {
                        i = next + 1;
                        continue;
                    }
                }
                return i + 1;
            }
            if (escape >= 0 && b == escape) {
                if (i + 1 < n && at(i + 1) == b) {
                    cursor.feed(b);
                    i += 2;
                } else if (i + 1 < n && at(i + 1) == '+' && hex_digits(i + 2, 6)) {
                    feed_code_point(cursor, hex_number(i + 2, 6));
                    i += 8;
                } else if (hex_digits(i + 1, 4)) {
                    feed_code_point(cursor, hex_number(i + 1, 4));
                    i += 5;
                } else {
                    cursor.feed(b);  // an invalid escape: the server rejects the text
                    ++i;
                }
                continue;
            }
            cursor.feed(b);
            ++i;
        }
        return n;
    }

    // U&'...' or U&"..." with the opening quote at `quote_pos` (§4.1.2.3, §4.1.1). The escape
    // character is only known after the literal (a trailing UESCAPE 'c'), so the body is read
    // twice: raw, which also finds its end, and then decoded.
    void unicode_literal(std::size_t quote_pos) {
        const std::uint8_t quote = at(quote_pos);
        MatchCursor raw(matcher_);
        const std::size_t end = quoted_body(quote_pos + 1, quote, -1, raw);
        MatchCursor decoded(matcher_);
        (void)quoted_body(quote_pos + 1, quote, uescape_after(end), decoded);
        hits_ |= raw.hits() | decoded.hits();
        pos_ = end;
    }

    // The character named by "UESCAPE 'c'" at `i` (after blanks), or the default backslash.
    [[nodiscard]] int uescape_after(std::size_t i) const {
        constexpr std::string_view kUescape = "uescape";
        const std::size_t n = sql_.size();
        i = skip_blanks(i);
        if (n - i < kUescape.size() || !equals_keyword(sql_.substr(i, kUescape.size()), kUescape)) {
            return '\\';
        }
        i += kUescape.size();
        if (i < n && is_ident_cont(at(i))) return '\\';
        i = skip_blanks(i);
        if (n - i >= 3 && at(i) == '\'' && at(i + 1) != '\'' && at(i + 2) == '\'') return at(i + 1);
        return '\\';
    }

    // Skips whitespace and comments of both kinds.
    [[nodiscard]] std::size_t skip_blanks(std::size_t i) const {
        const std::size_t n = sql_.size();
        while (i < n) {
            if (is_space(at(i))) {
                ++i;
            } else if (at(i) == '-' && i + 1 < n && at(i + 1) == '-') {
                i = line_comment_end(i);
            } else if (at(i) == '/' && i + 1 < n && at(i + 1) == '*') {
                i = block_comment_end(i);
                if (i == kNone) return n;
            } else {
                break;
            }
        }
        return i;
    }

    // '$': a parameter ($1), a dollar-quoted body ($$...$$, $tag$...$tag$, §4.1.2.4), or a
    // stray '$'. The body ends at the first occurrence of the same tag (that is where scan.l
    // ends it too), so tags with other names nest inside and are searched with the rest.
    void dollar() {
        const std::size_t n = sql_.size();
        const std::size_t start = pos_;
        std::size_t i = start + 1;
        if (i < n && is_digit(at(i))) {
            while (i < n && is_digit(at(i)))
                ++i;
            pos_ = i;
            statement_.token(Keyword::Other);
            return;
        }
        if (i < n && is_tag_start(at(i))) {
            ++i;
            while (i < n && is_tag_cont(at(i)))
                ++i;
        }
        if (i >= n || at(i) != '$') {
            other_token();  // not valid SQL; whatever follows is lexed normally
            return;
        }
        const std::string_view tag = sql_.substr(start, i + 1 - start);
        const std::size_t body = i + 1;
        const std::size_t close = sql_.find(tag, body);
        const std::size_t body_end = close == kNone ? n : close;
        hits_ |= matcher_.find_all(sql_.substr(body, body_end - body));
        pos_ = close == kNone ? n : close + tag.size();
        statement_.token(Keyword::Other);
    }

    // "--" runs to the end of the line; scan.l's newline is \n or \r.
    [[nodiscard]] std::size_t line_comment_end(std::size_t i) const {
        const std::size_t n = sql_.size();
        i += 2;
        while (i < n && at(i) != '\n' && at(i) != '\r')
            ++i;
        return i;
    }

    // "/*" at `i`; block comments nest (§4.1.5). Returns the position after the matching "*/",
    // or kNone if there is none.
    [[nodiscard]] std::size_t block_comment_end(std::size_t i) const {
        const std::size_t n = sql_.size();
        std::size_t depth = 1;
        i += 2;
        while (i + 1 < n) {
            if (at(i) == '*' && at(i + 1) == '/') {
                i += 2;
                if (--depth == 0) return i;
            } else if (at(i) == '/' && at(i + 1) == '*') {
                i += 2;
                ++depth;
            } else {
                ++i;
            }
        }
        return kNone;
    }

    void block_comment() {
        const std::size_t end = block_comment_end(pos_);
        if (end != kNone) {
            pos_ = end;
            return;
        }
        // The server rejects an unterminated comment, but a lexing difference must never hide a
        // name: search the rest.
        hits_ |= matcher_.find_all(sql_.substr(pos_ + 2));
        pos_ = sql_.size();
    }

    const SubstringMatcher& matcher_;
    const KnownNames* known_;  // null: calls are not looked at
    std::string_view sql_;
    bool plain_backslash_escapes_;
    bool plain_literal_backslash_ = false;
    std::size_t pos_ = 0;
    std::size_t depth_ = 0;  // parentheses: ';' inside them does not end a statement
    std::uint32_t hits_ = 0;
    StatementTracker statement_;
};

// Names of functions whose appearance sets a flag. Substrings, so pg_advisory_lock covers
// pg_advisory_lock_shared and pg_advisory_unlock covers _shared and _all; none is a substring of
// an _xact_ name (pg_advisory_xact_lock, pg_try_advisory_xact_lock[_shared]).
constexpr SubstringMatcher::Pattern kBuiltinPatterns[] = {
    {"pg_advisory_lock", kEffectAdvisoryLock},
    {"pg_try_advisory_lock", kEffectAdvisoryLock},
    {"pg_advisory_unlock", kEffectAdvisoryLock},
    {"set_config", kEffectSet},
    {"pg_temp", kEffectTempObject},
    // What a session listens to: with LISTEN multiplexed, pgtether holds the answer, not the
    // backend (docs/session-state.md).
    {"pg_listening_channels", kEffectListen},
};

SubstringMatcher build_matcher(const std::vector<std::string>& extra_lock_functions) {
    std::vector<SubstringMatcher::Pattern> patterns(std::begin(kBuiltinPatterns),
                                                    std::end(kBuiltinPatterns));
    for (const std::string& name : extra_lock_functions) {
        // A schema-qualified name in the config would never match an unqualified call: keep the
        // last component.
        std::string_view text = name;
        if (const std::size_t dot = text.rfind('.'); dot != kNone) text.remove_prefix(dot + 1);
        patterns.push_back({text, kEffectAdvisoryLock});
    }
    return SubstringMatcher(patterns, kIdentCont);
}

}  // namespace

SqlScanner::SqlScanner(const std::vector<std::string>& extra_lock_functions,
                       std::shared_ptr<const KnownNames> known_names)
    : matcher_(build_matcher(extra_lock_functions)), known_names_(std::move(known_names)) {}

std::uint32_t SqlScanner::scan(std::string_view sql) const {
    Lexer standard(matcher_, known_names_.get(), sql, false);
    std::uint32_t flags = standard.run();
    if (standard.plain_literal_had_backslash()) {
        Lexer backslash(matcher_, known_names_.get(), sql, true);
        flags |= backslash.run();
    }
    return flags;
}

}  // namespace pgtether::protocol
