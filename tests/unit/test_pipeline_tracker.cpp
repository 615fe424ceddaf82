// The transaction-boundary tracker: when may a backend go back to the pool?
#include <doctest/doctest.h>

#include "protocol/pipeline_tracker.hpp"

using pgtether::protocol::PipelineTracker;

TEST_CASE("simple query: idle again after its ReadyForQuery") {
    PipelineTracker t;
    CHECK(t.idle());
    t.on_frontend('Q');
    CHECK_FALSE(t.idle());
    t.on_backend('T');
    t.on_backend('D');
    t.on_backend('C');
    CHECK_FALSE(t.idle());
    t.on_ready_for_query('I');
    CHECK(t.idle());
}

TEST_CASE("an open transaction block keeps the backend") {
    PipelineTracker t;
    t.on_frontend('Q');
    t.on_ready_for_query('T');
    CHECK(t.quiet());
    CHECK_FALSE(t.idle());
    t.on_frontend('Q');
    t.on_ready_for_query('E');
    CHECK_FALSE(t.idle());
    t.on_frontend('Q');
    t.on_ready_for_query('I');
    CHECK(t.idle());
}

TEST_CASE("pipelined extended protocol: idle only after the last Sync is answered") {
    PipelineTracker t;
    for (int i = 0; i < 3; ++i) {
        t.on_frontend('P');
        t.on_frontend('B');
        t.on_frontend('E');
        t.on_frontend('S');
    }
    CHECK(t.outstanding() == 3);
    t.on_ready_for_query('I');
    t.on_ready_for_query('I');
    CHECK_FALSE(t.idle());
    t.on_ready_for_query('I');
    CHECK(t.idle());
}

TEST_CASE("extended messages without Sync keep the backend") {
    PipelineTracker t;
    t.on_frontend('P');
    t.on_frontend('B');
    t.on_frontend('E');
    t.on_frontend('H');
    CHECK(t.unsynced());
    CHECK_FALSE(t.idle());
    t.on_frontend('S');
    CHECK_FALSE(t.unsynced());
    t.on_ready_for_query('I');
    CHECK(t.idle());
}

TEST_CASE("COPY FROM STDIN is tracked until it completes") {
    PipelineTracker t;
    t.on_frontend('Q');
    t.on_backend('G');
    CHECK(t.in_copy_in());
    t.on_frontend('d');
    t.on_frontend('c');
    CHECK(t.in_copy_in());
    t.on_backend('C');
    CHECK_FALSE(t.in_copy_in());
    t.on_ready_for_query('I');
    CHECK(t.idle());
}

TEST_CASE("COPY TO STDOUT ends with CopyDone") {
    PipelineTracker t;
    t.on_frontend('Q');
    t.on_backend('H');
    CHECK(t.in_copy_out());
    t.on_backend('d');
    t.on_backend('c');
    CHECK_FALSE(t.in_copy_out());
}

TEST_CASE("a ReadyForQuery nobody asked for does not underflow") {
    PipelineTracker t;
    t.on_ready_for_query('I');
    CHECK(t.outstanding() == 0);
    CHECK(t.idle());
}

TEST_CASE("a client message passed on in pieces keeps the backend until its last byte") {
    PipelineTracker t;
    // A Query answered while the CopyData after it (ignored outside a COPY) is only half sent.
    t.on_frontend('Q');
    t.on_frontend('d');
    t.set_frontend_partial(true);
    t.on_backend('T');
    t.on_backend('C');
    t.on_ready_for_query('I');
    CHECK(t.outstanding() == 0);
    CHECK_FALSE(t.quiet());
    CHECK_FALSE(t.idle());
    t.set_frontend_partial(false);
    CHECK(t.quiet());
    CHECK(t.idle());
}

TEST_CASE("an error with nothing awaiting a ReadyForQuery keeps the backend until a Sync") {
    // A Flush (or any extended message) that fails: the backend discards everything up to the
    // next Sync, so nothing of pgtether's may be sent to it, and it is not at a boundary.
    PipelineTracker t;
    t.on_frontend('Q');
    t.on_ready_for_query('I');
    CHECK(t.idle());
    t.on_frontend('H');
    CHECK_FALSE(t.idle());
    t.on_backend('E');
    CHECK_FALSE(t.idle());
    t.on_frontend('S');
    t.on_ready_for_query('I');
    CHECK(t.idle());

    // The error of a simple Query is followed by its ReadyForQuery: no Sync needed.
    t.on_frontend('Q');
    t.on_backend('E');
    t.on_ready_for_query('I');
    CHECK(t.idle());

    // An error that arrives after the boundary (a failed message the client sent behind its
    // Query): not idle until a Sync.
    t.on_backend('E');
    CHECK_FALSE(t.idle());
    CHECK(t.unsynced());
    t.on_frontend('S');
    t.on_ready_for_query('I');
    CHECK(t.idle());
}
