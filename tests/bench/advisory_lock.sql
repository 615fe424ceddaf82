-- pgbench script (tests/bench/compare.sh --script tests/bench/advisory_lock.sql): every pgbench
-- transaction takes a session-level advisory lock, reads under it and releases it, as three
-- separate autocommit statements -- the shape of a job runner or migration tool that guards one
-- piece of work with a session lock. Through pgtether the first statement tethers the client to
-- its backend, the second runs on that backend, the third releases the lock and the backend goes
-- back to the pool; the lock and unlock are counted from their results (exact accounting), so no
-- probe runs (before exact accounting: 2 probes per 3 statements).
-- PgBouncer cannot run this correctly in transaction mode: the unlock lands on another backend,
-- the lock leaks, and a later lock of the same key blocks forever.
\set aid random(1, 100000 * :scale)
SELECT pg_advisory_lock(:aid);
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT pg_advisory_unlock(:aid);
