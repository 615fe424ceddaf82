-- A schema for the lock-discovery benchmark (docs/benchmarks.md, "Lock-wrapper discovery"):
-- 1,000 functions in schema app, of which 20 take or release session advisory locks -- 10 directly
-- (half PL/pgSQL, half SQL), 10 through another wrapper -- and 980 that do not (PL/pgSQL and SQL
-- bodies of a realistic size, some calling each other). pgbench -S never calls any of them: the
-- benchmark measures what discovery costs a workload that does not use them.
CREATE SCHEMA IF NOT EXISTS app;
DO $$
DECLARE
    i int;
BEGIN
    FOR i IN 1..10 LOOP
        IF i % 2 = 0 THEN
            EXECUTE format('CREATE FUNCTION app.job_lock_%s(k bigint) RETURNS void LANGUAGE plpgsql '
                           'AS $b$ BEGIN PERFORM pg_advisory_lock(k); END $b$', i);
        ELSE
            EXECUTE format('CREATE FUNCTION app.job_lock_%s(k bigint) RETURNS boolean LANGUAGE sql '
                           'AS $b$ SELECT pg_try_advisory_lock(k) $b$', i);
        END IF;
        EXECUTE format('CREATE FUNCTION app.job_step_%s(k bigint) RETURNS void LANGUAGE plpgsql '
                       'AS $b$ BEGIN PERFORM app.job_lock_%s(k); RAISE DEBUG %L, k; END $b$',
                       i, i, 'locked %');
    END LOOP;
    FOR i IN 1..980 LOOP
        IF i % 2 = 0 THEN
            EXECUTE format(
                'CREATE FUNCTION app.helper_%s(a bigint, b text) RETURNS bigint LANGUAGE plpgsql AS $b$ '
                'DECLARE total bigint := 0; '
                'BEGIN '
                '  SELECT count(*) INTO total FROM pgbench_accounts WHERE aid = a; '
                '  IF b IS NOT NULL AND length(b) > 10 THEN total := total + length(b); END IF; '
                '  UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = -1; '
                '  RETURN total + app.helper_%s(a - 1, NULL) * 0; '
                'END $b$', i, i - 1);
        ELSE
            EXECUTE format(
                'CREATE FUNCTION app.helper_%s(a bigint, b text) RETURNS bigint LANGUAGE sql AS $b$ '
                'SELECT coalesce(sum(abalance), 0) + length(coalesce(b, %L)) '
                'FROM pgbench_accounts WHERE aid BETWEEN a AND a + 10 $b$', i, 'x');
        END IF;
    END LOOP;
END $$;
