-- scripts/bench-events.sh: the PostgreSQL loop it times.
-- Per call: vcode_issue of a new phone (inserts a verification), then vcode_verify_by_id with a
-- wrong code (updates it), N times; prints microseconds per call of each.
CREATE OR REPLACE FUNCTION bench(n integer) RETURNS TABLE(issue_us numeric, verify_us numeric)
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz; t1 timestamptz; t2 timestamptz;
  run text := md5(random()::text);
BEGIN
  t0 := clock_timestamp();
  FOR i IN 1..n LOOP
    PERFORM vcode_issue('+86138' || lpad(i::text, 8, '0') || run, 'login', '\x00112233445566778899aabbccddeeff'::bytea, NULL,
      300000, 0, false, i, 99999999999999, '{}'::integer[], '{}'::bigint[], run || i, 3600000);
  END LOOP;
  t1 := clock_timestamp();
  FOR i IN 1..n LOOP
    PERFORM vcode_verify_by_id('+86138' || lpad(i::text, 8, '0') || run, 'login', run || i, '1.2.3.4',
      ARRAY['\xffeeddccbbaa99887766554433221100'::bytea], 1000000, i, '{}'::integer[], '{}'::bigint[],
      '{}'::integer[], '{}'::bigint[]);
  END LOOP;
  t2 := clock_timestamp();
  RETURN QUERY SELECT round(extract(epoch FROM t1 - t0) * 1e6 / n, 1), round(extract(epoch FROM t2 - t1) * 1e6 / n, 1);
END $$;
