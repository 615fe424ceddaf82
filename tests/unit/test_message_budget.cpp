// What pgtether does with a client message larger than client_buffer_limit
// (core/message_budget.hpp), table by table.
#include <doctest/doctest.h>

#include "core/message_budget.hpp"
#include "core/tether_policy.hpp"
#include "protocol/message_types.hpp"
#include "protocol/sql_scanner.hpp"

using namespace pgtether;
namespace fe = protocol::fe;
using A = OversizedAction;

TEST_CASE("oversized messages: stream, wait for the names, discard or refuse") {
    struct Case {
        const char* name;
        OversizedMessage message;
        OversizedAction want;
    };
    // Fields: type, skipping_to_sync, head_complete, budget_reached, names_statement,
    // translates_statements.
    const Case cases[] = {
        {"Query is streamed", {fe::kQuery, false, true, false, false, true}, A::Stream},
        {"Query in session mode", {fe::kQuery, false, true, false, false, false}, A::Stream},
        {"FunctionCall is streamed",
         {fe::kFunctionCall, false, true, false, false, true},
         A::Stream},
        {"CopyData is streamed", {fe::kCopyData, false, true, false, false, true}, A::Stream},
        {"CopyFail is streamed", {fe::kCopyFail, false, true, false, false, true}, A::Stream},
        {"unnamed Parse is streamed", {fe::kParse, false, true, false, false, true}, A::Stream},
        {"named Parse, translated: must be kept, refused",
         {fe::kParse, false, true, false, true, true},
         A::RefuseStatement},
        {"named Parse, not translated: streamed",
         {fe::kParse, false, true, false, true, false},
         A::Stream},
        {"Parse before its name arrived waits",
         {fe::kParse, false, false, false, true, true},
         A::WaitForHead},
        {"Parse whose name fills the budget",
         {fe::kParse, false, false, true, false, true},
         A::RefuseConnection},
        {"Bind is streamed (head rewritten when translated)",
         {fe::kBind, false, true, false, false, true},
         A::Stream},
        {"Bind not translated", {fe::kBind, false, true, false, false, false}, A::Stream},
        {"Bind before its names arrived waits",
         {fe::kBind, false, false, false, false, true},
         A::WaitForHead},
        {"Bind whose names fill the budget",
         {fe::kBind, false, false, true, false, true},
         A::RefuseConnection},
        {"skipping to Sync: a Query is discarded",
         {fe::kQuery, true, true, false, false, true},
         A::Discard},
        {"skipping to Sync: a named Parse is discarded, not refused",
         {fe::kParse, true, true, false, true, true},
         A::Discard},
        {"skipping to Sync: an oversized Sync is still invalid",
         {fe::kSync, true, true, false, false, true},
         A::RefuseConnection},
        {"Describe beyond PostgreSQL's own limit",
         {fe::kDescribe, false, true, false, false, true},
         A::RefuseConnection},
        {"Close", {fe::kClose, false, true, false, false, true}, A::RefuseConnection},
        {"Execute", {fe::kExecute, false, true, false, false, true}, A::RefuseConnection},
        {"Flush", {fe::kFlush, false, true, false, false, true}, A::RefuseConnection},
        {"CopyDone", {fe::kCopyDone, false, true, false, false, true}, A::RefuseConnection},
        {"Terminate", {fe::kTerminate, false, true, false, false, true}, A::RefuseConnection},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK(decide_oversized_message(c.message) == c.want);
    }
}

TEST_CASE("unscanned text is assumed to do everything the probe checks, but not LOAD") {
    const std::uint32_t assumed = unscanned_effects();
    // Every probed kind follows from the assumed effects.
    CHECK(probe_kinds_for(assumed, kProbedKinds, false) == kProbedKinds);
    CHECK((assumed & protocol::kEffectAdvisoryLock) != 0);
    CHECK((assumed & protocol::kEffectCatalogChange) != 0);
    CHECK((assumed & protocol::kEffectSavepoint) != 0);
    CHECK((assumed & protocol::kEffectLoad) == 0);
}
