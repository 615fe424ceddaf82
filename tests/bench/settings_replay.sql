-- pgbench script (tests/bench/compare.sh --script tests/bench/settings_replay.sql): a select-only
-- workload in which every tenth client (client_id 0, 10, 20, ...) sets session parameters once, in
-- its first transaction, as drivers and ORMs do right after connecting. Run it twice:
--   --define settings_done=0   the 10% SET (statement_timeout, search_path and a custom setting)
--   --define settings_done=1   nobody SETs: the same workload without settings, the baseline
-- Through pgtether each SET is probed once and the settings are replayed on every backend that
-- later serves that client; no client is tethered (compare.sh --count-probes shows "tethered").
\if :client_id % 10 = 0 AND :settings_done = 0
SET statement_timeout = '60s';
SET search_path = public, pg_catalog;
SET myapp.tenant = 'tenant-42';
\set settings_done 1
\endif
\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
