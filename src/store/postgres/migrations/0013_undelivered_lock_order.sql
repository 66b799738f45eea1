-- vcode's PostgreSQL store, version 13: an undelivered receipt takes the fraud counts' rows in
-- the one order every other step takes them (prefix, country, service: the send's admission,
-- its release and its conversion). Version 12 moved the send with one UPDATE over the three
-- scopes, which locked their rows in the index's order (service first), so a receipt and a
-- send, release or conversion of the same minute and shard could each hold a row the other
-- waited for: a deadlock, which PostgreSQL breaks after deadlock_timeout by failing one.

CREATE OR REPLACE FUNCTION vcode_fraud_undelivered(
  p_prefix text, p_country text, p_minute bigint, p_token bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := vcode_fraud_shard(p_token);
BEGIN
  UPDATE vcode_fraud_counts f SET sends = f.sends - 1, undelivered = f.undelivered + 1
    WHERE f.scope = 'p:' || p_prefix AND f.minute = p_minute AND f.shard = v_shard
      AND f.sends > 0;
  UPDATE vcode_fraud_counts f SET sends = f.sends - 1, undelivered = f.undelivered + 1
    WHERE f.scope = 'c:' || p_country AND f.minute = p_minute AND f.shard = v_shard
      AND f.sends > 0;
  UPDATE vcode_fraud_counts f SET sends = f.sends - 1, undelivered = f.undelivered + 1
    WHERE f.scope = '*' AND f.minute = p_minute AND f.shard = v_shard AND f.sends > 0;
END $$;
