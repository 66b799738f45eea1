-- Version 4: the event outbox. Events are written by triggers on the rows whose change they
-- describe (a verification's, a prefix block's), so each is in the transaction of its change:
-- committed with it or not at all. No function of the earlier versions changed. The triggers
-- are created disabled: a database no instance has turned events on for (no endpoint
-- configured) writes nothing and pays nothing; vcode_events_record() enables them.
CREATE TABLE vcode_event_outbox (
  seq bigserial PRIMARY KEY,
  kind text NOT NULL,
  -- The verification id, or 'prefix:<digits>': events of one subject are delivered in order.
  subject text NOT NULL,
  phone text NOT NULL DEFAULT '',
  purpose text NOT NULL DEFAULT '',
  at_ms bigint NOT NULL,
  -- Its place in its subject's order (the expiry timer's: when it falls due).
  order_ms bigint NOT NULL,
  detail text NOT NULL DEFAULT '',
  due_ms bigint NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  delivered_to bigint NOT NULL DEFAULT 0,
  lease bigint NOT NULL DEFAULT 0,
  -- Set once given up: the row stays for the operator's replay.
  failed_at_ms bigint,
  error text NOT NULL DEFAULT ''
);
CREATE INDEX vcode_event_outbox_order ON vcode_event_outbox (order_ms, seq)
  WHERE failed_at_ms IS NULL;
CREATE INDEX vcode_event_outbox_subject ON vcode_event_outbox (subject);

-- A placeholder, for the trigger below to name: the body is functions.sql's,
-- applied after the migrations in the same transaction.
CREATE FUNCTION vcode_verification_events() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

CREATE TRIGGER vcode_verification_events
  AFTER INSERT OR UPDATE OR DELETE ON vcode_verifications
  FOR EACH ROW EXECUTE FUNCTION vcode_verification_events();

-- A placeholder, for the trigger below to name: the body is functions.sql's,
-- applied after the migrations in the same transaction.
CREATE FUNCTION vcode_block_events() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

CREATE TRIGGER vcode_block_events
  AFTER INSERT OR UPDATE ON vcode_fraud_blocks
  FOR EACH ROW EXECUTE FUNCTION vcode_block_events();

ALTER TABLE vcode_verifications DISABLE TRIGGER vcode_verification_events;
ALTER TABLE vcode_fraud_blocks DISABLE TRIGGER vcode_block_events;
