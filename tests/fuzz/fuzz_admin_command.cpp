// Fuzzes the admin console's command parser (protocol/admin_command.hpp) with the raw query text.
// Besides memory errors it checks, for every input:
//  * a result is either a command or an error, never both or neither;
//  * a command has a non-empty, lower-case verb and respects the length limits; the SET form has
//    a key;
//  * a command written back in canonical form (every word quoted, the value as a string literal)
//    parses to the same command;
//  * leading whitespace changes nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/admin_command.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::require;

namespace {

std::string quoted(std::string_view s, char quote) {
    std::string out(1, quote);
    for (char c : s) {
        if (c == quote) out += quote;
        out += c;
    }
    return out + quote;
}

bool same(const AdminParseResult& a, const AdminParseResult& b) {
    if (a.error != b.error || a.command.has_value() != b.command.has_value()) return false;
    if (!a.command) return true;
    return a.command->verb == b.command->verb && a.command->argument == b.command->argument &&
           a.command->value == b.command->value && a.command->is_set == b.command->is_set;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view query(reinterpret_cast<const char*>(data), size);
    auto result = parse_admin_command(query);
    require(result.command.has_value() == (result.error == AdminParseError::None),
            "a command or an error");
    require(same(result, parse_admin_command(" \t\r\n" + std::string(query))),
            "leading whitespace changes nothing");
    if (!result.command) return 0;
    const auto& c = *result.command;
    require(!c.verb.empty(), "a verb");
    for (char ch : c.verb)
        require(!(ch >= 'A' && ch <= 'Z'), "the verb is lower-cased");
    require(c.argument.size() <= kAdminMaxWord, "argument within its limit");
    require(c.value.size() <= kAdminMaxValue, "value within its limit");
    require(!c.is_set || (c.verb == "set" && !c.argument.empty()), "SET has a key");
    require(c.is_set || c.value.empty(), "only SET has a value");

    // Canonical form: quoted words never contain whitespace trouble or keywords.
    std::string canonical;
    if (c.is_set) {
        canonical = "SET " + quoted(c.argument, '"') + " = " + quoted(c.value, '\'');
    } else {
        canonical = quoted(c.verb, '"');
        if (!c.argument.empty()) canonical += " " + quoted(c.argument, '"');
    }
    auto again = parse_admin_command(canonical);
    // An empty argument written as "" is still empty, so the round trip must be exact.
    require(same(result, again), "the canonical form parses to the same command");
    return 0;
}
