// PostgreSQL's lexical rules (scan.l, §4.1 "Lexical Structure"), only as fine as pgtether's
// statement readers need: tokens of a Query text, and where its top-level statements are.
// Where pgtether's reading of a text could differ from the server's, the answer is "unreliable"
// and the callers treat the text as one they do not understand: a plain '...' literal holding a
// backslash (its meaning depends on standard_conforming_strings), anything unterminated, and
// BEGIN ATOMIC bodies (whose ';' do not end the statement).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace pgtether::protocol {

enum class SqlTok : std::uint8_t {
    Word,         // unquoted identifier or keyword
    QuotedIdent,  // "..." (the text is the raw body; "" not undone, see token_is_name)
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

struct SqlToken {
    SqlTok kind;
    std::string_view text;  // a view into the text tokenized
};

// Appends the tokens of `sql` to `out`. False where the server might lex the text differently
// (`out` then holds the tokens up to that point, and nothing about the text is certain).
[[nodiscard]] bool tokenize_sql(std::string_view sql, std::vector<SqlToken>& out);

// An unquoted name matches in any case (it is folded to lower case); a quoted one exactly.
// `lower`: the name in lower case.
[[nodiscard]] bool token_is_name(const SqlToken& token, std::string_view lower);

// One top-level statement of a text: the bytes between two ';' outside quotes, comments, dollar
// bodies and parentheses (or the text's start or end), with the white space and comments
// around it. Empty statements (nothing but white space and comments) are not listed: the
// server runs nothing for them.
struct StatementSpan {
    std::size_t begin = 0;
    std::size_t end = 0;  // the offset of its ';', or the text's size
};

// The statements of `sql` in order, as the server splits it; nullopt where it might split it
// otherwise (unreliable, above).
[[nodiscard]] std::optional<std::vector<StatementSpan>> split_sql_statements(std::string_view sql);

}  // namespace pgtether::protocol
