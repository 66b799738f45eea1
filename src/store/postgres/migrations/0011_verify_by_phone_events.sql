-- Version 10: a verify by phone ends the verification of its code's latest send, as a verify
-- under that id would: approved on a match; on a miss, the code's failed attempts (or one more
-- than the id's own, if a verify under the id counted more), and spent with the code at the
-- limit. The verification row's trigger (0004) then writes its events in this same
-- transaction. Only a verification still pending takes it (a canceled or spent one is left as
-- it is). The index finds a phone's verifications of a purpose, newest first.
CREATE INDEX vcode_verifications_target ON vcode_verifications (phone, purpose, created_at_ms);

-- verify.lua's contract (0001's, same signature and answer).
CREATE OR REPLACE FUNCTION vcode_verify(
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
  latest vcode_verifications%ROWTYPE;
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
  SELECT * INTO latest FROM vcode_verifications
    WHERE phone = p_phone AND purpose = p_purpose AND digest = pending.digest
      AND expires_at_ms > now_ms
    ORDER BY created_at_ms DESC, id DESC LIMIT 1 FOR UPDATE;
  IF FOUND AND latest.ended IS NOT NULL THEN
    latest.id := NULL;
  END IF;
  IF pending.digest = ANY (p_candidates) THEN
    DELETE FROM vcode_codes WHERE phone = p_phone AND purpose = p_purpose;
    UPDATE vcode_verifications SET ended = 'approved' WHERE id = latest.id;
    o_outcome := 1;
    RETURN;
  END IF;
  PERFORM vcode_quota_record(phone_log, now_ms, p_phone_windows, p_token);
  PERFORM vcode_quota_record(client_log, now_ms, p_client_windows, p_token);
  UPDATE vcode_codes SET failed_attempts = failed_attempts + 1
    WHERE phone = p_phone AND purpose = p_purpose
    RETURNING failed_attempts INTO failed;
  UPDATE vcode_verifications
    SET failed_attempts = greatest(failed, failed_attempts + 1),
        ended = CASE WHEN failed >= p_max_attempts THEN 'max_attempts_reached' END
    WHERE id = latest.id;
  IF failed >= p_max_attempts THEN
    DELETE FROM vcode_codes WHERE phone = p_phone AND purpose = p_purpose;
    o_outcome := -2;
    RETURN;
  END IF;
  o_outcome := 0;
  o_value := p_max_attempts - failed;
END $$;
