-- The event outbox holds facts (`created`, `ended=approved`…), not event types: the column
-- says so, and the old writer goes (its callers are replaced after the migrations, in the same
-- transaction, by functions.sql's vcode_fact_append). Entries written before keep their event
-- names, which Fact::parse still reads.
ALTER TABLE vcode_event_outbox RENAME COLUMN kind TO fact;
DROP FUNCTION IF EXISTS vcode_event_append(text, text, text, text, bigint, bigint, text);
