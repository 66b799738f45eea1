-- vcode's PostgreSQL store, version 1: one table per role and one function per operation that
-- reads, compares and writes, so that each is one transaction and one round trip. Times are
-- unix milliseconds from the database's clock (vcode_now_ms); a row whose expires_at_ms has
-- passed is treated as absent by every read and deleted later by the sweep (vcode_sweep).
-- Per-phone operations (issue, undo, verify) serialise on an advisory lock named after the
-- phone, which also covers rows that do not exist yet (a first send) and the phone's quota logs;
-- they lock the code's row too, so the sweep never deletes a row one of them is renewing.

CREATE FUNCTION vcode_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

CREATE FUNCTION vcode_lock(p_name text) RETURNS void LANGUAGE sql VOLATILE AS
$$ SELECT pg_advisory_xact_lock(hashtextextended(p_name, 0)) $$;

-- Pending codes: the keyed digest and (resend policy `reuse`) the sealed code; never the code.
CREATE TABLE vcode_codes (
  phone text NOT NULL,
  purpose text NOT NULL,
  digest bytea NOT NULL,
  sealed bytea,
  failed_attempts integer NOT NULL DEFAULT 0,
  deliveries integer NOT NULL,
  sent_at_ms bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (phone, purpose)
);
CREATE INDEX vcode_codes_expiry ON vcode_codes (expires_at_ms);

-- Sliding-window quota logs: one row per event. `log` names the log ('sends:<phone>',
-- 'fails:<phone>', 'fails:<phone>:<client>', 'ip:<client>', 'captcha:<client>', 'global').
CREATE TABLE vcode_quota_events (
  log text NOT NULL,
  token bigint NOT NULL,
  at_ms bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (log, token)
);
CREATE INDEX vcode_quota_events_time ON vcode_quota_events (log, at_ms);
CREATE INDEX vcode_quota_events_expiry ON vcode_quota_events (expires_at_ms);

CREATE TABLE vcode_captchas (
  id text PRIMARY KEY,
  seed bigint NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_captchas_expiry ON vcode_captchas (expires_at_ms);

CREATE TABLE vcode_idempotency (
  key text PRIMARY KEY,
  record bytea NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_idempotency_expiry ON vcode_idempotency (expires_at_ms);

CREATE TABLE vcode_pow_replays (
  digest text PRIMARY KEY,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_pow_replays_expiry ON vcode_pow_replays (expires_at_ms);

CREATE TABLE vcode_stats (
  day text NOT NULL,
  field text NOT NULL,
  count bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (day, field)
);
CREATE INDEX vcode_stats_expiry ON vcode_stats (expires_at_ms);

-- Dev mode only.
CREATE TABLE vcode_outbox (
  id bigserial PRIMARY KEY,
  phone text NOT NULL,
  message text NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_outbox_phone ON vcode_outbox (phone, id);
CREATE INDEX vcode_outbox_expiry ON vcode_outbox (expires_at_ms);

-- 0 if every rule (p_limits[i] events in p_windows[i] ms) has room for one more event at
-- p_now, else the ms until each has.
CREATE FUNCTION vcode_quota_wait(p_log text, p_now bigint, p_limits integer[], p_windows bigint[])
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
CREATE FUNCTION vcode_quota_record(p_log text, p_now bigint, p_windows bigint[], p_token bigint)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO vcode_quota_events (log, token, at_ms, expires_at_ms)
  SELECT p_log, p_token, p_now, p_now + max(w) FROM unnest(p_windows) AS w HAVING max(w) > 0
  ON CONFLICT (log, token) DO UPDATE
    SET at_ms = excluded.at_ms, expires_at_ms = excluded.expires_at_ms
$$;

-- issue.lua's contract. o_kind: -2 run after p_not_after_ms (nothing written), 0 cooldown and
-- -1 over quota (o_wait_ms), 1 created, 2 redelivered, 3 rotated.
CREATE FUNCTION vcode_issue(
  p_phone text, p_purpose text, p_digest bytea, p_sealed bytea, p_ttl_ms bigint,
  p_cooldown_ms bigint, p_rotate boolean, p_token bigint, p_not_after_ms bigint,
  p_limits integer[], p_windows bigint[],
  OUT o_kind integer, OUT o_wait_ms bigint, OUT o_digest bytea, OUT o_sealed bytea,
  OUT o_sent_at_ms bigint, OUT o_deliveries integer, OUT o_previous_digest bytea,
  OUT o_previous_sealed bytea, OUT o_previous_sent_at_ms bigint,
  OUT o_previous_expires_at_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  pending vcode_codes%ROWTYPE;
  has_pending boolean;
BEGIN
  PERFORM vcode_lock('phone:' || p_phone);
  now_ms := vcode_now_ms();
  IF now_ms > p_not_after_ms THEN
    o_kind := -2;
    RETURN;
  END IF;
  SELECT * INTO pending FROM vcode_codes
    WHERE phone = p_phone AND purpose = p_purpose AND expires_at_ms > now_ms FOR UPDATE;
  has_pending := FOUND;
  IF has_pending THEN
    o_wait_ms := pending.sent_at_ms + p_cooldown_ms - now_ms;
    IF o_wait_ms > 0 THEN
      o_kind := 0;
      RETURN;
    END IF;
  END IF;
  o_wait_ms := vcode_quota_wait('sends:' || p_phone, now_ms, p_limits, p_windows);
  IF o_wait_ms > 0 THEN
    o_kind := -1;
    RETURN;
  END IF;
  PERFORM vcode_quota_record('sends:' || p_phone, now_ms, p_windows, p_token);
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
      WHERE phone = p_phone AND purpose = p_purpose;
    RETURN;
  END IF;
  -- An expired row the sweep has not reached yet is replaced.
  INSERT INTO vcode_codes
    (phone, purpose, digest, sealed, failed_attempts, deliveries, sent_at_ms, expires_at_ms)
    VALUES (p_phone, p_purpose, p_digest, p_sealed, 0, 1, now_ms, now_ms + p_ttl_ms)
    ON CONFLICT (phone, purpose) DO UPDATE
      SET digest = excluded.digest, sealed = excluded.sealed, failed_attempts = 0,
          deliveries = 1, sent_at_ms = excluded.sent_at_ms,
          expires_at_ms = excluded.expires_at_ms;
  o_kind := 1;
  o_digest := p_digest;
  o_deliveries := 1;
END $$;

-- undo_issue.lua's contract: the quota event always leaves; the code is rolled back only while
-- it is exactly what the issue wrote. p_previous_digest is null when the issue created it.
CREATE FUNCTION vcode_undo_issue(
  p_phone text, p_purpose text, p_digest bytea, p_sent_at_ms bigint, p_deliveries integer,
  p_token bigint, p_previous_digest bytea, p_previous_sealed bytea,
  p_previous_sent_at_ms bigint, p_previous_expires_at_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  pending vcode_codes%ROWTYPE;
BEGIN
  PERFORM vcode_lock('phone:' || p_phone);
  now_ms := vcode_now_ms();
  DELETE FROM vcode_quota_events WHERE log = 'sends:' || p_phone AND token = p_token;
  SELECT * INTO pending FROM vcode_codes
    WHERE phone = p_phone AND purpose = p_purpose AND expires_at_ms > now_ms FOR UPDATE;
  IF NOT FOUND OR pending.digest <> p_digest OR pending.sent_at_ms <> p_sent_at_ms
      OR pending.deliveries <> p_deliveries THEN
    RETURN false;
  END IF;
  IF p_previous_digest IS NULL OR p_previous_expires_at_ms <= now_ms THEN
    DELETE FROM vcode_codes WHERE phone = p_phone AND purpose = p_purpose;
  ELSE
    UPDATE vcode_codes
      SET digest = p_previous_digest, sealed = p_previous_sealed,
          sent_at_ms = p_previous_sent_at_ms, expires_at_ms = p_previous_expires_at_ms,
          deliveries = deliveries - 1
      WHERE phone = p_phone AND purpose = p_purpose;
  END IF;
  RETURN true;
END $$;

-- verify.lua's contract. o_outcome: 1 verified, 0 wrong (o_value attempts left), -1 no code,
-- -2 destroyed, -3 a failure quota is used up (o_value ms; nothing compared).
CREATE FUNCTION vcode_verify(
  p_phone text, p_purpose text, p_client text, p_candidates bytea[], p_max_attempts integer,
  p_token bigint, p_phone_limits integer[], p_phone_windows bigint[],
  p_client_limits integer[], p_client_windows bigint[],
  OUT o_outcome integer, OUT o_value bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  phone_log text := 'fails:' || p_phone;
  client_log text := 'fails:' || p_phone || ':' || p_client;
  pending vcode_codes%ROWTYPE;
  failed integer;
BEGIN
  PERFORM vcode_lock('phone:' || p_phone);
  now_ms := vcode_now_ms();
  o_value := greatest(vcode_quota_wait(phone_log, now_ms, p_phone_limits, p_phone_windows),
                      vcode_quota_wait(client_log, now_ms, p_client_limits, p_client_windows));
  IF o_value > 0 THEN
    o_outcome := -3;
    RETURN;
  END IF;
  SELECT * INTO pending FROM vcode_codes
    WHERE phone = p_phone AND purpose = p_purpose AND expires_at_ms > now_ms FOR UPDATE;
  IF NOT FOUND THEN
    o_outcome := -1;
    RETURN;
  END IF;
  IF pending.digest = ANY (p_candidates) THEN
    DELETE FROM vcode_codes WHERE phone = p_phone AND purpose = p_purpose;
    o_outcome := 1;
    RETURN;
  END IF;
  PERFORM vcode_quota_record(phone_log, now_ms, p_phone_windows, p_token);
  PERFORM vcode_quota_record(client_log, now_ms, p_client_windows, p_token);
  UPDATE vcode_codes SET failed_attempts = failed_attempts + 1
    WHERE phone = p_phone AND purpose = p_purpose
    RETURNING failed_attempts INTO failed;
  IF failed >= p_max_attempts THEN
    DELETE FROM vcode_codes WHERE phone = p_phone AND purpose = p_purpose;
    o_outcome := -2;
    RETURN;
  END IF;
  o_outcome := 0;
  o_value := p_max_attempts - failed;
END $$;

-- reserve_quota.lua's contract: log i has p_rule_counts[i] rules, taken in order from p_limits
-- and p_windows. o_refused: 0 recorded, -1 run after p_not_after_ms (nothing recorded), else
-- the first log (1-based) without room, and o_wait_ms until every log has room.
CREATE FUNCTION vcode_reserve_quota(
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
CREATE FUNCTION vcode_begin_idempotent(p_key text, p_running bytea, p_lease_ms bigint)
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

-- Keeps the newest OUTBOX_CAPACITY messages per phone, all expiring p_ttl_ms after the last.
CREATE FUNCTION vcode_push_outbox(p_phone text, p_message text, p_capacity integer, p_ttl_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  expires bigint := vcode_now_ms() + p_ttl_ms;
BEGIN
  PERFORM vcode_lock('outbox:' || p_phone);
  INSERT INTO vcode_outbox (phone, message, expires_at_ms) VALUES (p_phone, p_message, expires);
  UPDATE vcode_outbox SET expires_at_ms = expires WHERE phone = p_phone;
  DELETE FROM vcode_outbox WHERE phone = p_phone AND id <= (
    SELECT id FROM vcode_outbox WHERE phone = p_phone ORDER BY id DESC OFFSET p_capacity LIMIT 1);
END $$;
