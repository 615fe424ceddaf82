-- Set-up for tests/bench/dequeue.sql (compare.sh --setup-sql tests/bench/jobs_setup.sql): a
-- queue of 100,000 jobs.
DROP TABLE IF EXISTS jobs;
CREATE TABLE jobs (id bigint PRIMARY KEY, runs int NOT NULL DEFAULT 0);
INSERT INTO jobs (id) SELECT g FROM generate_series(1, 100000) AS g;
