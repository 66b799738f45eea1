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
