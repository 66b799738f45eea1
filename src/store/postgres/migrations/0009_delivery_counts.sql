-- Version 9: the delivery rate per provider and country, shared by every instance. A send
-- records its phone's country with its message (vcode_messages.country, '' for messages
-- recorded before this version); vcode_receipt (0007, same contract) counts a final word
-- ('delivered' / 'undelivered') in its hour's row in the call that moves the delivery, so only
-- a change counts (a repeat, or the loser of a race, returns before it). Rows expire eight
-- days after their hour began (DELIVERY_COUNTS_KEPT_HOURS + a day), and the sweep deletes them.
ALTER TABLE vcode_messages ADD COLUMN country text NOT NULL DEFAULT '';

CREATE TABLE vcode_delivery_counts (
  -- Unix hour.
  hour bigint NOT NULL,
  provider text NOT NULL,
  country text NOT NULL,
  delivered bigint NOT NULL DEFAULT 0,
  undelivered bigint NOT NULL DEFAULT 0,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (hour, provider, country)
);
CREATE INDEX vcode_delivery_counts_expiry ON vcode_delivery_counts (expires_at_ms);

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
