DO $body$
BEGIN
  EXECUTE $q$SELECT pg_advisory_lock(1)$q$;
  PERFORM pg_advisory_xact_lock(2);
END
$body$;