#include "core/request_queue.hpp"

#include <limits>

#include "protocol/message_types.hpp"

namespace pgtether {

namespace be = protocol::be;

namespace {

// Does backend message `type` end the answer to a request of frontend type `request`?
// (Protocol §55.2.3 "Extended Query": each message's reply ends with these.)
bool completes(char request, char type) {
    switch (request) {
        case 'P': return type == be::kParseComplete || type == be::kErrorResponse;
        case 'B': return type == be::kBindComplete || type == be::kErrorResponse;
        case 'C': return type == be::kCloseComplete || type == be::kErrorResponse;
        case 'D':
            return type == be::kRowDescription || type == be::kNoData ||
                   type == be::kErrorResponse;
        case 'E':
            return type == be::kCommandComplete || type == be::kEmptyQueryResponse ||
                   type == be::kPortalSuspended || type == be::kErrorResponse;
        case 'S':
        case 'Q':
        case 'F':
            return type == be::kReadyForQuery;
        default:
            return false;
    }
}

bool is_extended(char request) {
    return request == 'P' || request == 'B' || request == 'C' || request == 'D' || request == 'E';
}

}  // namespace

void RequestQueue::compact() {
    if (head_ >= kCompactAt && head_ * 2 >= queue_.size()) {
        // A pipeline that never drains: drop the finished entries at the front now and then.
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
    }
}

void RequestQueue::push(QueuedRequest request) {
    compact();
    queue_.push_back(std::move(request));
    // The head is never an Answered request between calls (answer_due runs after every change
    // of the head), so only a request that became the head can be due.
    if (size() == 1) answer_due();
}

void RequestQueue::push_forwarded(char type) {
    compact();
    queue_.emplace_back().type = type;  // Kind::Forwarded, nothing to undo
}

void RequestQueue::pop_front() {
    if (++head_ == queue_.size()) {
        queue_.clear();  // keeps the capacity: the next transaction allocates nothing
        head_ = 0;
    } else {
        queue_[head_ - 1].statement.reset();  // let go of its statement now
    }
}

void RequestQueue::answer_due() {
    while (!empty() && front().kind == QueuedRequest::Kind::Answered) {
        finished_.push_back({std::move(front()), Outcome::Answer});
        pop_front();
    }
}

RequestQueue::Verdict RequestQueue::on_backend_message(char type) {
    // Asynchronous messages may arrive at any time and belong to no request.
    if (type == be::kNoticeResponse || type == be::kNotificationResponse ||
        type == be::kParameterStatus || empty()) {
        return Verdict::Forward;
    }
    QueuedRequest& head = front();
    bool error = type == be::kErrorResponse;
    Verdict verdict = head.kind == QueuedRequest::Kind::Injected && !error ? Verdict::Swallow
                                                                           : Verdict::Forward;
    if (!completes(head.type, type)) return verdict;

    bool failed = error && is_extended(head.type);
    // A request done as expected needs nothing more (finished() lists only what does): most
    // requests end this way, one per message a client sends while translation is on.
    if (failed) finished_.push_back({std::move(head), Outcome::Failed});
    pop_front();
    if (failed) {
        // The backend now discards everything up to the next Sync without a word.
        while (!empty() && front().type != 'S') {
            finished_.push_back({std::move(front()), Outcome::Skipped});
            pop_front();
        }
    }
    answer_due();
    return verdict;
}

std::vector<std::uint64_t> RequestQueue::pinned_statements() const {
    std::vector<std::uint64_t> ids;
    for (std::size_t i = head_; i < queue_.size(); ++i) {
        if (queue_[i].statement) ids.push_back(queue_[i].statement->id);
    }
    return ids;
}

void undo_request(const QueuedRequest& request, ClientStatements* client,
                  ServerStatements& server) {
    if (!request.statement) return;
    if ((request.undo & QueuedRequest::kUndoClientAdd) && client &&
        client->find(request.client_name) == request.statement) {
        client->remove(request.client_name);
    }
    if ((request.undo & QueuedRequest::kUndoClientRemove) && client) {
        client->add(request.client_name, request.statement);
    }
    if (request.undo & QueuedRequest::kUndoServerAdd) server.remove(*request.statement);
    if (request.undo & QueuedRequest::kUndoServerRemove) {
        server.add(request.statement, std::numeric_limits<std::size_t>::max(), {});
    }
    if (request.undo & QueuedRequest::kUndoServerStale) server.mark_stale(request.statement);
}

}  // namespace pgtether
