-- One name per concept (issue 37).
-- The event outbox holds facts (`created`, `ended=approved`…), not event types: the column
-- says so, and the old writer goes (its callers are replaced after the migrations, in the same
-- transaction, by functions.sql's vcode_fact_append). Entries written before keep their event
-- names, which Fact::parse still reads.
ALTER TABLE vcode_event_outbox RENAME COLUMN kind TO fact;
DROP FUNCTION IF EXISTS vcode_event_append(text, text, text, text, bigint, bigint, text);

-- The dev mode's messages are the dev inbox (the outbox is the events').
ALTER TABLE vcode_outbox RENAME TO vcode_dev_inbox;
DROP FUNCTION IF EXISTS vcode_push_outbox(text, text, integer, bigint);

-- Parameters are named by destination (a phone or an email address), not phone. CREATE OR
-- REPLACE cannot rename a parameter, so the functions that had a `p_phone` go here and
-- functions.sql creates them again right after, in the same transaction.
DO $$
DECLARE
  renamed regprocedure;
BEGIN
  FOR renamed IN SELECT p.oid::regprocedure FROM pg_proc p
      WHERE p.proname LIKE 'vcode\_%' AND p.pronamespace = current_schema()::regnamespace
        AND 'p_phone' = ANY (p.proargnames)
  LOOP
    EXECUTE 'DROP FUNCTION ' || renamed;
  END LOOP;
END $$;
