// Fuzzes the SQL scanner (protocol/sql_scanner.hpp) with arbitrary statement text. Besides memory
// and UB errors, it checks properties that hold for every input:
//  * only defined flags are reported;
//  * configuring extra lock names can only add kEffectAdvisoryLock;
//  * a complete statement in front of the text changes nothing;
//  * kEffectAdvisoryLock needs the word "advisory" in the text, unless escapes (a backslash, or
//    U&'' which needs '&') could spell it;
//  * keywords and names are case-insensitive: without backslashes (escapes such as \x and \X
//    differ) and '$' (dollar tags are case-sensitive), changing the case of every ASCII letter
//    changes nothing;
//  * with the catalog's known names, the only difference is kEffectUnknownCall, which comes with
//    kEffectAdvisoryLock and needs a '(' in the text; without them it never appears.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/sql_scanner.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::require;

namespace {

constexpr std::uint32_t kAllEffects = kEffectAdvisoryLock | kEffectDiscard | kEffectTempObject |
                                      kEffectListen | kEffectCursor | kEffectSqlPrepare |
                                      kEffectLoad | kEffectSet | kEffectCatalogChange |
                                      kEffectOpaque | kEffectCreate | kEffectUnknownCall |
                                      kEffectSavepoint;

bool mentions_advisory(std::string_view sql) {
    constexpr std::string_view kWord = "advisory";
    const auto it = std::search(
        sql.begin(), sql.end(), kWord.begin(), kWord.end(),
        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
    return it != sql.end();
}

std::string with_case(std::string_view sql, bool upper) {
    std::string out(sql);
    for (char& c : out) {
        const auto b = static_cast<unsigned char>(c);
        if (b >= 0x80) continue;  // outside ASCII, toupper/tolower are locale-dependent
        c = static_cast<char>(upper ? std::toupper(b) : std::tolower(b));
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const SqlScanner plain;
    static const SqlScanner extras({"take_job_lock", "app.Lock", "x"});
    const std::string_view sql(reinterpret_cast<const char*>(data), size);

    const std::uint32_t flags = plain.scan(sql);
    require((flags & ~kAllEffects) == 0, "only defined flags");
    require((flags & kEffectUnknownCall) == 0, "no unknown calls without known names");

    static const SqlScanner known({}, std::make_shared<const KnownNames>(std::vector<std::string>{
                                          "count", "values", "Orders", "pg_advisory_lock"}));
    const std::uint32_t with_known = known.scan(sql);
    require(((with_known ^ flags) & ~(kEffectUnknownCall | kEffectAdvisoryLock)) == 0,
            "known names only add an unknown call");
    if ((with_known & kEffectUnknownCall) != 0) {
        require((with_known & kEffectAdvisoryLock) != 0, "an unknown call is lock-relevant");
        require(sql.find('(') != std::string_view::npos, "an unknown call needs a '('");
    } else {
        require(with_known == flags, "no unknown call, no difference");
    }

    const std::uint32_t with_extras = extras.scan(sql);
    require((with_extras & flags) == flags, "extra names keep every flag");
    require(((with_extras ^ flags) & ~kEffectAdvisoryLock) == 0,
            "extra names only add kEffectAdvisoryLock");

    const std::string prefixed = "SELECT 1;\n" + std::string(sql);
    require(plain.scan(prefixed) == flags, "a complete statement in front changes nothing");

    if ((flags & kEffectAdvisoryLock) != 0) {
        require(mentions_advisory(sql) || sql.find('\\') != std::string_view::npos ||
                    sql.find('&') != std::string_view::npos,
                "a lock hit needs the name, or escapes that could spell it");
    }
    if (sql.find_first_of("\\$") == std::string_view::npos) {
        require(plain.scan(with_case(sql, true)) == flags, "upper case changes nothing");
        require(plain.scan(with_case(sql, false)) == flags, "lower case changes nothing");
    }
    return 0;
}
