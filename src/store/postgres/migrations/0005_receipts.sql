-- Version 5: delivery receipts. A send whose provider named its message records which
-- verification the message carried (vcode_messages); a receipt moves that verification's
-- delivery forward only (unconfirmed < sent < delivered | undelivered: a repeat or a late
-- 'sent' changes nothing, the first final word stays), in one function call that holds the
-- verification's row lock.
ALTER TABLE vcode_verifications
  -- NULL until a receipt: 'sent', 'delivered' or 'undelivered'.
  ADD COLUMN delivery text,
  -- The provider's error code an 'undelivered' receipt gave.
  ADD COLUMN delivery_error text;

CREATE TABLE vcode_messages (
  provider text NOT NULL,
  message_id text NOT NULL,
  verification text NOT NULL,
  -- As long as its verification is kept, for the sweep.
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (provider, message_id)
);
CREATE INDEX vcode_messages_expiry ON vcode_messages (expires_at_ms);

-- receipt.lua's contract. o_outcome: 0 unknown message or forgotten verification (no other
-- column), 1 nothing changed, 2 changed (o_previous the delivery it had).
CREATE FUNCTION vcode_receipt(p_provider text, p_message_id text, p_delivery text,
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
END $$;
