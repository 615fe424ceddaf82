// Fuzzes the splice of a Query that mixes LISTEN/UNLISTEN with other statements
// (protocol/listen_statement.hpp) and the statement split under it (protocol/sql_tokens.hpp),
// with arbitrary text. Besides memory and UB errors, it checks for every input:
//  * the statements split lie inside the text, in order, none empty of tokens;
//  * a splice has a LISTEN/UNLISTEN and another statement; the text the backend runs splits into
//    as many statements as the client's, each stand-in where a LISTEN was, every other statement
//    exactly the client's; the stand-ins' client statements parse as the operation recorded;
//  * positions map back monotonically, and outside stand-ins onto the same character.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/listen_statement.hpp"
#include "protocol/sql_tokens.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::as_text;
using pgtether::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view sql = as_text(data, size);

    const auto spans = split_sql_statements(sql);
    if (spans) {
        std::size_t previous_end = 0;
        for (const auto& span : *spans) {
            require(span.begin <= span.end && span.end <= sql.size(), "a span lies in the text");
            require(span.begin >= previous_end, "spans come in order");
            previous_end = span.end;
        }
    }

    const auto splice = splice_listen_statements(sql);
    if (!splice) return 0;
    require(spans.has_value(), "a splice needs a certain split");
    const auto spliced_spans = split_sql_statements(splice->sql);
    require(spliced_spans && spliced_spans->size() == spans->size() &&
                splice->statements.size() == spans->size(),
            "as many statements as the client's");
    bool listens = false;
    bool others = false;
    for (std::size_t i = 0; i < spans->size(); ++i) {
        const auto& mine = (*spans)[i];
        const auto& theirs = (*spliced_spans)[i];
        const std::string_view client = sql.substr(mine.begin, mine.end - mine.begin);
        const std::string_view backend =
            std::string_view(splice->sql).substr(theirs.begin, theirs.end - theirs.begin);
        if (splice->statements[i]) {
            listens = true;
            require(backend == kListenStandIn, "a stand-in where a LISTEN was");
            const auto ops = parse_listen_only(client);
            require(ops && ops->size() == 1 && ops->front() == *splice->statements[i],
                    "the stand-in's statement is the operation recorded");
        } else {
            others = true;
            require(backend == client, "every other statement as sent");
        }
    }
    require(listens && others, "a splice mixes LISTEN with other statements");

    std::size_t last = 0;
    for (std::size_t p = 1; p <= splice->sql.size() + 1; ++p) {
        const std::size_t mapped = splice->client_position(p);
        require(mapped >= 1 && mapped <= sql.size() + 1, "a position maps into the text");
        require(mapped >= last, "positions map in order");
        last = mapped;
        bool in_stand_in = false;
        for (const auto& r : splice->replacements) {
            if (p - 1 >= r.at && p - 1 < r.at + kListenStandIn.size()) in_stand_in = true;
        }
        if (!in_stand_in && p <= splice->sql.size()) {
            require(mapped <= sql.size() && sql[mapped - 1] == splice->sql[p - 1],
                    "outside stand-ins, the same character");
        }
    }
    return 0;
}
