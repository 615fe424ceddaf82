-- pgbench script (tests/bench/compare.sh --setup-sql tests/bench/jobs_setup.sql --script
-- tests/bench/dequeue.sql): a que-style job runner. Each pgbench transaction dequeues a job by
-- taking a session lock on it in the WHERE clause (jobs other workers hold are skipped), does the
-- work under the lock, and releases it: three autocommit statements.
-- Through pgtether the dequeue is a shape exact accounting cannot read (the lock is taken per
-- scanned row), so it is probed, with the probe pipelined behind it; the work runs on the
-- tethered backend; the unlock is counted from its result (docs/advisory-locks.md).
\set start random(1, 99000)
SELECT id AS job FROM jobs WHERE id >= :start AND pg_try_advisory_lock(id) ORDER BY id LIMIT 1 \gset
UPDATE jobs SET runs = runs + 1 WHERE id = :job;
SELECT pg_advisory_unlock(:job);
