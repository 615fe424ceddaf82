// Statement text with its literals taken out, for places that show a client's SQL to someone who
// is not that client: log lines (unless log_statement_text = 1) and the admin console for
// stats_users (docs/admin.md, docs/configuration.md).
//
// Every constant is replaced by `?`: string literals in all their forms ('...', E'...', B'...',
// X'...', N'...', U&'...'), dollar-quoted bodies ($$...$$, $tag$...$tag$: a function body is
// dropped whole, it may hold literals of its own) and numbers (42, 4.2, 1e10, 0x1F). Keywords,
// identifiers (quoted ones too), operators, comments, parameters ($1) and whitespace stay as
// they are. The lexical rules are PostgreSQL's scan.l (§4.1 "Lexical Structure").
//
// The rule is to leak nothing when in doubt, at the price of hiding more than needed:
//  * a plain '...' literal holding a backslash means different things under
//    standard_conforming_strings on and off (one reading may end the literal early and put the
//    rest of a secret outside it), so from that literal on the whole rest is one `?`;
//  * an unterminated literal or dollar body (a text cut short, as SHOW LOCKS' 200 bytes may be)
//    runs to the end and becomes one `?`.
#pragma once

#include <string>
#include <string_view>

namespace pgtether::protocol {

// The marker that stands for each removed constant.
inline constexpr std::string_view kRedactedLiteral = "?";

[[nodiscard]] std::string redact_statement_literals(std::string_view sql);

// A statement as a log line quotes it: whole with log_statement_text = 1, else redacted.
[[nodiscard]] inline std::string statement_for_log(std::string_view sql, bool log_statement_text) {
    return log_statement_text ? std::string(sql) : redact_statement_literals(sql);
}

}  // namespace pgtether::protocol
