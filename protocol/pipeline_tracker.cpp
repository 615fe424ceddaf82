#include "protocol/pipeline_tracker.hpp"

#include "protocol/message_types.hpp"

namespace pgtether::protocol {

void PipelineTracker::on_frontend(char type) {
    switch (type) {
        case fe::kQuery:
        case fe::kFunctionCall:
            ++outstanding_;
            break;
        case fe::kSync:
            ++outstanding_;
            unsynced_ = false;
            break;
        case fe::kParse:
        case fe::kBind:
        case fe::kDescribe:
        case fe::kExecute:
        case fe::kClose:
        case fe::kFlush:
            // Extended-protocol messages: one that fails (a Flush with a body, too) has the
            // backend discard everything up to the next Sync (protocol §55.2.3).
            unsynced_ = true;
            break;
        default:
            // CopyData/CopyDone/CopyFail: no reply of their own that ends a request.
            break;
    }
}

void PipelineTracker::on_backend(char type) {
    switch (type) {
        case be::kCopyInResponse:
            copy_in_ = true;
            break;
        case be::kCopyOutResponse:
            copy_out_ = true;
            break;
        case be::kCopyBothResponse:
            copy_in_ = copy_out_ = true;
            break;
        case be::kCopyDone:
            copy_out_ = false;
            break;
        case be::kErrorResponse:
            // An error when no Query, FunctionCall or Sync awaits its ReadyForQuery came from an
            // extended-protocol message: the backend now discards everything up to a Sync, a
            // probe of pgtether's included, so the backend is not at a boundary until then.
            if (outstanding_ == 0) unsynced_ = true;
            // Like CommandComplete, it ends a COPY in either direction (protocol §55.2.6).
            copy_in_ = copy_out_ = false;
            break;
        case be::kCommandComplete:
            copy_in_ = copy_out_ = false;
            break;
        default:
            break;
    }
}

void PipelineTracker::on_ready_for_query(char tx_status) {
    if (outstanding_ > 0) --outstanding_;
    tx_status_ = tx_status;
    copy_in_ = copy_out_ = false;
}

}  // namespace pgtether::protocol
