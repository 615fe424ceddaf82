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
            unsynced_ = true;
            break;
        default:
            // Flush, CopyData/CopyDone/CopyFail: no reply of their own that ends a request.
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
        case be::kCommandComplete:
        case be::kErrorResponse:
            // Both end a COPY in either direction (protocol §55.2.6).
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
