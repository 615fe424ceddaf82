// What a backend will answer, in order, and what pgtether must do with each answer.
//
// When pgtether only forwards, the backend's replies go to the client as they come. With
// prepared-statement translation it also *injects* messages the client never sent (a Parse that
// prepares a statement on a backend lacking it, a Close that evicts one) whose replies the client
// must not see, and answers some client messages *itself* (a Parse of a statement the backend
// already has, a Close of a client name) at exactly the point of the reply stream where the
// backend's answer would have been. Every request is queued; each backend message is matched to
// the request at the head (protocol §55.2.3: replies come in request order, and after an error
// the backend discards messages up to the next Sync, sending nothing for them).
//
// I/O-free: the caller feeds backend message types and acts on what comes out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/prepared_statements.hpp"

namespace pgtether {

struct QueuedRequest {
    enum class Kind : std::uint8_t {
        Forwarded,  // the client's own message: every reply goes to the client
        Injected,   // pgtether's: success replies are swallowed, an ErrorResponse goes through
        Answered,   // never sent: pgtether sends `reply` when its turn comes
    };
    // What to undo if the request fails or the backend skips it (it never took effect).
    enum Undo : std::uint8_t {
        kUndoNone = 0,
        kUndoClientAdd = 1,     // remove client_name from the client's statements
        kUndoClientRemove = 2,  // put client_name → statement back
        kUndoServerAdd = 4,     // the backend does not have `statement` after all
        kUndoServerRemove = 8,  // the backend still has `statement`
        kUndoServerStale = 16,  // the backend still has a stale `statement` (ServerStatements)
    };

    char type = 0;  // the frontend message type: 'P', 'B', 'D', 'E', 'C', 'S', 'Q', 'F'
    Kind kind = Kind::Forwarded;
    std::uint8_t undo = kUndoNone;
    std::string reply;        // Answered: the bytes to send
    std::string client_name;  // for undo
    StatementPtr statement;   // for undo, and to keep needed statements from eviction
};

// The request never took effect on the backend (it failed, or the backend skipped it after an
// error): takes back what translation assumed, on both sides -- the client's names (`client`,
// null once the client has left) and the backend's statements.
void undo_request(const QueuedRequest& request, ClientStatements* client,
                  ServerStatements& server);

class RequestQueue {
public:
    enum class Verdict { Forward, Swallow };
    enum class Outcome { Failed, Skipped, Answer };
    struct Finished {
        QueuedRequest request;
        Outcome outcome;
    };

    // Queues a request. An Answered one at the head is finished at once (Outcome::Answer).
    void push(QueuedRequest request);
    // The same for a client message forwarded as it is (Kind::Forwarded, no undo): the common
    // case, one per message while translation is on, without building a QueuedRequest.
    void push_forwarded(char type);
    // Feeds one backend message type; says whether it goes to the client. Requests that failed,
    // those the backend skipped after an error, and Answered ones that became due are appended to
    // finished(), in order; a request that simply completed is dropped (nothing to do for it).
    Verdict on_backend_message(char type);
    [[nodiscard]] std::vector<Finished>& finished() { return finished_; }

    [[nodiscard]] bool empty() const { return head_ == queue_.size(); }
    [[nodiscard]] std::size_t size() const { return queue_.size() - head_; }
    // Ids of statements queued requests still need (they must not be evicted meanwhile).
    [[nodiscard]] std::vector<std::uint64_t> pinned_statements() const;
    void clear() {
        queue_.clear();
        head_ = 0;
        finished_.clear();
    }

private:
    static constexpr std::size_t kCompactAt = 32;

    void answer_due();
    void compact();
    [[nodiscard]] QueuedRequest& front() { return queue_[head_]; }
    void pop_front();

    // Pending requests are queue_[head_..]: a vector whose capacity survives from transaction to
    // transaction (a deque of these allocates and frees a block every few requests).
    std::vector<QueuedRequest> queue_;
    std::size_t head_ = 0;
    std::vector<Finished> finished_;
};

}  // namespace pgtether
