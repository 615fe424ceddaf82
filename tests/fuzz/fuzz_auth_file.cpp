// Fuzzes the auth_file reader (core/auth_file.hpp), PgBouncer's userlist.txt: `"user" "secret"`
// per line. A ConfigError is the expected answer to a bad file; anything else is a bug. Checked
// for a file that reads:
//  * every entry is filed under its own user name, which is not empty, with the secret kind
//    classify_secret gives;
//  * writing the entries back (quotes doubled) reads back as the same users and secrets.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/auth_file.hpp"
#include "core/config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether;
using pgtether::fuzz::as_text;
using pgtether::fuzz::double_quoted;
using pgtether::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    AuthFile users;
    try {
        users = parse_auth_file(std::string(as_text(data, size)), "/fuzz/userlist.txt");
    } catch (const ConfigError&) {
        return 0;
    }
    std::string rewritten;
    for (const auto& [name, entry] : users) {
        require(!name.empty() && entry.user == name, "filed under its own, non-empty name");
        require(entry.kind == classify_secret(entry.secret), "the secret's kind");
        rewritten += double_quoted(entry.user) + " " + double_quoted(entry.secret) + "\n";
    }
    const AuthFile again = parse_auth_file(rewritten, "/fuzz/userlist.txt");
    require(again.size() == users.size(), "the same number of users");
    for (const auto& [name, entry] : users) {
        auto it = again.find(name);
        require(it != again.end() && it->second.secret == entry.secret &&
                    it->second.kind == entry.kind,
                "entries written back read the same");
    }
    return 0;
}
