#include "protocol/listen_statement.hpp"

#include <algorithm>
#include <array>

#include "protocol/ascii.hpp"
#include "protocol/sql_tokens.hpp"

namespace pgtether::protocol {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}
bool is_ascii_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_ident_start(char c) {
    return is_ascii_alpha(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_ident_cont(char c) {
    return is_ident_start(c) || is_digit(c) || c == '$';
}
char fold(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// PostgreSQL 15's reserved and type/function-name keywords (src/include/parser/kwlist.h): LISTEN
// takes a ColId, which may be neither, so `LISTEN user` is a syntax error the backend reports.
// Sorted for binary search.
constexpr std::array<std::string_view, 101> kNotColId = {
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
};

bool is_col_id_keyword_free(std::string_view word) {
    return !std::binary_search(kNotColId.begin(), kNotColId.end(), word);
}

class Lexer {
  public:
    enum class Kind { End, Word, Quoted, Star, Semicolon, Other };
    struct Token {
        Kind kind = Kind::End;
        std::string text;
    };

    explicit Lexer(std::string_view sql) : sql_(sql) {}

    Token next() {
        if (!skip_blanks()) return {Kind::Other, {}};  // an unterminated comment
        if (pos_ >= sql_.size()) return {Kind::End, {}};
        const char c = sql_[pos_];
        if (c == ';') {
            ++pos_;
            return {Kind::Semicolon, {}};
        }
        if (c == '*') {
            ++pos_;
            return {Kind::Star, {}};
        }
        if (c == '"') return quoted();
        // U&"..." and the like are left to the backend.
        if ((c == 'u' || c == 'U') && at(pos_ + 1) == '&') return {Kind::Other, {}};
        if (!is_ident_start(c)) return {Kind::Other, {}};
        std::string word;
        while (pos_ < sql_.size() && is_ident_cont(sql_[pos_]))
            word.push_back(fold(sql_[pos_++]));
        return {Kind::Word, std::move(word)};
    }

  private:
    [[nodiscard]] char at(std::size_t i) const { return i < sql_.size() ? sql_[i] : '\0'; }

    // White space and comments (block comments nest, as in PostgreSQL); false when a block
    // comment never ends.
    bool skip_blanks() {
        while (pos_ < sql_.size()) {
            const char c = sql_[pos_];
            if (is_space(c)) {
                ++pos_;
            } else if (c == '-' && at(pos_ + 1) == '-') {
                while (pos_ < sql_.size() && sql_[pos_] != '\n' && sql_[pos_] != '\r')
                    ++pos_;
            } else if (c == '/' && at(pos_ + 1) == '*') {
                std::size_t depth = 0;
                do {
                    if (sql_[pos_] == '/' && at(pos_ + 1) == '*') {
                        ++depth;
                        pos_ += 2;
                    } else if (sql_[pos_] == '*' && at(pos_ + 1) == '/') {
                        --depth;
                        pos_ += 2;
                    } else {
                        ++pos_;
                    }
                } while (depth > 0 && pos_ < sql_.size());
                if (depth > 0) return false;
            } else {
                break;
            }
        }
        return true;
    }

    Token quoted() {
        ++pos_;  // the opening quote
        std::string name;
        while (pos_ < sql_.size()) {
            const char c = sql_[pos_++];
            if (c != '"') {
                name.push_back(c);
            } else if (at(pos_) == '"') {
                name.push_back('"');
                ++pos_;
            } else {
                return {Kind::Quoted, std::move(name)};
            }
        }
        return {Kind::Other, {}};  // unterminated
    }

    std::string_view sql_;
    std::size_t pos_ = 0;
};

// A channel name PostgreSQL would take as it stands.
std::optional<std::string> channel_name(Lexer::Token token) {
    if (token.kind == Lexer::Kind::Word) {
        if (!is_col_id_keyword_free(token.text)) return std::nullopt;
    } else if (token.kind != Lexer::Kind::Quoted || token.text.empty()) {
        return std::nullopt;
    }
    if (token.text.size() > kMaxIdentifierBytes) return std::nullopt;
    return std::move(token.text);
}

}  // namespace

std::optional<std::vector<ListenOp>> parse_listen_only(std::string_view sql) {
    // Every Query passes here: the first token must be LISTEN, UNLISTEN, an empty statement's
    // semicolon, or a comment before one of them, so any other first character answers at once.
    std::size_t first = 0;
    while (first < sql.size() && is_space(sql[first])) ++first;
    if (first < sql.size()) {
        switch (ascii_lower(sql[first])) {
            case 'l':
            case 'u':
            case ';':
            case '-':
            case '/':
                break;
            default:
                return std::nullopt;
        }
    }
    Lexer lexer(sql);
    std::vector<ListenOp> ops;
    while (true) {
        Lexer::Token token = lexer.next();
        if (token.kind == Lexer::Kind::Semicolon) continue;  // empty statements answer nothing
        if (token.kind == Lexer::Kind::End) break;
        if (token.kind != Lexer::Kind::Word) return std::nullopt;
        ListenOp op;
        if (token.text == "listen") {
            op.kind = ListenOp::Kind::Listen;
        } else if (token.text == "unlisten") {
            op.kind = ListenOp::Kind::Unlisten;
        } else {
            return std::nullopt;
        }
        Lexer::Token name = lexer.next();
        if (op.kind == ListenOp::Kind::Unlisten && name.kind == Lexer::Kind::Star) {
            op.kind = ListenOp::Kind::UnlistenAll;
        } else {
            auto channel = channel_name(std::move(name));
            if (!channel) return std::nullopt;
            op.channel = std::move(*channel);
        }
        const Lexer::Token end = lexer.next();
        if (end.kind != Lexer::Kind::Semicolon && end.kind != Lexer::Kind::End) {
            return std::nullopt;
        }
        ops.push_back(std::move(op));
        if (end.kind == Lexer::Kind::End) break;
    }
    if (ops.empty()) return std::nullopt;
    return ops;
}

std::optional<ListenSplice> splice_listen_statements(std::string_view sql) {
    // Cheap refusals first: every Query that is not LISTEN-only comes here when its client may
    // have its LISTEN answered.
    if (!ascii_icontains(sql, "listen")) return std::nullopt;
    if (std::any_of(sql.begin(), sql.end(),
                    [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
        return std::nullopt;
    }
    const auto spans = split_sql_statements(sql);
    if (!spans) return std::nullopt;
    ListenSplice splice;
    splice.statements.reserve(spans->size());
    bool others = false;
    std::size_t copied = 0;  // the client's text up to here is in splice.sql
    for (const StatementSpan& span : *spans) {
        const std::string_view text = sql.substr(span.begin, span.end - span.begin);
        std::vector<SqlToken> head;
        (void)tokenize_sql(text, head);  // reliable: the whole text was
        const bool listen_word = !head.empty() && (token_is_name(head[0], "listen") ||
                                                   token_is_name(head[0], "unlisten"));
        if (!listen_word) {
            for (std::string_view word : {"begin", "start", "commit", "end", "rollback", "abort",
                                          "savepoint", "release", "prepare", "copy"}) {
                if (!head.empty() && token_is_name(head[0], word)) return std::nullopt;
            }
            others = true;
            splice.statements.emplace_back(std::nullopt);
            continue;
        }
        auto ops = parse_listen_only(text);
        if (!ops || ops->size() != 1) return std::nullopt;
        splice.sql.append(sql.substr(copied, span.begin - copied));
        splice.replacements.push_back({splice.sql.size(), span.begin, text.size()});
        splice.sql.append(kListenStandIn);
        copied = span.end;
        splice.statements.emplace_back(std::move(ops->front()));
    }
    if (!others || splice.replacements.empty()) return std::nullopt;
    splice.sql.append(sql.substr(copied));
    return splice;
}

std::size_t ListenSplice::client_position(std::size_t position) const {
    if (position == 0) return 0;
    const std::size_t offset = position - 1;
    std::size_t client_offset = offset;  // before the first stand-in the texts agree
    for (const Replacement& r : replacements) {
        if (offset < r.at) break;
        if (offset < r.at + kListenStandIn.size()) return r.client_at + 1;
        client_offset = r.client_at + r.client_length + (offset - r.at - kListenStandIn.size());
    }
    return client_offset + 1;
}

std::string_view listen_command_tag(const ListenOp& op) {
    return op.kind == ListenOp::Kind::Listen ? "LISTEN" : "UNLISTEN";
}

std::string quote_identifier(std::string_view name) {
    std::string out = "\"";
    for (char c : name) {
        if (c == '"') out.push_back('"');
        out.push_back(c);
    }
    out.push_back('"');
    return out;
}

}  // namespace pgtether::protocol
