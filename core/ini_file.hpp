// A reader for PgBouncer's ini dialect (libusual usual/cfparser.c, parse_ini_file), with %include.
//
// The reader knows nothing about sections or keys: it turns a file and everything it includes
// into one flat list of entries in reading order, each with the file and line it came from, so
// errors found later (unknown key, bad value) can name the included file and its line.
//
// Syntax, as PgBouncer reads it:
//   - leading whitespace is ignored; blank lines are skipped;
//   - a line starting with ';' or '#' is a comment; neither is special later in a line, so
//     `key = 10 ; note` has the value "10 ; note";
//   - `[name]` starts a section (the name is taken verbatim, case-sensitive);
//   - `key = value`: the key is made of A-Z a-z 0-9 _ . - *; spaces and tabs around '=' are
//     skipped; the value runs to the end of the line, trailing whitespace removed, no quoting;
//   - `%include PATH` reads PATH at that point. PATH is the rest of the line, taken verbatim
//     (quotes are part of the name) and, when relative, resolved against the process's current
//     working directory -- not the including file's directory -- exactly as PgBouncer does.
// Additions and differences:
//   - a key may be written in double quotes with "" for a literal quote (`"my db" = ...`), as
//     PgBouncer documents for [databases] names but does not implement (pgbouncer issue #971);
//   - after `]` only whitespace or a comment may follow (PgBouncer would read on as a key);
//   - an include loop is reported as such; PgBouncer stops at 10 nested levels, and so do we.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pgtether {

class ConfigError;

struct IniEntry {
    enum class Kind { Section, Value };
    Kind kind = Kind::Value;
    std::string file;   // the path as given (main file) or as written after %include
    int line = 0;       // 1-based
    std::string name;   // section name, or key (unquoted)
    std::string value;  // Kind::Value only
};

// PgBouncer's MAX_INCLUDE: the main file may include files nested this deep.
inline constexpr int kMaxIncludeDepth = 10;

// Reads `path` and, recursively, every file it %includes. Throws ConfigError naming the file and
// line for syntax errors, unreadable or missing files, include loops and too-deep nesting.
std::vector<IniEntry> read_ini_file(const std::string& path);
// The same, reporting every problem in `errors` (in reading order) and reading on past it:
// the entries of the lines without one; nullopt when `path` itself cannot be read.
std::optional<std::vector<IniEntry>> read_ini_file(const std::string& path,
                                                   std::vector<ConfigError>& errors);

// Reads an included file: its text, or nullopt with the reason in `*error`.
using IniIncludeReader =
    std::function<std::optional<std::string>(const std::string& path, std::string* error)>;

// Parses ini text already in memory. %include directives are resolved with `read_include`: from
// the file system unless another reader is given (the fuzz target serves them from its input).
std::vector<IniEntry> parse_ini_text(const std::string& text, const std::string& file_name,
                                     const IniIncludeReader& read_include = {});

}  // namespace pgtether
