// Fuzzes the ini reader (core/ini_file.hpp), PgBouncer's dialect with %include.
//
// Input: the main file, then NUL-separated texts of included files: `%include /fuzz/1` reads the
// first one, `/fuzz/2` the second, ... (any other name cannot be read). A ConfigError is the
// expected answer to a bad file; any other exception, a crash or a hang is a bug. Checked for a
// file that reads:
//  * entries carry a line number within their file, a key or section name, and a value without
//    surrounding blanks or a line break;
//  * without %include, writing the entries back (`[name]`, `key = value`, keys that need it in
//    double quotes) reads back as the same entries.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"
#include "core/ini_file.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether;
using pgtether::fuzz::as_text;
using pgtether::fuzz::double_quoted;
using pgtether::fuzz::require;
using pgtether::fuzz::split;

namespace {

constexpr const char* kFile = "/fuzz/main.ini";

bool is_key_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '*';
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string render(const std::vector<IniEntry>& entries) {
    std::string out;
    for (const IniEntry& e : entries) {
        if (e.kind == IniEntry::Kind::Section) {
            out += "[" + e.name + "]\n";
            continue;
        }
        bool plain = true;
        for (char c : e.name)
            plain = plain && is_key_char(c);
        out += plain ? e.name : double_quoted(e.name);
        out += " = " + e.value + "\n";
    }
    return out;
}

bool same_entries(const std::vector<IniEntry>& a, const std::vector<IniEntry>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].kind != b[i].kind || a[i].name != b[i].name || a[i].value != b[i].value) {
            return false;
        }
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = split(as_text(data, size), '\0', 10);
    bool included = false;
    const IniIncludeReader reader = [&](const std::string& path,
                                        std::string* error) -> std::optional<std::string> {
        included = true;
        const std::string prefix = "/fuzz/";
        if (path.size() == prefix.size() + 1 && path.starts_with(prefix) && path.back() >= '1' &&
            path.back() <= '9') {
            const auto index = static_cast<std::size_t>(path.back() - '0');
            if (index < parts.size()) return std::string(parts[index]);
        }
        *error = "No such file or directory";
        return std::nullopt;
    };

    std::vector<IniEntry> entries;
    try {
        entries = parse_ini_text(std::string(parts[0]), kFile, reader);
    } catch (const ConfigError&) {
        return 0;
    }
    for (const IniEntry& e : entries) {
        require(e.line >= 1 && !e.file.empty(), "an entry has a file and line");
        require(e.name.find('\n') == std::string::npos, "a name is on one line");
        if (e.kind == IniEntry::Kind::Value) {
            require(!e.name.empty(), "a key");
            require(e.value.find('\n') == std::string::npos, "a value is on one line");
            require(e.value.empty() || (!is_blank(e.value.front()) && !is_blank(e.value.back())),
                    "a value has no surrounding blanks");
        } else {
            require(e.name.find(']') == std::string::npos, "a section name stops at ']'");
        }
    }
    if (!included) {
        const auto again = parse_ini_text(render(entries), kFile, reader);
        require(same_entries(again, entries), "entries written back read the same");
    }
    return 0;
}
