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
