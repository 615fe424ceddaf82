// The tokenizer shared by auth_hba_file and auth_ident_file: both follow pg_hba.conf's lexical
// rules as PgBouncer reads them (PostgreSQL docs §21.1 and §21.2).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgtether {

struct HbaToken {
    std::string text;
    bool quoted = false;       // written in double quotes: a keyword such as all is then a name
    bool comma_after = false;  // a comma follows (the list goes on)
};

// Splits one line into fields: whitespace separates fields, a comma continues a list (whitespace
// around it is allowed), "..." quotes with "" for a literal quote, # starts a comment outside
// quotes. Returns the fields, each a list of tokens. Throws ConfigError naming `file` and
// `line_no` for an unterminated quote or a misplaced comma.
std::vector<std::vector<HbaToken>> split_hba_line(std::string_view line, const std::string& file,
                                                  int line_no);

// Calls `each(line_text, line_no)` for every line of `text` (numbered from 1).
template <typename F>
void for_each_line(std::string_view text, F&& each) {
    int line_no = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        each(text.substr(start, end - start), ++line_no);
        start = end + 1;
    }
}

}  // namespace pgtether
