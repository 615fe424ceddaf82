// Fuzzes the pipeline tracker (protocol/pipeline_tracker.hpp) with a random conversation: each
// input byte is one event, a message the client sends or one the server sends (the low bits pick
// the type from the protocol's tables, so any byte is a real message type; ReadyForQuery takes
// its status from the next byte, which may be anything a broken server sends).
//
// Checked after every event, against the tracker's contract (protocol §55.2.2, §55.2.3, §55.2.6):
//  * Query, FunctionCall and Sync each add one outstanding request; Sync ends the unsynced run;
//    Parse, Bind, Describe, Execute, Close and Flush start one; other client messages change
//    nothing;
//  * a server message other than ReadyForQuery changes neither the requests nor the transaction
//    status; an ErrorResponse with no request outstanding starts an unsynced run (the backend
//    skips to the next Sync) and changes nothing else of it; CopyIn/CopyOut/CopyBoth start a
//    COPY, CopyDone ends COPY OUT, CommandComplete and ErrorResponse end any COPY;
//  * ReadyForQuery answers one request (never going below zero), sets the status, ends any COPY;
//  * a message passed on in pieces (events 0x7E/0x7F: its first / last part) keeps the backend
//    from being quiet and changes nothing else;
//  * quiet() is exactly: nothing outstanding, nothing unsynced, no message in pieces; idle() is
//    quiet() with status 'I' and no COPY IN.
#include <array>
#include <cstddef>
#include <cstdint>

#include "protocol/message_types.hpp"
#include "protocol/pipeline_tracker.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace pgtether::protocol;
using pgtether::fuzz::require;

namespace {

constexpr std::array<char, 14> kFrontend = {
    fe::kBind,     fe::kClose,       fe::kCopyData, fe::kCopyDone, fe::kCopyFail,
    fe::kDescribe, fe::kExecute,     fe::kFlush,    fe::kFunctionCall, fe::kParse,
    fe::kPassword, fe::kQuery,       fe::kSync,     fe::kTerminate};
constexpr std::array<char, 24> kBackend = {
    be::kAuthentication,    be::kBackendKeyData,   be::kBindComplete,
    be::kCloseComplete,     be::kCommandComplete,  be::kCopyData,
    be::kCopyDone,          be::kCopyInResponse,   be::kCopyOutResponse,
    be::kCopyBothResponse,  be::kDataRow,          be::kEmptyQueryResponse,
    be::kErrorResponse,     be::kFunctionCallResponse, be::kNegotiateProtocolVersion,
    be::kNoData,            be::kNoticeResponse,   be::kNotificationResponse,
    be::kParameterDescription, be::kParameterStatus, be::kParseComplete,
    be::kPortalSuspended,   be::kReadyForQuery,    be::kRowDescription};

struct State {
    int outstanding;
    bool unsynced;
    char tx;
    bool copy_in;
    bool copy_out;
};

State state_of(const PipelineTracker& t) {
    return {t.outstanding(), t.unsynced(), t.tx_status(), t.in_copy_in(), t.in_copy_out()};
}

void check_invariants(const PipelineTracker& t) {
    require(t.outstanding() >= 0, "never below zero outstanding");
    require(t.quiet() == (t.outstanding() == 0 && !t.unsynced() && !t.frontend_partial()),
            "quiet()");
    require(t.idle() == (t.quiet() && t.tx_status() == 'I' && !t.in_copy_in()), "idle()");
}

void client_sends(PipelineTracker& t, char type) {
    const State before = state_of(t);
    t.on_frontend(type);
    const State after = state_of(t);
    require(after.tx == before.tx && after.copy_in == before.copy_in &&
                after.copy_out == before.copy_out,
            "a client message leaves the server's state alone");
    switch (type) {
        case fe::kQuery:
        case fe::kFunctionCall:
            require(after.outstanding == before.outstanding + 1 &&
                        after.unsynced == before.unsynced,
                    "Query/FunctionCall: one more request");
            break;
        case fe::kSync:
            require(after.outstanding == before.outstanding + 1 && !after.unsynced,
                    "Sync: one more request, synced");
            break;
        case fe::kParse:
        case fe::kBind:
        case fe::kDescribe:
        case fe::kExecute:
        case fe::kClose:
        case fe::kFlush:
            require(after.outstanding == before.outstanding && after.unsynced,
                    "extended message: unsynced");
            break;
        default:
            require(after.outstanding == before.outstanding && after.unsynced == before.unsynced,
                    "other client messages change nothing");
            break;
    }
}

void server_sends(PipelineTracker& t, char type) {
    const State before = state_of(t);
    t.on_backend(type);
    const State after = state_of(t);
    const bool skips_to_sync = type == be::kErrorResponse && before.outstanding == 0;
    require(after.outstanding == before.outstanding &&
                after.unsynced == (before.unsynced || skips_to_sync) && after.tx == before.tx,
            "a server message is not a ReadyForQuery");
    bool in = before.copy_in;
    bool out = before.copy_out;
    switch (type) {
        case be::kCopyInResponse: in = true; break;
        case be::kCopyOutResponse: out = true; break;
        case be::kCopyBothResponse: in = out = true; break;
        case be::kCopyDone: out = false; break;
        case be::kCommandComplete:
        case be::kErrorResponse: in = out = false; break;
        default: break;
    }
    require(after.copy_in == in && after.copy_out == out, "COPY state follows the server");
}

void server_ready(PipelineTracker& t, char status) {
    const State before = state_of(t);
    t.on_ready_for_query(status);
    const State after = state_of(t);
    require(after.outstanding == (before.outstanding > 0 ? before.outstanding - 1 : 0),
            "ReadyForQuery answers one request");
    require(after.unsynced == before.unsynced && after.tx == status && !after.copy_in &&
                !after.copy_out,
            "ReadyForQuery sets the status and ends COPY");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    PipelineTracker t;
    check_invariants(t);
    require(t.idle(), "a new tracker is idle");
    for (std::size_t i = 0; i < size; ++i) {
        const std::uint8_t event = data[i];
        if (event == 0xFF) {
            t.reset();
            require(t.idle() && t.outstanding() == 0 && t.tx_status() == 'I', "reset");
        } else if (event == 0x7E || event == 0x7F) {
            const State before = state_of(t);
            t.set_frontend_partial(event == 0x7E);
            const State after = state_of(t);
            require(after.outstanding == before.outstanding && after.unsynced == before.unsynced &&
                        after.tx == before.tx && after.copy_in == before.copy_in &&
                        after.copy_out == before.copy_out && t.frontend_partial() == (event == 0x7E),
                    "a message in pieces changes nothing else");
        } else if (event & 0x80) {
            const char type = kBackend[(event & 0x7F) % kBackend.size()];
            if (type == be::kReadyForQuery) {
                const char status = i + 1 < size ? static_cast<char>(data[++i]) : 'I';
                server_ready(t, status);
            } else {
                server_sends(t, type);
            }
        } else {
            client_sends(t, kFrontend[event % kFrontend.size()]);
        }
        check_invariants(t);
    }
    return 0;
}
