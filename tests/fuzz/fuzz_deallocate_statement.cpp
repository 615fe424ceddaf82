// Fuzzes the recogniser of a lone `DEALLOCATE [PREPARE] name` (protocol/deallocate_statement.hpp),
// which pgtether answers itself when it translates prepared statements: a statement it wrongly
// took for a DEALLOCATE would never reach the server.
//
// Checked, whenever a name comes back:
//  * the text starts, after white space, with the keyword DEALLOCATE in any case;
//  * the name is not empty and not `all` (DEALLOCATE ALL goes to the server);
//  * the same name written as a quoted identifier, with and without PREPARE, lower-case or
//    upper-case keywords, and a trailing ';', is recognised as that name again.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/deallocate_statement.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::as_text;
using pgtether::fuzz::double_quoted;
using pgtether::fuzz::require;

namespace {

bool starts_with_keyword(std::string_view sql) {
    while (!sql.empty() && (sql[0] == ' ' || sql[0] == '\t' || sql[0] == '\n' || sql[0] == '\r' ||
                            sql[0] == '\f'))
        sql.remove_prefix(1);
    constexpr std::string_view kKeyword = "deallocate";
    if (sql.size() < kKeyword.size()) return false;
    for (std::size_t i = 0; i < kKeyword.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(sql[i])) != kKeyword[i]) return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view sql = as_text(data, size);
    const std::optional<std::string> name = parse_lone_deallocate(sql);
    if (!name) return 0;
    require(starts_with_keyword(sql), "a DEALLOCATE starts with its keyword");
    require(!name->empty() && *name != "all", "a single, non-empty name");
    for (const char* prefix : {"DEALLOCATE ", "deallocate prepare ", " Deallocate\tPrepare\n"}) {
        for (const char* suffix : {"", ";", " ; \n"}) {
            const auto again = parse_lone_deallocate(prefix + double_quoted(*name) + suffix);
            require(again && *again == *name, "the name, quoted, reads the same");
        }
    }
    return 0;
}
