-- Version 2: verification ids. Each accepted send has a row of its own, bound to the code it
-- delivered (its digest), with its own failed attempts: a verify by id counts there, never in
-- the code, so guesses under one id cannot destroy the code another id verifies. The row
-- outlives its code by the retention the send asks for, so its status can still be read.
CREATE TABLE vcode_verifications (
  id text PRIMARY KEY,
  phone text NOT NULL,
  purpose text NOT NULL,
  -- The digest of the code the send delivered: the id verifies that code only.
  digest bytea NOT NULL,
  failed_attempts integer NOT NULL DEFAULT 0,
  -- 'approved', 'canceled' or 'max_attempts_reached' once it has ended.
  ended text,
  unconfirmed boolean NOT NULL DEFAULT false,
  created_at_ms bigint NOT NULL,
  -- The id verifies until then (its code's expiry as the send left it).
  verifies_until_ms bigint NOT NULL,
  -- The row's own expiry, for the sweep.
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_verifications_expiry ON vcode_verifications (expires_at_ms);

DROP FUNCTION vcode_issue(text, text, bytea, bytea, bigint, bigint, boolean, bigint, bigint,
  integer[], bigint[]);

-- issue.lua's contract, as version 1's vcode_issue, plus the send's verification.
CREATE FUNCTION vcode_issue(
  p_phone text, p_purpose text, p_digest bytea, p_sealed bytea, p_ttl_ms bigint,
  p_cooldown_ms bigint, p_rotate boolean, p_token bigint, p_not_after_ms bigint,
  p_limits integer[], p_windows bigint[], p_verification text, p_retention_ms bigint,
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
  ELSE
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
  END IF;
  INSERT INTO vcode_verifications
    (id, phone, purpose, digest, created_at_ms, verifies_until_ms, expires_at_ms)
    VALUES (p_verification, p_phone, p_purpose, o_digest, now_ms, now_ms + p_ttl_ms,
            now_ms + p_ttl_ms + p_retention_ms);
END $$;

DROP FUNCTION vcode_undo_issue(text, text, bytea, bigint, integer, bigint, bytea, bytea, bigint,
  bigint);

-- undo_issue.lua's contract, as version 1's, plus: the send's verification goes (its id was
-- never handed out).
CREATE FUNCTION vcode_undo_issue(
  p_phone text, p_purpose text, p_digest bytea, p_sent_at_ms bigint, p_deliveries integer,
  p_token bigint, p_previous_digest bytea, p_previous_sealed bytea,
  p_previous_sent_at_ms bigint, p_previous_expires_at_ms bigint, p_verification text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  pending vcode_codes%ROWTYPE;
BEGIN
  PERFORM vcode_lock('phone:' || p_phone);
  now_ms := vcode_now_ms();
  DELETE FROM vcode_quota_events WHERE log = 'sends:' || p_phone AND token = p_token;
  DELETE FROM vcode_verifications WHERE id = p_verification;
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

-- verify_id.lua's contract. o_outcome: 1 verified, 0 wrong (o_value attempts left), -1 the
-- id's code is no longer pending (or the id expired or was approved), -2 the id is spent, -3 a
-- failure quota is used up (o_value ms; nothing compared), -4 canceled.
CREATE FUNCTION vcode_verify_by_id(
  p_phone text, p_purpose text, p_verification text, p_client text, p_candidates bytea[],
  p_max_attempts integer, p_token bigint, p_phone_limits integer[], p_phone_windows bigint[],
  p_client_limits integer[], p_client_windows bigint[],
  OUT o_outcome integer, OUT o_value bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint;
  phone_log text := 'fails:' || p_phone;
  client_log text := 'fails:' || p_phone || ':' || p_client;
  verification vcode_verifications%ROWTYPE;
  failed integer;
BEGIN
  PERFORM vcode_lock('phone:' || p_phone);
  now_ms := vcode_now_ms();
  SELECT * INTO verification FROM vcode_verifications
    WHERE id = p_verification AND phone = p_phone AND purpose = p_purpose
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
    WHERE phone = p_phone AND purpose = p_purpose AND expires_at_ms > now_ms
      AND digest = verification.digest FOR UPDATE;
  IF NOT FOUND THEN
    o_outcome := -1;
    RETURN;
  END IF;
  IF verification.digest = ANY (p_candidates) THEN
    DELETE FROM vcode_codes WHERE phone = p_phone AND purpose = p_purpose;
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
CREATE FUNCTION vcode_verification(p_verification text, p_cancel boolean,
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
