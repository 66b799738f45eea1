-- Version 12: a delivery receipt that calls a send undelivered takes it out of the fraud
-- guard's judgement (issue 27): a dead route or a carrier's outage is not pumping, whose SMS
-- are reported delivered. The message keeps the guard's mark of its send (minute and token,
-- NULL if the guard did not count it); the receipt's use case then moves one send of that
-- minute, in the token's shard, from `sends` (which the judgement sums) to `undelivered`, so
-- the send's step reads nothing new. The traffic report adds them back into the sends.
ALTER TABLE vcode_messages ADD COLUMN guard_minute bigint, ADD COLUMN guard_token bigint;
ALTER TABLE vcode_fraud_counts ADD COLUMN undelivered bigint NOT NULL DEFAULT 0;
