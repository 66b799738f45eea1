-- vcode's PostgreSQL store, version 18: the fraud guard's step of a send is a read of its
-- prefix's block, and the traffic report's counts are added by each instance about once a
-- second (`FraudStore::add_traffic`, one statement a flush) instead of by every send, its
-- give-back, its conversion and its receipt. What only those steps used goes: their functions,
-- every overload any earlier version made (by name, as 0014 drops by parameter), and the
-- attributions that tied a verify to its send's minute and shard. vcode_issue_guarded and
-- vcode_issue_guarded_levels lose their counting arguments, which CREATE OR REPLACE cannot do:
-- they go too, and functions.sql creates them again right after, in the same transaction.
-- The counts' table stays as it is: rows written before keep their shards, which reads sum.
DO $$
DECLARE
  gone regprocedure;
BEGIN
  FOR gone IN SELECT p.oid::regprocedure FROM pg_proc p
      WHERE p.pronamespace = current_schema()::regnamespace
        AND p.proname IN ('vcode_fraud_admit', 'vcode_fraud_release', 'vcode_fraud_convert',
          'vcode_fraud_undelivered', 'vcode_fraud_add', 'vcode_issue_guarded',
          'vcode_issue_guarded_levels')
  LOOP
    EXECUTE 'DROP FUNCTION ' || gone;
  END LOOP;
END $$;

DROP TABLE IF EXISTS vcode_fraud_attributions;
