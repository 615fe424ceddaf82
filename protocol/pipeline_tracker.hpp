// Tracks what a backend still owes its client, to find the clean transaction boundaries at which
// a transaction pooler may hand the backend to someone else.
//
// Every Query, FunctionCall and Sync the client sends is answered by exactly one ReadyForQuery
// (protocol §55.2.2 and §55.2.3: after an error in the extended protocol the server discards
// messages up to the next Sync, then answers that Sync). So the backend is idle when
//   - every such request has had its ReadyForQuery,
//   - no extended-protocol message is waiting for a Sync (a Parse/Bind/Execute batch with no Sync
//     yet still belongs to this backend), and
//   - the last ReadyForQuery said 'I' (not in a transaction block), and
//   - no client message has been passed on in part: the backend reads the rest of it first,
//     whatever its type (CopyData outside a COPY, which the backend ignores, included).
#pragma once

namespace pgtether::protocol {

class PipelineTracker {
public:
    // A message the client sent to this backend.
    void on_frontend(char type);
    // A message the backend sent (only the type matters except for ReadyForQuery).
    void on_backend(char type);
    void on_ready_for_query(char tx_status);

    // A client message is being passed on in pieces (`true` once its first part went out,
    // `false` when its last byte did).
    void set_frontend_partial(bool partial) { frontend_partial_ = partial; }

    // At a clean boundary: nothing outstanding and not inside a transaction block.
    [[nodiscard]] bool idle() const { return quiet() && tx_status_ == 'I' && !copy_in_; }
    // Nothing outstanding (the transaction block may still be open).
    [[nodiscard]] bool quiet() const {
        return outstanding_ == 0 && !unsynced_ && !frontend_partial_;
    }
    [[nodiscard]] bool frontend_partial() const { return frontend_partial_; }
    [[nodiscard]] int outstanding() const { return outstanding_; }
    [[nodiscard]] bool unsynced() const { return unsynced_; }
    [[nodiscard]] char tx_status() const { return tx_status_; }
    [[nodiscard]] bool in_copy_in() const { return copy_in_; }
    [[nodiscard]] bool in_copy_out() const { return copy_out_; }

    void reset() { *this = PipelineTracker{}; }

private:
    int outstanding_ = 0;     // requests still waiting for their ReadyForQuery
    bool unsynced_ = false;   // extended-protocol messages sent since the last Sync
    char tx_status_ = 'I';    // from the last ReadyForQuery
    bool copy_in_ = false;    // server sent CopyInResponse and expects CopyData from the client
    bool copy_out_ = false;   // server is streaming CopyData to the client
    bool frontend_partial_ = false;  // see set_frontend_partial()
};

}  // namespace pgtether::protocol
