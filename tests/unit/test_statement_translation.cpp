// Prepared-statement translation's decisions (core/statement_translation.hpp), table by table.
#include <doctest/doctest.h>

#include <string>

#include "core/statement_translation.hpp"

using namespace pgtether;
using P = ParseAction;
using U = UseAction;

TEST_CASE("a named Parse: forwarded and remembered, refused, or translated") {
    struct Case {
        const char* name;
        ParseFacts facts;  // translates, name_known, count_full, bytes_full, reserved_name,
                           // process_full
        ParseAction want;
    };
    const Case cases[] = {
        // Without translation the Parse always goes as sent; only what is remembered differs.
        {"no translation: remembered", {false, false, false, false}, P::ForwardRemember},
        {"no translation, known name: remembered again",
         {false, true, false, false},
         P::ForwardRemember},
        {"no translation, bytes full: effects only",
         {false, false, false, true},
         P::ForwardRememberEffects},
        {"no translation, count full, known name: effects only",
         {false, true, true, false},
         P::ForwardRememberEffects},
        {"no translation, count full, new name: not remembered",
         {false, false, true, false},
         P::ForwardUntracked},
        {"no translation, count and bytes full, new name: not remembered",
         {false, false, true, true},
         P::ForwardUntracked},
        // With translation the client's names are pgtether's to keep.
        {"translated", {true, false, false, false}, P::Translate},
        {"translated, known name: 42P05", {true, true, false, false}, P::RefuseDuplicate},
        {"translated, known name beats the limits", {true, true, true, true}, P::RefuseDuplicate},
        {"translated, count full: 53400", {true, false, true, false}, P::RefuseTooMany},
        {"translated, count and bytes full: the count is named",
         {true, false, true, true},
         P::RefuseTooMany},
        {"translated, bytes full: 53400", {true, false, false, true}, P::RefuseTooLarge},
        // The process-wide bound comes after the client's own.
        {"translated, process full: 54000",
         {true, false, false, false, false, true},
         P::RefuseProcessFull},
        {"translated, client bytes and process full: the client's bound is named",
         {true, false, false, true, false, true},
         P::RefuseTooLarge},
        {"no translation, process full: effects only",
         {false, false, false, false, false, true},
         P::ForwardRememberEffects},
        // A reserved name is refused before anything else is looked at.
        {"translated, reserved name: 42939",
         {true, false, false, false, true, false},
         P::RefuseReservedName},
        {"translated, reserved name beats everything",
         {true, true, true, true, true, true},
         P::RefuseReservedName},
        {"no translation, reserved name: the client's own, as sent",
         {false, false, false, false, true, false},
         P::ForwardRemember},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK(decide_parse(c.facts) == c.want);
    }
}

TEST_CASE("a Bind or Describe of a named statement: as sent, rewritten, or prepared first") {
    struct Case {
        const char* name;
        UseFacts facts;  // translates, name_known, text_withheld, on_backend, reserved_name
        UseAction want;
    };
    const Case cases[] = {
        {"no translation", {false, true, false, false}, U::ForwardAsSent},
        {"no translation, even if the backend has it",
         {false, true, false, true},
         U::ForwardAsSent},
        {"unknown name: the backend answers 26000 with the client's name",
         {true, false, false, false},
         U::ForwardAsSent},
        {"text not kept: cannot be prepared elsewhere",
         {true, true, true, false},
         U::ForwardAsSent},
        {"text not kept, on this backend: still as sent",
         {true, true, true, true},
         U::ForwardAsSent},
        {"the backend has it", {true, true, false, true}, U::Rewrite},
        {"the backend lacks it", {true, true, false, false}, U::PrepareAndRewrite},
        {"reserved name (another client's backend name): 42939",
         {true, false, false, false, true},
         U::RefuseReservedName},
        {"reserved name, no translation: as sent",
         {false, false, false, false, true},
         U::ForwardAsSent},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CHECK(decide_use(c.facts) == c.want);
    }
}

TEST_CASE("a Close of a named statement") {
    CHECK(decide_close(false, false) == CloseAction::ForwardForget);
    CHECK(decide_close(false, true) == CloseAction::ForwardForget);
    CHECK(decide_close(true, false) == CloseAction::AnswerCloseComplete);
    CHECK(decide_close(true, true) == CloseAction::RefuseReservedName);
}

TEST_CASE("reserved statement names: the prefix, backend names, the refusals") {
    CHECK(is_reserved_statement_name("pgtether_1"));
    CHECK(is_reserved_statement_name("pgtether_"));
    CHECK_FALSE(is_reserved_statement_name("PGTETHER_1"));  // protocol names are case-sensitive
    CHECK_FALSE(is_reserved_statement_name("pgtether"));
    CHECK_FALSE(is_reserved_statement_name("s_pgtether_1"));
    CHECK_FALSE(is_reserved_statement_name(""));
    CHECK(backend_statement_name("0a1b2c3d4e5f6789", 42) == "pgtether_0a1b2c3d4e5f6789_42");
    CHECK(is_reserved_statement_name(backend_statement_name("x", 1)));

    const Refusal named = reserved_name_refusal("pgtether_1");
    CHECK(std::string(named.sqlstate) == "42939");
    CHECK(named.message ==
          "prepared statement names beginning with \"pgtether_\" are reserved "
          "for pgtether's own statements (\"pgtether_1\")");
    CHECK(parse_refusal(P::RefuseReservedName, "pgtether_1", 0).message == named.message);
    const Refusal total = parse_refusal(P::RefuseProcessFull, "s1", 4096);
    CHECK(std::string(total.sqlstate) == "54000");
    CHECK(total.message.find("4096 bytes") != std::string::npos);
    CHECK(total.message.find("max_prepared_statement_bytes_total") != std::string::npos);

    // The backend raises the error itself; the quote in the message is doubled.
    CHECK(reserved_name_refusal_query() ==
          "DO $pgtether$BEGIN RAISE EXCEPTION USING ERRCODE = '42939', MESSAGE = 'prepared "
          "statement names beginning with \"pgtether_\" are reserved for pgtether''s own "
          "statements'; END$pgtether$");
}

TEST_CASE("a refused Parse names PostgreSQL's SQLSTATE and the limit") {
    const Refusal duplicate = parse_refusal(P::RefuseDuplicate, "s1", 1000);
    CHECK(std::string(duplicate.sqlstate) == "42P05");
    CHECK(duplicate.message == "prepared statement \"s1\" already exists");
    const Refusal many = parse_refusal(P::RefuseTooMany, "s1", 1000);
    CHECK(std::string(many.sqlstate) == "53400");
    CHECK(many.message.find(std::to_string(kMaxClientStatements)) != std::string::npos);
    const Refusal large = parse_refusal(P::RefuseTooLarge, "s1", 1234);
    CHECK(std::string(large.sqlstate) == "53400");
    CHECK(large.message.find("1234 bytes") != std::string::npos);
    CHECK(large.message.find("max_prepared_statement_bytes") != std::string::npos);
}

TEST_CASE("a statement the backend lost: when the batch is sent again") {
    // Arming: every fact must hold.
    const LostStatementArming all{true, true, true, true, true};
    CHECK(may_retry_lost_statement(all));
    for (int drop = 0; drop < 5; ++drop) {
        LostStatementArming facts = all;
        bool* fields[] = {&facts.rewrite, &facts.no_effects, &facts.backend_idle,
                          &facts.outside_block, &facts.whole_message};
        *fields[drop] = false;
        CHECK_MESSAGE(!may_retry_lost_statement(facts), "fact " << drop);
    }

    // The capture: the opening Bind, then Describe, Execute, Flush up to the Sync.
    struct Step {
        char type;
        std::size_t captured;
        std::size_t size;
        CaptureStep step;
    };
    const Step steps[] = {
        {'B', 0, 40, CaptureStep::Keep},
        {'D', 40, 7, CaptureStep::Keep},
        {'E', 47, 10, CaptureStep::Keep},
        {'H', 57, 5, CaptureStep::Keep},
        {'S', 62, 5, CaptureStep::Complete},
        {'B', 40, 40, CaptureStep::GiveUp},  // a second Bind
        {'P', 40, 30, CaptureStep::GiveUp},  // Parse
        {'C', 40, 10, CaptureStep::GiveUp},  // Close
        {'Q', 40, 20, CaptureStep::GiveUp},  // Query
        {'F', 40, 20, CaptureStep::GiveUp},  // FunctionCall
        {'d', 40, 20, CaptureStep::GiveUp},  // CopyData
        {'E', kMaxLostStatementBatch - 10, 10, CaptureStep::Keep},
        {'E', kMaxLostStatementBatch - 10, 11, CaptureStep::GiveUp},  // over the bound
        {'B', 0, kMaxLostStatementBatch + 1, CaptureStep::GiveUp},
    };
    for (const auto& s : steps) {
        CHECK_MESSAGE(capture_step(s.type, s.captured, s.size) == s.step,
                      s.type << " after " << s.captured << " bytes");
    }

    // At the ReadyForQuery after the held error.
    CHECK(retry_lost_statement({true, true, 'I', true}));
    CHECK_FALSE(retry_lost_statement({false, true, 'I', true}));  // the Sync has not come
    CHECK_FALSE(retry_lost_statement({true, false, 'I', true}));  // the client sent more meanwhile
    CHECK_FALSE(retry_lost_statement({true, true, 'T', true}));
    CHECK_FALSE(retry_lost_statement({true, true, 'E', true}));
    CHECK_FALSE(retry_lost_statement({true, true, 'I', false}));  // inside the client's read
}
