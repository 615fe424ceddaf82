-- pgbench script (tests/bench/compare.sh --script tests/bench/advisory_xact_lock.sql): the same
-- guarded read as advisory_lock.sql with a transaction-level lock, the pattern
-- docs/advisory-locks.md recommends. The lock ends with the transaction, so no pooler needs to pin
-- anything: pgtether's trigger ignores _xact_ locks (no probe) and PgBouncer runs it correctly too.
\set aid random(1, 100000 * :scale)
BEGIN;
SELECT pg_advisory_xact_lock(:aid);
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
END;
