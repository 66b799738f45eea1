-- Version 7: a receipt's final word is an event. vcode_receipt (0005, same contract) appends
-- verification.delivered / .undelivered in the call that moves the delivery, so only a change
-- emits (a repeat, or the loser of a race, returns before it). The row's trigger cannot: the
-- provider and message id are not on the row. It writes only while the verification trigger
-- is enabled (0004: events recorded), so turning events on or off stays one switch.
CREATE OR REPLACE FUNCTION vcode_receipt(p_provider text, p_message_id text, p_delivery text,
  p_error text,
  OUT o_outcome integer, OUT o_verification text, OUT o_phone text, OUT o_purpose text,
  OUT o_previous text, OUT o_created_at_ms bigint, OUT o_now_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
  verification vcode_verifications%ROWTYPE;
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
  -- The detail as Receipt::event spells it.
  IF p_delivery IN ('delivered', 'undelivered') AND EXISTS (
      SELECT 1 FROM pg_trigger WHERE tgrelid = 'vcode_verifications'::regclass
        AND tgname = 'vcode_verification_events' AND tgenabled <> 'D') THEN
    PERFORM vcode_event_append('verification.' || p_delivery, verification.id,
      verification.phone, verification.purpose, o_now_ms, o_now_ms,
      'provider=' || p_provider || ';message_id=' || p_message_id
        || CASE WHEN p_delivery = 'undelivered' AND p_error IS NOT NULL
             THEN ';error_code=' || p_error ELSE '' END);
  END IF;
END $$;
