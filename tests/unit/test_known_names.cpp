// The catalog's known names (protocol/known_names.hpp): how unquoted words and quoted names are
// looked up, as the server resolves identifiers.
#include <doctest/doctest.h>

#include <string>

#include "protocol/known_names.hpp"

using namespace pgtether::protocol;

TEST_CASE("known names: words fold to lower case, quoted names are exact, both truncate at 63") {
    const std::string long_name(63, 'a');
    const KnownNames known({"count", "MixedCase", "lower", long_name, "count"});
    CHECK(known.size() == 4);
    struct Case {
        const char* what;
        bool word;  // unquoted (folded) or quoted (exact)
        std::string name;
        bool found;
    };
    const Case cases[] = {
        {"a word", true, "count", true},
        {"a word in capitals folds", true, "COUNT", true},
        {"a quoted name in capitals does not", false, "COUNT", false},
        {"a quoted name as the catalog spells it", false, "MixedCase", true},
        {"the same name unquoted folds away from it", true, "MixedCase", false},
        {"an unknown word", true, "take_job_lock", false},
        {"a longer word is truncated, as the server does", true, long_name + "bbb", true},
        {"a longer quoted name too", false, long_name + "b", true},
        {"an empty name", false, "", false},
    };
    for (const auto& c : cases) {
        CAPTURE(c.what);
        CHECK((c.word ? known.contains_word(c.name) : known.contains_exact(c.name)) == c.found);
    }
}
