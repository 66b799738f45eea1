-- Every PostgreSQL function vcode calls, as it runs: applied at every start-up after the
-- migrations (src/store/postgres/migrations.rs), inside the same transaction and advisory lock,
-- with CREATE OR REPLACE, so this file is the one place to read or change a function. The
-- migrations hold tables, indexes and data changes, and drop what a change here leaves behind:
-- a function no longer called, an overload whose signature changed, or one whose parameters
-- were renamed (CREATE OR REPLACE can change neither).
-- The two trigger functions are created in migration 0004 as placeholders, for its triggers to
-- name; CREATE OR REPLACE keeps a function's identity, so the triggers (and whether they are
-- enabled: vcode_events_record) call the definitions below without being re-created.

-- The database's clock, in unix milliseconds: every row's times are this clock's.
CREATE OR REPLACE FUNCTION vcode_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- The transaction's advisory lock on a name (a destination's, a prefix's): released at commit.
CREATE OR REPLACE FUNCTION vcode_lock(p_name text) RETURNS void LANGUAGE sql VOLATILE AS
$$ SELECT pg_advisory_xact_lock(hashtextextended(p_name, 0)) $$;

-- 0 if every rule (p_limits[i] events in p_windows[i] ms) has room for one more event at
-- p_now, else the ms until each has.
CREATE OR REPLACE FUNCTION vcode_quota_wait(p_log text, p_now bigint, p_limits integer[], p_windows bigint[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  wait bigint := 0;
  events integer;
  freeing bigint;
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_limits, 1), 0) LOOP
    SELECT count(*) INTO events FROM vcode_quota_events
      WHERE log = p_log AND at_ms > p_now - p_windows[i];
    IF events >= p_limits[i] THEN
      -- The window has room again once this event leaves it.
      SELECT at_ms INTO freeing FROM vcode_quota_events
        WHERE log = p_log AND at_ms > p_now - p_windows[i]
        ORDER BY at_ms OFFSET events - p_limits[i] LIMIT 1;
      wait := greatest(wait, freeing + p_windows[i] - p_now);
    END IF;
  END LOOP;
  RETURN wait;
END $$;

-- Records event p_token at p_now, kept as long as the longest window needs it.
CREATE OR REPLACE FUNCTION vcode_quota_record(p_log text, p_now bigint, p_windows bigint[], p_token bigint)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO vcode_quota_events (log, token, at_ms, expires_at_ms)
  SELECT p_log, p_token, p_now, p_now + max(w) FROM unnest(p_windows) AS w HAVING max(w) > 0
  ON CONFLICT (log, token) DO UPDATE
    SET at_ms = excluded.at_ms, expires_at_ms = excluded.expires_at_ms
$$;

-- issue.lua's contract, as version 1's vcode_issue, plus the send's verification and, when
-- p_prefix is not null, the fraud guard's step of the send: a read of the prefix's block (no
-- lock: a block committed before this statement refuses it, on every instance). It is taken
-- once the send is sure to go (a cooldown or a quota refusal is answered as such, blocked or
-- not, as every store answers it) and before anything is written, so a refused send (o_kind
-- -4, with o_block) leaves nothing; else o_block is the prefix's block record, if any.
CREATE OR REPLACE FUNCTION vcode_issue_guarded(
  p_destination text, p_purpose text, p_digest bytea, p_sealed bytea, p_ttl_ms bigint,
  p_cooldown_ms bigint, p_rotate boolean, p_token bigint, p_not_after_ms bigint,
  p_limits integer[], p_windows bigint[], p_verification text, p_retention_ms bigint,
  p_prefix text, p_now bigint, p_enforce boolean,
  OUT o_kind integer, OUT o_wait_ms bigint, OUT o_digest bytea, OUT o_sealed bytea,
  OUT o_sent_at_ms bigint, OUT o_deliveries integer, OUT o_previous_digest bytea,
  OUT o_previous_sealed bytea, OUT o_previous_sent_at_ms bigint,
  OUT o_previous_expires_at_ms bigint, OUT o_block text)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  pending vcode_codes%ROWTYPE;
  has_pending boolean;
  blocked_until bigint;
BEGIN
  PERFORM vcode_lock('phone:' || p_destination);
  now_ms := vcode_now_ms();
  IF now_ms > p_not_after_ms THEN
    o_kind := -2;
    RETURN;
  END IF;
  SELECT * INTO pending FROM vcode_codes
    WHERE phone = p_destination AND purpose = p_purpose AND expires_at_ms > now_ms FOR UPDATE;
  has_pending := FOUND;
  IF has_pending THEN
    o_wait_ms := pending.sent_at_ms + p_cooldown_ms - now_ms;
    IF o_wait_ms > 0 THEN
      o_kind := 0;
      RETURN;
    END IF;
  END IF;
  o_wait_ms := vcode_quota_wait('sends:' || p_destination, now_ms, p_limits, p_windows);
  IF o_wait_ms > 0 THEN
    o_kind := -1;
    RETURN;
  END IF;
  IF p_prefix IS NOT NULL THEN
    SELECT row_to_json(b)::text, b.until_ms INTO o_block, blocked_until
      FROM vcode_fraud_blocks b WHERE b.prefix = p_prefix;
    IF p_enforce AND blocked_until > p_now THEN
      o_kind := -4;
      RETURN;
    END IF;
  END IF;
  PERFORM vcode_quota_record('sends:' || p_destination, now_ms, p_windows, p_token);
  o_sent_at_ms := now_ms;
  IF has_pending THEN
    o_previous_digest := pending.digest;
    o_previous_sealed := pending.sealed;
    o_previous_sent_at_ms := pending.sent_at_ms;
    o_previous_expires_at_ms := pending.expires_at_ms;
    o_deliveries := pending.deliveries + 1;
    IF p_rotate THEN
      o_kind := 3;
      o_digest := p_digest;
      o_sealed := p_sealed;
    ELSE
      o_kind := 2;
      o_digest := pending.digest;
      o_sealed := pending.sealed;
    END IF;
    UPDATE vcode_codes
      SET digest = o_digest, sealed = o_sealed, deliveries = o_deliveries,
          sent_at_ms = now_ms, expires_at_ms = now_ms + p_ttl_ms
      WHERE phone = p_destination AND purpose = p_purpose;
  ELSE
    -- An expired row the sweep has not reached yet is replaced.
    INSERT INTO vcode_codes
      (phone, purpose, digest, sealed, failed_attempts, deliveries, sent_at_ms, expires_at_ms)
      VALUES (p_destination, p_purpose, p_digest, p_sealed, 0, 1, now_ms, now_ms + p_ttl_ms)
      ON CONFLICT (phone, purpose) DO UPDATE
        SET digest = excluded.digest, sealed = excluded.sealed, failed_attempts = 0,
            deliveries = 1, sent_at_ms = excluded.sent_at_ms,
            expires_at_ms = excluded.expires_at_ms;
    o_kind := 1;
    o_digest := p_digest;
    o_deliveries := 1;
  END IF;
  INSERT INTO vcode_verifications
    (id, phone, purpose, digest, created_at_ms, verifies_until_ms, expires_at_ms)
    VALUES (p_verification, p_destination, p_purpose, o_digest, now_ms, now_ms + p_ttl_ms,
            now_ms + p_ttl_ms + p_retention_ms);
END $$;

-- The issue without the guard (vcode_issue_guarded's, with no prefix): one body for both.
CREATE OR REPLACE FUNCTION vcode_issue(
  p_destination text, p_purpose text, p_digest bytea, p_sealed bytea, p_ttl_ms bigint,
  p_cooldown_ms bigint, p_rotate boolean, p_token bigint, p_not_after_ms bigint,
  p_limits integer[], p_windows bigint[], p_verification text, p_retention_ms bigint,
  OUT o_kind integer, OUT o_wait_ms bigint, OUT o_digest bytea, OUT o_sealed bytea,
  OUT o_sent_at_ms bigint, OUT o_deliveries integer, OUT o_previous_digest bytea,
  OUT o_previous_sealed bytea, OUT o_previous_sent_at_ms bigint,
  OUT o_previous_expires_at_ms bigint)
LANGUAGE sql AS $$
  SELECT g.o_kind, g.o_wait_ms, g.o_digest, g.o_sealed, g.o_sent_at_ms, g.o_deliveries,
    g.o_previous_digest, g.o_previous_sealed, g.o_previous_sent_at_ms,
    g.o_previous_expires_at_ms
  FROM vcode_issue_guarded(p_destination, p_purpose, p_digest, p_sealed, p_ttl_ms,
    p_cooldown_ms, p_rotate, p_token, p_not_after_ms, p_limits, p_windows, p_verification,
    p_retention_ms, NULL::text, 0::bigint, false) g
$$;

-- undo_issue.lua's contract, as version 1's, plus: the send's verification goes (its id was
-- never handed out).
CREATE OR REPLACE FUNCTION vcode_undo_issue(
  p_destination text, p_purpose text, p_digest bytea, p_sent_at_ms bigint, p_deliveries integer,
  p_token bigint, p_previous_digest bytea, p_previous_sealed bytea,
  p_previous_sent_at_ms bigint, p_previous_expires_at_ms bigint, p_verification text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  pending vcode_codes%ROWTYPE;
BEGIN
  PERFORM vcode_lock('phone:' || p_destination);
  now_ms := vcode_now_ms();
  DELETE FROM vcode_quota_events WHERE log = 'sends:' || p_destination AND token = p_token;
  DELETE FROM vcode_verifications WHERE id = p_verification;
  SELECT * INTO pending FROM vcode_codes
    WHERE phone = p_destination AND purpose = p_purpose AND expires_at_ms > now_ms FOR UPDATE;
  IF NOT FOUND OR pending.digest <> p_digest OR pending.sent_at_ms <> p_sent_at_ms
      OR pending.deliveries <> p_deliveries THEN
    RETURN false;
  END IF;
  IF p_previous_digest IS NULL OR p_previous_expires_at_ms <= now_ms THEN
    DELETE FROM vcode_codes WHERE phone = p_destination AND purpose = p_purpose;
  ELSE
    UPDATE vcode_codes
      SET digest = p_previous_digest, sealed = p_previous_sealed,
          sent_at_ms = p_previous_sent_at_ms, expires_at_ms = p_previous_expires_at_ms,
          deliveries = deliveries - 1
      WHERE phone = p_destination AND purpose = p_purpose;
  END IF;
  RETURN true;
END $$;

-- verify.lua's contract (0001's, same signature and answer).
CREATE OR REPLACE FUNCTION vcode_verify(
  p_destination text, p_purpose text, p_client text, p_candidates bytea[], p_max_attempts integer,
  p_token bigint, p_phone_limits integer[], p_phone_windows bigint[],
  p_client_limits integer[], p_client_windows bigint[],
  OUT o_outcome integer, OUT o_value bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  phone_log text := 'fails:' || p_destination;
  client_log text := 'fails:' || p_destination || ':' || p_client;
  pending vcode_codes%ROWTYPE;
  latest vcode_verifications%ROWTYPE;
  failed integer;
BEGIN
  PERFORM vcode_lock('phone:' || p_destination);
  now_ms := vcode_now_ms();
  o_value := greatest(vcode_quota_wait(phone_log, now_ms, p_phone_limits, p_phone_windows),
                      vcode_quota_wait(client_log, now_ms, p_client_limits, p_client_windows));
  IF o_value > 0 THEN
    o_outcome := -3;
    RETURN;
  END IF;
  SELECT * INTO pending FROM vcode_codes
    WHERE phone = p_destination AND purpose = p_purpose AND expires_at_ms > now_ms FOR UPDATE;
  IF NOT FOUND THEN
    o_outcome := -1;
    RETURN;
  END IF;
  SELECT * INTO latest FROM vcode_verifications
    WHERE phone = p_destination AND purpose = p_purpose AND digest = pending.digest
      AND expires_at_ms > now_ms
    ORDER BY created_at_ms DESC, id DESC LIMIT 1 FOR UPDATE;
  IF FOUND AND latest.ended IS NOT NULL THEN
    latest.id := NULL;
  END IF;
  IF pending.digest = ANY (p_candidates) THEN
    DELETE FROM vcode_codes WHERE phone = p_destination AND purpose = p_purpose;
    UPDATE vcode_verifications SET ended = 'approved' WHERE id = latest.id;
    o_outcome := 1;
    RETURN;
  END IF;
  PERFORM vcode_quota_record(phone_log, now_ms, p_phone_windows, p_token);
  PERFORM vcode_quota_record(client_log, now_ms, p_client_windows, p_token);
  UPDATE vcode_codes SET failed_attempts = failed_attempts + 1
    WHERE phone = p_destination AND purpose = p_purpose
    RETURNING failed_attempts INTO failed;
  UPDATE vcode_verifications
    SET failed_attempts = greatest(failed, failed_attempts + 1),
        ended = CASE WHEN failed >= p_max_attempts THEN 'max_attempts_reached' END
    WHERE id = latest.id;
  IF failed >= p_max_attempts THEN
    DELETE FROM vcode_codes WHERE phone = p_destination AND purpose = p_purpose;
    o_outcome := -2;
    RETURN;
  END IF;
  o_outcome := 0;
  o_value := p_max_attempts - failed;
END $$;

-- reserve_quota.lua's contract: log i has p_rule_counts[i] rules, taken in order from p_limits
-- and p_windows. o_refused: 0 recorded, -1 run after p_not_after_ms (nothing recorded), else
-- the first log (1-based) without room, and o_wait_ms until every log has room.
CREATE OR REPLACE FUNCTION vcode_reserve_quota(
  p_logs text[], p_rule_counts integer[], p_limits integer[], p_windows bigint[],
  p_token bigint, p_not_after_ms bigint, OUT o_refused integer, OUT o_wait_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  name text;
  first integer;
  budget_wait bigint;
BEGIN
  -- One lock per log, in one order everywhere: no deadlock between overlapping budgets.
  FOR name IN SELECT DISTINCT l FROM unnest(p_logs) AS l ORDER BY l LOOP
    PERFORM vcode_lock('quota:' || name);
  END LOOP;
  now_ms := vcode_now_ms();
  o_refused := 0;
  o_wait_ms := 0;
  IF now_ms > p_not_after_ms THEN
    o_refused := -1;
    RETURN;
  END IF;
  first := 1;
  FOR i IN 1 .. coalesce(array_length(p_logs, 1), 0) LOOP
    budget_wait := vcode_quota_wait(p_logs[i], now_ms,
      p_limits[first : first + p_rule_counts[i] - 1],
      p_windows[first : first + p_rule_counts[i] - 1]);
    IF budget_wait > 0 THEN
      IF o_refused = 0 THEN
        o_refused := i;
      END IF;
      o_wait_ms := greatest(o_wait_ms, budget_wait);
    END IF;
    first := first + p_rule_counts[i];
  END LOOP;
  IF o_refused > 0 THEN
    RETURN;
  END IF;
  first := 1;
  FOR i IN 1 .. coalesce(array_length(p_logs, 1), 0) LOOP
    PERFORM vcode_quota_record(p_logs[i], now_ms,
      p_windows[first : first + p_rule_counts[i] - 1], p_token);
    first := first + p_rule_counts[i];
  END LOOP;
END $$;

-- Claims p_key (returns null) or returns the unexpired record that holds it.
CREATE OR REPLACE FUNCTION vcode_begin_idempotent(p_key text, p_running bytea, p_lease_ms bigint)
RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := vcode_now_ms();
  held bytea;
BEGIN
  INSERT INTO vcode_idempotency AS i (key, record, expires_at_ms)
    VALUES (p_key, p_running, now_ms + p_lease_ms)
    ON CONFLICT (key) DO UPDATE
      SET record = excluded.record, expires_at_ms = excluded.expires_at_ms
      WHERE i.expires_at_ms <= now_ms;
  IF FOUND THEN
    RETURN NULL;
  END IF;
  -- The conflicting row is locked by this transaction since the INSERT.
  SELECT record INTO held FROM vcode_idempotency WHERE key = p_key;
  RETURN held;
END $$;

-- Dev mode: keeps a message in the destination's dev inbox, the newest p_capacity, for p_ttl_ms.
CREATE OR REPLACE FUNCTION vcode_keep_dev_message(p_destination text, p_message text, p_capacity integer, p_ttl_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  expires bigint := vcode_now_ms() + p_ttl_ms;
BEGIN
  PERFORM vcode_lock('outbox:' || p_destination);
  INSERT INTO vcode_dev_inbox (phone, message, expires_at_ms) VALUES (p_destination, p_message, expires);
  UPDATE vcode_dev_inbox SET expires_at_ms = expires WHERE phone = p_destination;
  DELETE FROM vcode_dev_inbox WHERE phone = p_destination AND id <= (
    SELECT id FROM vcode_dev_inbox WHERE phone = p_destination ORDER BY id DESC OFFSET p_capacity LIMIT 1);
END $$;

-- verify_id.lua's contract. o_outcome: 1 verified, 0 wrong (o_value attempts left), -1 the
-- id's code is no longer pending (or the id expired or was approved), -2 the id is spent, -3 a
-- failure quota is used up (o_value ms; nothing compared), -4 canceled.
CREATE OR REPLACE FUNCTION vcode_verify_by_id(
  p_destination text, p_purpose text, p_verification text, p_client text, p_candidates bytea[],
  p_max_attempts integer, p_token bigint, p_phone_limits integer[], p_phone_windows bigint[],
  p_client_limits integer[], p_client_windows bigint[],
  OUT o_outcome integer, OUT o_value bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  phone_log text := 'fails:' || p_destination;
  client_log text := 'fails:' || p_destination || ':' || p_client;
  verification vcode_verifications%ROWTYPE;
  failed integer;
BEGIN
  PERFORM vcode_lock('phone:' || p_destination);
  now_ms := vcode_now_ms();
  SELECT * INTO verification FROM vcode_verifications
    WHERE id = p_verification AND phone = p_destination AND purpose = p_purpose
      AND expires_at_ms > now_ms FOR UPDATE;
  IF NOT FOUND THEN
    o_outcome := -1;
    RETURN;
  ELSIF verification.ended = 'canceled' THEN
    o_outcome := -4;
    RETURN;
  ELSIF verification.ended = 'max_attempts_reached' THEN
    o_outcome := -2;
    RETURN;
  ELSIF verification.ended IS NOT NULL OR verification.verifies_until_ms <= now_ms THEN
    o_outcome := -1;
    RETURN;
  END IF;
  o_value := greatest(vcode_quota_wait(phone_log, now_ms, p_phone_limits, p_phone_windows),
                      vcode_quota_wait(client_log, now_ms, p_client_limits, p_client_windows));
  IF o_value > 0 THEN
    o_outcome := -3;
    RETURN;
  END IF;
  PERFORM 1 FROM vcode_codes
    WHERE phone = p_destination AND purpose = p_purpose AND expires_at_ms > now_ms
      AND digest = verification.digest FOR UPDATE;
  IF NOT FOUND THEN
    o_outcome := -1;
    RETURN;
  END IF;
  IF verification.digest = ANY (p_candidates) THEN
    DELETE FROM vcode_codes WHERE phone = p_destination AND purpose = p_purpose;
    UPDATE vcode_verifications SET ended = 'approved' WHERE id = p_verification;
    o_outcome := 1;
    RETURN;
  END IF;
  PERFORM vcode_quota_record(phone_log, now_ms, p_phone_windows, p_token);
  PERFORM vcode_quota_record(client_log, now_ms, p_client_windows, p_token);
  UPDATE vcode_verifications SET failed_attempts = failed_attempts + 1
    WHERE id = p_verification
    RETURNING failed_attempts INTO failed;
  IF failed >= p_max_attempts THEN
    UPDATE vcode_verifications SET ended = 'max_attempts_reached' WHERE id = p_verification;
    o_outcome := -2;
    RETURN;
  END IF;
  o_outcome := 0;
  o_value := p_max_attempts - failed;
END $$;

-- verification.lua's contract: the verification (no row when unknown) with its status worked
-- out against the pending code; p_cancel cancels it first while it is pending.
CREATE OR REPLACE FUNCTION vcode_verification(p_verification text, p_cancel boolean,
  OUT o_phone text, OUT o_purpose text, OUT o_status text, OUT o_unconfirmed boolean,
  OUT o_failed_attempts integer, OUT o_created_at_ms bigint, OUT o_verifies_until_ms bigint)
RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  verification vcode_verifications%ROWTYPE;
  live boolean;
BEGIN
  SELECT phone INTO o_phone FROM vcode_verifications WHERE id = p_verification;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  PERFORM vcode_lock('phone:' || o_phone);
  now_ms := vcode_now_ms();
  SELECT * INTO verification FROM vcode_verifications
    WHERE id = p_verification AND expires_at_ms > now_ms FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  live := verification.ended IS NULL AND verification.verifies_until_ms > now_ms
    AND EXISTS (SELECT 1 FROM vcode_codes
                WHERE phone = verification.phone AND purpose = verification.purpose
                  AND expires_at_ms > now_ms AND digest = verification.digest);
  IF p_cancel AND live THEN
    UPDATE vcode_verifications SET ended = 'canceled' WHERE id = p_verification;
    verification.ended := 'canceled';
  END IF;
  o_purpose := verification.purpose;
  o_status := coalesce(verification.ended, CASE WHEN live THEN 'pending' ELSE 'expired' END);
  o_unconfirmed := verification.unconfirmed;
  o_failed_attempts := verification.failed_attempts;
  o_created_at_ms := verification.created_at_ms;
  o_verifies_until_ms := verification.verifies_until_ms;
  RETURN NEXT;
END $$;

-- fraud_block.lua's contract: recorded unless an active block stands.
CREATE OR REPLACE FUNCTION vcode_fraud_block(
  p_prefix text, p_country text, p_reason text, p_since bigint, p_until bigint,
  p_strikes integer, p_struck bigint, p_sends bigint, p_conversions bigint, p_lifted bigint,
  p_now bigint, p_evidence text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM vcode_lock('fraud:' || p_prefix);
  INSERT INTO vcode_fraud_blocks AS b (prefix, country, reason, since_ms, until_ms, strikes,
      struck_ms, sends, conversions, lifted_ms, evidence)
    VALUES (p_prefix, p_country, p_reason, p_since, p_until, p_strikes, p_struck, p_sends,
      p_conversions, p_lifted, p_evidence)
    ON CONFLICT (prefix) DO UPDATE
      SET country = excluded.country, reason = excluded.reason, since_ms = excluded.since_ms,
          until_ms = excluded.until_ms, strikes = excluded.strikes,
          struck_ms = excluded.struck_ms, sends = excluded.sends,
          conversions = excluded.conversions, lifted_ms = excluded.lifted_ms,
          evidence = excluded.evidence
      WHERE b.until_ms <= p_now;
  RETURN FOUND;
END $$;

-- vcode_fact_append: the event outbox's one writer. Steps record facts (crate::store::Fact's
-- words: `created`, `ended=approved`, `delivery=undelivered`…), never event types: the events
-- module makes the event (crate::events::event_of).
CREATE OR REPLACE FUNCTION vcode_fact_append(p_fact text, p_subject text, p_destination text, p_purpose text,
  p_at bigint, p_order bigint, p_detail text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO vcode_event_outbox (fact, subject, phone, purpose, at_ms, order_ms, detail, due_ms)
    VALUES (p_fact, p_subject, p_destination, p_purpose, p_at, p_order, p_detail, p_order);
END $$;

-- A verification's life: created (with its expiry timer), each wrong code, its end. A row
-- deleted before its time is a send rolled back (its id never handed out): its events go too;
-- the sweep deletes rows only after their time, and leaves the outbox alone.
CREATE OR REPLACE FUNCTION vcode_verification_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := vcode_now_ms();
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM vcode_fact_append('created', NEW.id, NEW.phone, NEW.purpose,
      NEW.created_at_ms, NEW.created_at_ms, 'expires_at_ms=' || NEW.verifies_until_ms);
    PERFORM vcode_fact_append('expiry_due', NEW.id, NEW.phone, NEW.purpose,
      NEW.created_at_ms, NEW.verifies_until_ms, '');
    RETURN NEW;
  ELSIF TG_OP = 'DELETE' THEN
    IF OLD.expires_at_ms > now_ms THEN
      DELETE FROM vcode_event_outbox WHERE subject = OLD.id AND failed_at_ms IS NULL;
    END IF;
    RETURN OLD;
  END IF;
  IF NEW.failed_attempts > OLD.failed_attempts THEN
    PERFORM vcode_fact_append('attempt_failed', NEW.id, NEW.phone, NEW.purpose,
      now_ms, now_ms, 'attempts=' || NEW.failed_attempts);
  END IF;
  IF NEW.ended IS DISTINCT FROM OLD.ended AND NEW.ended IS NOT NULL THEN
    PERFORM vcode_fact_append('ended=' || NEW.ended, NEW.id, NEW.phone, NEW.purpose,
      now_ms, now_ms, CASE WHEN NEW.ended = 'max_attempts_reached'
        THEN 'attempts=' || NEW.failed_attempts ELSE '' END);
  END IF;
  RETURN NEW;
END $$;

-- A prefix block: a new suspension (or hold), or an operator's lift.
CREATE OR REPLACE FUNCTION vcode_block_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := vcode_now_ms();
  detail text := 'country=' || NEW.country || ';reason=' || NEW.reason || ';until_ms='
    || NEW.until_ms || ';strikes=' || NEW.strikes;
BEGIN
  IF TG_OP = 'INSERT' OR NEW.since_ms IS DISTINCT FROM OLD.since_ms THEN
    PERFORM vcode_fact_append('prefix_blocked', 'prefix:' || NEW.prefix, '', '', now_ms,
      now_ms, detail);
  ELSIF NEW.lifted_ms IS DISTINCT FROM OLD.lifted_ms THEN
    PERFORM vcode_fact_append('prefix_lifted', 'prefix:' || NEW.prefix, '', '', now_ms,
      now_ms, detail);
  END IF;
  RETURN NEW;
END $$;

-- Turns the event triggers on (once: an enabled trigger is left alone, so instances starting
-- later take no lock on the tables). Turning them off is the operator's (ALTER TABLE ... DISABLE
-- TRIGGER): other instances may deliver what this one's writes.
CREATE OR REPLACE FUNCTION vcode_events_record() RETURNS void LANGUAGE plpgsql AS $$
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
CREATE OR REPLACE FUNCTION vcode_events_claim(p_limit integer, p_window integer, p_lease_ms bigint)
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

-- receipt.lua's contract. o_outcome: 0 unknown message or forgotten verification (no other
-- column), 1 nothing changed, 2 changed (o_previous the delivery it had).
CREATE OR REPLACE FUNCTION vcode_receipt(p_provider text, p_message_id text, p_delivery text,
  p_error text,
  OUT o_outcome integer, OUT o_verification text, OUT o_phone text, OUT o_purpose text,
  OUT o_previous text, OUT o_created_at_ms bigint, OUT o_now_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  verification vcode_verifications%ROWTYPE;
  message_country text;
  counted_hour bigint;
  rank_of jsonb := '{"unconfirmed": 0, "sent": 1, "delivered": 2, "undelivered": 2}';
BEGIN
  o_now_ms := vcode_now_ms();
  o_outcome := 0;
  SELECT v.* INTO verification FROM vcode_messages m
    JOIN vcode_verifications v ON v.id = m.verification
    WHERE m.provider = p_provider AND m.message_id = p_message_id
      AND m.expires_at_ms > o_now_ms AND v.expires_at_ms > o_now_ms
    FOR UPDATE OF v;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  -- (A row variable cannot share an INTO list.)
  SELECT m.country INTO message_country FROM vcode_messages m
    WHERE m.provider = p_provider AND m.message_id = p_message_id;
  o_verification := verification.id;
  o_phone := verification.phone;
  o_purpose := verification.purpose;
  o_created_at_ms := verification.created_at_ms;
  o_previous := coalesce(verification.delivery,
                         CASE WHEN verification.unconfirmed THEN 'unconfirmed' ELSE 'sent' END);
  IF (rank_of ->> p_delivery)::integer <= (rank_of ->> o_previous)::integer THEN
    o_outcome := 1;
    RETURN;
  END IF;
  UPDATE vcode_verifications SET delivery = p_delivery, delivery_error = p_error
    WHERE id = verification.id;
  o_outcome := 2;
  IF p_delivery IN ('delivered', 'undelivered') THEN
    counted_hour := o_now_ms / 3600000;
    INSERT INTO vcode_delivery_counts AS c
        (hour, provider, country, delivered, undelivered, expires_at_ms)
      VALUES (counted_hour, p_provider, message_country,
        CASE WHEN p_delivery = 'delivered' THEN 1 ELSE 0 END,
        CASE WHEN p_delivery = 'undelivered' THEN 1 ELSE 0 END,
        (counted_hour + 8 * 24 + 24) * 3600000)
      ON CONFLICT (hour, provider, country) DO UPDATE
      SET delivered = c.delivered + excluded.delivered,
          undelivered = c.undelivered + excluded.undelivered;
  END IF;
  -- The detail as Receipt::fact spells it.
  IF p_delivery IN ('delivered', 'undelivered') AND EXISTS (
      SELECT 1 FROM pg_trigger WHERE tgrelid = 'vcode_verifications'::regclass
        AND tgname = 'vcode_verification_events' AND tgenabled <> 'D') THEN
    PERFORM vcode_fact_append('delivery=' || p_delivery, verification.id,
      verification.phone, verification.purpose, o_now_ms, o_now_ms,
      'provider=' || p_provider || ';message_id=' || p_message_id
        || CASE WHEN p_delivery = 'undelivered' AND p_error IS NOT NULL
             THEN ';error_code=' || p_error ELSE '' END);
  END IF;
END $$;

-- The shard of a level record: the low bits of a random token the caller claims (shards.rs).
CREATE OR REPLACE FUNCTION vcode_fraud_shard(p_token bigint) RETURNS smallint LANGUAGE sql IMMUTABLE AS
$$ SELECT (p_token & 15)::smallint $$;

-- The fraud guard's levels (migration 15): decays each of p_scopes' rows in the token's shard
-- to p_now, adds the event (p_ds sends, p_dc conversions, p_du undelivered), and answers each
-- scope's counts over all its shards, decayed to p_now, in the order of p_scopes. The counts are
-- read before the event and answered with it added (decay is linear), so that the row's life
-- follows the scope's history, not the shard's: p_young_ttl while it holds fewer than
-- p_young_sends sends, else p_ttl; a scope that grows out of that also keeps its other shards'
-- rows for p_ttl (those another call holds now are skipped: it writes them). Rows are taken in
-- the scopes' sorted order, the one order every call takes them in. A conversion also
-- remembers its destination as returning (p_returning, until p_returning_until; 0: none).
-- p_recent false: the change reaches the history alone (a refused send taken back: negative,
-- so a shard's row may hold less than nothing; the scope's sum, answered, never does).
-- A row's expiry moves only once a third of its life has passed (or its life shrinks), as
-- Redis sets a record's again (levels_prelude.lua): it lives two thirds to all of its life
-- after its last change. Most updates then change no indexed column, so PostgreSQL makes them
-- heap-only (HOT, with the room migration 19 leaves in each page): no new entry in either
-- index and no dead one to skip, where every update added one to both (postgres's
-- instructions a send, 1,000 sends to new numbers of one prefix: 2.56 million before, 2.46
-- million after; the five scopes' new rows are inserted either way; callgrind, 2026-12-06).
-- Each scope's rows are read by its key (a LATERAL aggregate) in one generic plan: as a join,
-- a generic plan made while the table was small hashed the whole table on every later call,
-- and custom plans cost a planning a call (a generic plan does not know the array's length).
-- postgres's instructions, same run: 2.40 -> 1.59 million a send, 4.60 -> 1.48 million a
-- verified code (1,000 of each; callgrind, 2026-12-06).
DROP FUNCTION IF EXISTS vcode_levels_count(text[], bigint, bigint, double precision,
  double precision, double precision, double precision, double precision, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS vcode_levels_count(text[], bigint, bigint, double precision,
  double precision, double precision, double precision, double precision, bigint, bigint,
  double precision, bigint, bigint);
CREATE OR REPLACE FUNCTION vcode_levels_count(p_scopes text[], p_token bigint, p_now bigint,
  p_recent_half double precision, p_history_half double precision, p_ds double precision,
  p_dc double precision, p_du double precision, p_ttl bigint, p_young_ttl bigint,
  p_young_sends double precision, p_returning bigint, p_returning_until bigint,
  p_recent boolean)
RETURNS TABLE (ord integer, rs double precision, rc double precision, ru double precision,
  hs double precision, hc double precision, hu double precision)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_shard smallint := vcode_fraud_shard(p_token);
  v_rds double precision := CASE WHEN p_recent THEN p_ds ELSE 0 END;
  v_rdc double precision := CASE WHEN p_recent THEN p_dc ELSE 0 END;
  v_rdu double precision := CASE WHEN p_recent THEN p_du ELSE 0 END;
BEGIN
  IF p_returning_until > 0 THEN
    INSERT INTO vcode_fraud_returning AS r (digest, expires_at_ms)
      VALUES (p_returning, p_returning_until)
      ON CONFLICT (digest) DO UPDATE SET expires_at_ms = greatest(r.expires_at_ms, excluded.expires_at_ms);
  END IF;
  RETURN QUERY
    WITH kept AS (
      -- Each scope's rows by its key (LATERAL: one index lookup a scope, whatever the planner
      -- guesses of the table; a join let a generic plan hash the whole table instead).
      SELECT q.ord, q.scope, s.rs, s.rc, s.ru, s.hs, s.hc, s.hu
      FROM unnest(p_scopes) WITH ORDINALITY AS q(scope, ord)
      CROSS JOIN LATERAL (
        SELECT
          coalesce(sum(l.rs * power(2, -greatest(p_now - l.t_ms, 0) / p_recent_half)), 0) AS rs,
          coalesce(sum(l.rc * power(2, -greatest(p_now - l.t_ms, 0) / p_recent_half)), 0) AS rc,
          coalesce(sum(l.ru * power(2, -greatest(p_now - l.t_ms, 0) / p_recent_half)), 0) AS ru,
          coalesce(sum(l.hs * power(2, -greatest(p_now - l.t_ms, 0) / p_history_half)), 0) AS hs,
          coalesce(sum(l.hc * power(2, -greatest(p_now - l.t_ms, 0) / p_history_half)), 0) AS hc,
          coalesce(sum(l.hu * power(2, -greatest(p_now - l.t_ms, 0) / p_history_half)), 0) AS hu
        FROM vcode_fraud_levels l WHERE l.scope = q.scope AND l.expires_at_ms > p_now) s
    ), written AS (
      INSERT INTO vcode_fraud_levels AS l (scope, shard, t_ms, rs, rc, ru, hs, hc, hu, expires_at_ms)
        SELECT k.scope, v_shard, p_now, v_rds, v_rdc, v_rdu, p_ds, p_dc, p_du,
          p_now + CASE WHEN k.hs + p_ds < p_young_sends THEN p_young_ttl ELSE p_ttl END
        FROM kept k ORDER BY k.scope
        ON CONFLICT (scope, shard) DO UPDATE SET
          -- A row past its time starts afresh, as an expired Redis key.
          t_ms = greatest(l.t_ms, p_now),
          rs = CASE WHEN l.expires_at_ms <= p_now THEN 0 ELSE l.rs * power(2, -greatest(p_now - l.t_ms, 0) / p_recent_half) END + v_rds,
          rc = CASE WHEN l.expires_at_ms <= p_now THEN 0 ELSE l.rc * power(2, -greatest(p_now - l.t_ms, 0) / p_recent_half) END + v_rdc,
          ru = CASE WHEN l.expires_at_ms <= p_now THEN 0 ELSE l.ru * power(2, -greatest(p_now - l.t_ms, 0) / p_recent_half) END + v_rdu,
          hs = CASE WHEN l.expires_at_ms <= p_now THEN 0 ELSE l.hs * power(2, -greatest(p_now - l.t_ms, 0) / p_history_half) END + p_ds,
          hc = CASE WHEN l.expires_at_ms <= p_now THEN 0 ELSE l.hc * power(2, -greatest(p_now - l.t_ms, 0) / p_history_half) END + p_dc,
          hu = CASE WHEN l.expires_at_ms <= p_now THEN 0 ELSE l.hu * power(2, -greatest(p_now - l.t_ms, 0) / p_history_half) END + p_du,
          expires_at_ms = CASE
            WHEN l.expires_at_ms - p_now BETWEEN (excluded.expires_at_ms - p_now) * 2 / 3
              AND excluded.expires_at_ms - p_now THEN l.expires_at_ms
            ELSE excluded.expires_at_ms END
    ), matured AS (
      UPDATE vcode_fraud_levels l SET expires_at_ms = p_now + p_ttl
        WHERE (l.scope, l.shard) IN (
          SELECT o.scope, o.shard FROM vcode_fraud_levels o JOIN kept k ON o.scope = k.scope
          WHERE k.hs < p_young_sends AND k.hs + p_ds >= p_young_sends
            AND o.shard <> v_shard AND o.expires_at_ms > p_now
          ORDER BY o.scope, o.shard
          FOR UPDATE OF o SKIP LOCKED)
    )
    SELECT k.ord::integer, greatest(k.rs + v_rds, 0), greatest(k.rc + v_rdc, 0),
      greatest(k.ru + v_rdu, 0), greatest(k.hs + p_ds, 0), greatest(k.hc + p_dc, 0),
      greatest(k.hu + p_du, 0)
    FROM kept k ORDER BY k.ord;
END $$;

-- The issue, the guard's step and the send's levels in one statement (issue 39): what
-- vcode_issue_guarded does, then, for a send the guard admitted, vcode_levels_count of p_scopes
-- (a send) in the shard p_send_token names. o_levels: each scope's counts after the send, six a
-- scope (recent sends, conversions, undelivered, then the history's), in the order of p_scopes;
-- none when nothing was counted. One transaction where there were two, each with its own commit.
CREATE OR REPLACE FUNCTION vcode_issue_guarded_levels(
  p_destination text, p_purpose text, p_digest bytea, p_sealed bytea, p_ttl_ms bigint,
  p_cooldown_ms bigint, p_rotate boolean, p_token bigint, p_not_after_ms bigint,
  p_limits integer[], p_windows bigint[], p_verification text, p_retention_ms bigint,
  p_prefix text, p_now bigint, p_enforce boolean, p_send_token bigint,
  p_scopes text[], p_recent_half double precision, p_history_half double precision,
  p_level_ttl bigint, p_young_ttl bigint, p_young_sends double precision,
  OUT o_kind integer, OUT o_wait_ms bigint, OUT o_digest bytea, OUT o_sealed bytea,
  OUT o_sent_at_ms bigint, OUT o_deliveries integer, OUT o_previous_digest bytea,
  OUT o_previous_sealed bytea, OUT o_previous_sent_at_ms bigint,
  OUT o_previous_expires_at_ms bigint, OUT o_block text, OUT o_levels double precision[])
LANGUAGE plpgsql AS $$
DECLARE
  counted record;
BEGIN
  SELECT * INTO o_kind, o_wait_ms, o_digest, o_sealed, o_sent_at_ms, o_deliveries,
      o_previous_digest, o_previous_sealed, o_previous_sent_at_ms, o_previous_expires_at_ms,
      o_block
    FROM vcode_issue_guarded(p_destination, p_purpose, p_digest, p_sealed, p_ttl_ms,
      p_cooldown_ms, p_rotate, p_token, p_not_after_ms, p_limits, p_windows, p_verification,
      p_retention_ms, p_prefix, p_now, p_enforce);
  -- Only a send the guard admitted counts in its levels (as the guard's own call would).
  IF o_kind < 1 THEN
    RETURN;
  END IF;
  o_levels := '{}';
  FOR counted IN
    SELECT * FROM vcode_levels_count(p_scopes, p_send_token, p_now, p_recent_half,
      p_history_half, 1, 0, 0, p_level_ttl, p_young_ttl, p_young_sends, 0, 0, true)
  LOOP
    o_levels := o_levels || ARRAY[counted.rs, counted.rc, counted.ru, counted.hs, counted.hc,
      counted.hu];
  END LOOP;
END $$;
