-- pgbench script (tests/bench/compare.sh --script tests/bench/lock_probe.sql --targets direct):
-- the query pgtether's tether runs after a transaction that mentioned an advisory-lock function
-- (core/state_probe.cpp, build_state_probe for advisory locks), run on its own against PostgreSQL.
-- Its tps gives the cost of one probe, from which docs/benchmarks.md works out the probe's share
-- of the time in the advisory_lock.sql workload.
SELECT 'advisory', classid::text, objid::text, objsubid::text, mode FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid();
