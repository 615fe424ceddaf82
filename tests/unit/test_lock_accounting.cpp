// Exact lock accounting over a transaction's replies (core/lock_accounting.hpp): which result
// belongs to which statement, what is checked, and everything that makes it uncertain.
#include <doctest/doctest.h>

#include <deque>

#include "core/lock_accounting.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/frontend_messages.hpp"
#include "protocol/framing.hpp"
#include "protocol/message_types.hpp"

using namespace pgtether;
using namespace pgtether::protocol;

namespace {

constexpr std::uint32_t kBool = 16;
constexpr std::uint32_t kVoid = 2278;

// Feeds whole backend messages (as append_* write them) to the accounting.
void feed(LockAccounting& a, const std::string& messages) {
    ByteSpan rest = as_bytes(messages);
    while (!rest.empty()) {
        Frame f = frame_message(rest, 1 << 20);
        REQUIRE(f.status == FrameStatus::Complete);
        a.on_backend_message(f.type, rest.subspan(kTypedHeaderSize, f.total - kTypedHeaderSize));
        rest = rest.subspan(f.total);
    }
}

std::string result(std::vector<std::uint32_t> types, std::vector<std::optional<std::string>> row,
                   const char* tag = "SELECT 1") {
    std::string out;
    std::vector<ColumnDescription> columns;
    for (auto t : types) columns.push_back({"f", t});
    append_row_description(out, columns);
    append_data_row(out, row);
    append_command_complete(out, tag);
    return out;
}
std::string ready(char status = 'I') {
    std::string out;
    append_ready_for_query(out, status);
    return out;
}
std::string error() {
    std::string out;
    append_error_response(out, {"ERROR", "55P03", "boom", {}, {}});
    return out;
}
std::string complete(const char* tag) {
    std::string out;
    append_command_complete(out, tag);
    return out;
}

std::vector<ResolvedLockCall> calls(const char* sql) {
    auto parsed = parse_lock_select(sql);
    REQUIRE(parsed);
    auto resolved = resolve_lock_calls(*parsed, {}, nullptr);
    REQUIRE(resolved);
    return *resolved;
}

}  // namespace

TEST_CASE("one lock statement: its row updates the ledger") {
    LockAccounting a;
    a.arm({});
    a.expect(0, 0, calls("SELECT pg_advisory_lock(42), pg_try_advisory_lock(43)"));
    feed(a, result({kVoid, kBool}, {"", "f"}) + ready());
    REQUIRE(a.exact());
    CHECK(a.ledger().describe() == "42 exclusive");
}

TEST_CASE("results are matched by position: groups and units") {
    LockAccounting a;
    a.arm({});
    // Query 1 (plain, two statements) is outstanding; Query 2's second statement locks.
    a.expect(1, 1, calls("SELECT pg_try_advisory_lock(7)"));
    feed(a, result({23}, {"t"}) + complete("UPDATE 1") + ready());  // Query 1: not ours
    CHECK(a.ledger().empty());
    feed(a, result({kBool}, {"f"}) + result({kBool}, {"t"}) + ready());
    REQUIRE(a.exact());
    CHECK(a.ledger().describe() == "7 exclusive");
}

TEST_CASE("anything unexpected makes the transaction uncertain") {
    auto run = [](const std::string& replies, const char* sql = "SELECT pg_try_advisory_lock(1)") {
        LockAccounting a;
        a.arm({});
        a.expect(0, 0, calls(sql));
        feed(a, replies);
        return a.exact();
    };
    CHECK(run(result({kBool}, {"t"}) + ready()));
    CHECK_FALSE(run(error() + ready()));                                   // the statement failed
    CHECK_FALSE(run(result({kBool}, {"t"}) + error() + ready()));          // a later one failed
    CHECK_FALSE(run(ready()));                                             // never answered
    CHECK_FALSE(run(result({kVoid}, {""}) + ready()));                      // another type
    CHECK_FALSE(run(result({kBool, kBool}, {"t", "t"}) + ready()));         // another shape
    CHECK_FALSE(run(result({kBool}, {std::nullopt}) + ready()));            // NULL
    CHECK_FALSE(run(result({kBool}, {"x"}) + ready()));                     // not t/f
    CHECK_FALSE(run(complete("SELECT 0") + ready()));                       // no row
    std::string two_rows;
    append_data_row(two_rows, {"t"});
    append_data_row(two_rows, {"t"});
    CHECK_FALSE(run(two_rows + complete("SELECT 2") + ready()));
    // An unlock the ledger cannot explain.
    CHECK_FALSE(run(result({kBool}, {"t"}) + ready(), "SELECT pg_advisory_unlock(1)"));
    // Uncertain by the client's side: not exact whatever comes.
    LockAccounting u;
    u.arm({});
    u.mark_uncertain();
    CHECK_FALSE(u.exact());
}

TEST_CASE("extended protocol: DataRow without RowDescription, binary booleans") {
    LockAccounting a;
    a.arm({});
    a.expect(0, 0, calls("SELECT pg_try_advisory_lock(5)"));
    std::string parse_complete;
    MessageWriter(parse_complete).begin('1').end();
    std::string bind_complete;
    MessageWriter(bind_complete).begin('2').end();
    std::string row;
    append_data_row(row, {std::string(1, '\1')});
    feed(a, parse_complete + bind_complete + row + complete("SELECT 1") + ready());
    REQUIRE(a.exact());
    CHECK(a.ledger().describe() == "5 exclusive");
}

TEST_CASE("parameters resolve from Bind: text, binary, declared and inferred types") {
    auto parsed = parse_lock_select("SELECT pg_advisory_lock($1), pg_advisory_lock($2, $3)");
    REQUIRE(parsed);
    auto bind = [](std::vector<std::int16_t> formats,
                   std::vector<std::optional<std::string>> values) {
        BindParameters b;
        b.formats = std::move(formats);
        for (auto& v : values) {
            if (v) {
                // A deque: the spans below point into its strings, which must not move.
                static std::deque<std::string> keep;
                keep.push_back(*v);
                b.values.emplace_back(as_bytes(keep.back()));
            } else {
                b.values.emplace_back(std::nullopt);
            }
        }
        return b;
    };
    SUBCASE("text") {
        auto b = bind({}, {"-12", "3", "4"});
        auto r = resolve_lock_calls(*parsed, {}, &b);
        REQUIRE(r);
        CHECK((*r)[0].key == AdvisoryLockKey::bigint(-12, true));
        CHECK((*r)[1].key == AdvisoryLockKey::int4_pair(3, 4, true));
    }
    SUBCASE("binary, widths as inferred: bigint for one key, integer for two") {
        auto b = bind({1}, {std::string("\0\0\0\0\0\0\1\0", 8), std::string("\0\0\0\3", 4),
                            std::string("\xff\xff\xff\xff", 4)});
        auto r = resolve_lock_calls(*parsed, {}, &b);
        REQUIRE(r);
        CHECK((*r)[0].key == AdvisoryLockKey::bigint(256, true));
        CHECK((*r)[1].key == AdvisoryLockKey::int4_pair(3, -1, true));
        auto wrong_width = bind({1}, {std::string("\0\0\0\1", 4), std::string("\0\0\0\3", 4),
                                      std::string("\0\0\0\4", 4)});
        CHECK_FALSE(resolve_lock_calls(*parsed, {}, &wrong_width));
    }
    SUBCASE("declared types: int4 for $1 means four bytes; text is not claimed") {
        std::string types("\0\3\0\0\0\x17\0\0\0\0\0\0\0\0", 14);  // (int4, unspecified, unspecified)
        auto b = bind({1}, {std::string("\0\0\0\x09", 4), std::string("\0\0\0\3", 4),
                            std::string("\0\0\0\4", 4)});
        auto r = resolve_lock_calls(*parsed, as_bytes(types), &b);
        REQUIRE(r);
        CHECK((*r)[0].key == AdvisoryLockKey::bigint(9, true));
        std::string text_type("\0\1\0\0\0\x19", 6);  // (text)
        auto t = bind({}, {"1", "2", "3"});
        CHECK_FALSE(resolve_lock_calls(*parsed, as_bytes(text_type), &t));
    }
    SUBCASE("what the server would refuse or read differently is not claimed") {
        auto spaces = bind({}, {" 1", "2", "3"});
        CHECK_FALSE(resolve_lock_calls(*parsed, {}, &spaces));
        auto null = bind({}, {std::nullopt, "2", "3"});
        CHECK_FALSE(resolve_lock_calls(*parsed, {}, &null));
        auto too_big = bind({}, {"1", "2147483648", "3"});
        CHECK_FALSE(resolve_lock_calls(*parsed, {}, &too_big));
        auto missing = bind({}, {"1"});
        CHECK_FALSE(resolve_lock_calls(*parsed, {}, &missing));
        CHECK_FALSE(resolve_lock_calls(*parsed, {}, nullptr));
    }
}

TEST_CASE("Bind parameters are read from the wire format") {
    std::string body;
    MessageWriter w(body);
    w.begin('B').cstring("p").cstring("s").i16(1).i16(1).i16(2).i32(2).bytes(std::string_view("\0\7", 2)).i32(-1)
        .i16(0).end();
    auto parsed = parse_bind_parameters(as_bytes(body).subspan(kTypedHeaderSize));
    REQUIRE(parsed);
    CHECK(parsed->format_of(1) == 1);
    REQUIRE(parsed->values.size() == 2);
    CHECK(parsed->values[0]->size() == 2);
    CHECK_FALSE(parsed->values[1]);
    // A count larger than the body is refused before anything is reserved.
    std::string bad;
    MessageWriter(bad).begin('B').cstring("").cstring("").i16(0).i16(30000).end();
    CHECK_FALSE(parse_bind_parameters(as_bytes(bad).subspan(kTypedHeaderSize)));
}
