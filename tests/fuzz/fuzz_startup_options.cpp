// Fuzzes the reader of the `options` start-up parameter (parse_startup_options,
// core/session_settings.hpp): `-c name=value` and `--name=value` words separated by white space,
// a backslash taking the next character literally (PostgreSQL's pg_split_opts).
//
// Checked: every setting has a non-empty name without '=' or '-' (PostgreSQL reads '-' as '_'),
// and writing the settings back as `-c name=value` words, escaping white space and backslashes,
// reads back as the same settings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/session_settings.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using pgtether::fuzz::as_text;
using pgtether::fuzz::require;
using Settings = std::vector<pgtether::SettingsMap::Entry>;

namespace {

std::string escaped(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '\\' || c == ' ' || c == '\t' || c == '\n' || c == '\r') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto result = pgtether::parse_startup_options(as_text(data, size));
    if (const auto* error = std::get_if<std::string>(&result)) {
        require(!error->empty(), "an error says why");
        return 0;
    }
    const Settings& settings = std::get<Settings>(result);
    std::string rewritten;
    for (const auto& [name, value] : settings) {
        require(!name.empty(), "a setting has a name");
        require(name.find('=') == std::string::npos, "a name stops at the first '='");
        require(name.find('-') == std::string::npos, "'-' in a name reads as '_'");
        rewritten += "-c " + escaped(name) + "=" + escaped(value) + " ";
    }
    const auto again = pgtether::parse_startup_options(rewritten);
    require(std::holds_alternative<Settings>(again) && std::get<Settings>(again) == settings,
            "settings written back as -c words read the same");
    return 0;
}
