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

-- PL/pgSQL, so its statement's plan is cached per connection (a SQL function's is made anew
-- on every call).
CREATE FUNCTION vcode_event_append(p_kind text, p_subject text, p_phone text, p_purpose text,
  p_at bigint, p_order bigint, p_detail text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO vcode_event_outbox (kind, subject, phone, purpose, at_ms, order_ms, detail, due_ms)
    VALUES (p_kind, p_subject, p_phone, p_purpose, p_at, p_order, p_detail, p_order);
END $$;

-- A verification's life: created (with its expiry timer), each wrong code, its end. A row
-- deleted before its time is a send rolled back (its id never handed out): its events go too;
-- the sweep deletes rows only after their time, and leaves the outbox alone.
CREATE FUNCTION vcode_verification_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := vcode_now_ms();
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM vcode_event_append('verification.created', NEW.id, NEW.phone, NEW.purpose,
      NEW.created_at_ms, NEW.created_at_ms, 'expires_at_ms=' || NEW.verifies_until_ms);
    PERFORM vcode_event_append('timer.expiry', NEW.id, NEW.phone, NEW.purpose,
      NEW.created_at_ms, NEW.verifies_until_ms, '');
    RETURN NEW;
  ELSIF TG_OP = 'DELETE' THEN
    IF OLD.expires_at_ms > now_ms THEN
      DELETE FROM vcode_event_outbox WHERE subject = OLD.id AND failed_at_ms IS NULL;
    END IF;
    RETURN OLD;
  END IF;
  IF NEW.failed_attempts > OLD.failed_attempts THEN
    PERFORM vcode_event_append('verification.failed_attempt', NEW.id, NEW.phone, NEW.purpose,
      now_ms, now_ms, 'attempts=' || NEW.failed_attempts);
  END IF;
  IF NEW.ended IS DISTINCT FROM OLD.ended AND NEW.ended IS NOT NULL THEN
    PERFORM vcode_event_append('verification.' || NEW.ended, NEW.id, NEW.phone, NEW.purpose,
      now_ms, now_ms, CASE WHEN NEW.ended = 'max_attempts_reached'
        THEN 'attempts=' || NEW.failed_attempts ELSE '' END);
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER vcode_verification_events
  AFTER INSERT OR UPDATE OR DELETE ON vcode_verifications
  FOR EACH ROW EXECUTE FUNCTION vcode_verification_events();

-- A prefix block: a new suspension (or hold), or an operator's lift.
CREATE FUNCTION vcode_block_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := vcode_now_ms();
  detail text := 'country=' || NEW.country || ';reason=' || NEW.reason || ';until_ms='
    || NEW.until_ms || ';strikes=' || NEW.strikes;
BEGIN
  IF TG_OP = 'INSERT' OR NEW.since_ms IS DISTINCT FROM OLD.since_ms THEN
    PERFORM vcode_event_append('prefix.suspended', 'prefix:' || NEW.prefix, '', '', now_ms,
      now_ms, detail);
  ELSIF NEW.lifted_ms IS DISTINCT FROM OLD.lifted_ms THEN
    PERFORM vcode_event_append('prefix.lifted', 'prefix:' || NEW.prefix, '', '', now_ms,
      now_ms, detail);
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER vcode_block_events
  AFTER INSERT OR UPDATE ON vcode_fraud_blocks
  FOR EACH ROW EXECUTE FUNCTION vcode_block_events();

ALTER TABLE vcode_verifications DISABLE TRIGGER vcode_verification_events;
ALTER TABLE vcode_fraud_blocks DISABLE TRIGGER vcode_block_events;

-- Turns the event triggers on (once: an enabled trigger is left alone, so instances starting
-- later take no lock on the tables). Turning them off is the operator's (ALTER TABLE ... DISABLE
-- TRIGGER): other instances may deliver what this one's writes.
CREATE FUNCTION vcode_events_record() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'vcode_verification_events'
             AND tgenabled = 'D') THEN
    ALTER TABLE vcode_verifications ENABLE TRIGGER vcode_verification_events;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'vcode_block_events'
             AND tgenabled = 'D') THEN
    ALTER TABLE vcode_fraud_blocks ENABLE TRIGGER vcode_block_events;
  END IF;
END $$;

-- Up to p_limit due events, each the first pending one of its subject among the oldest
-- p_window placed by now (a later expiry timer is neither due nor ahead of anything due), leased until p_now + p_lease_ms. Claims take turns on one lock, so two never
-- hand out one event.
CREATE FUNCTION vcode_events_claim(p_limit integer, p_window integer, p_lease_ms bigint)
RETURNS SETOF vcode_event_outbox LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := vcode_now_ms();
BEGIN
  PERFORM vcode_lock('events:claim');
  RETURN QUERY
  WITH walk AS (
    SELECT w.seq, w.due_ms,
      row_number() OVER (PARTITION BY w.subject ORDER BY w.order_ms, w.seq) AS rank
    FROM (SELECT o.seq, o.subject, o.order_ms, o.due_ms FROM vcode_event_outbox o
          WHERE o.failed_at_ms IS NULL AND o.order_ms <= now_ms
          ORDER BY o.order_ms, o.seq LIMIT p_window) w
  ), picked AS (
    SELECT walk.seq FROM walk WHERE walk.rank = 1 AND walk.due_ms <= now_ms
    ORDER BY walk.seq LIMIT p_limit
  )
  UPDATE vcode_event_outbox o
    SET due_ms = now_ms + p_lease_ms,
        lease = 1 + floor(random() * 9.2e18)::bigint
    FROM picked WHERE o.seq = picked.seq
    RETURNING o.*;
END $$;
