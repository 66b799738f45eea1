-- vcode's PostgreSQL store, version 10: the fraud guard's sends to one prefix no longer queue
-- behind each other (issue 25 point 7). Until now every send of a prefix took the prefix's
-- advisory lock and updated the one row of its prefix, its country and the service for the
-- minute, and held both until its transaction committed (an fsync with the durable defaults):
-- one commit at a time, about 100 sends a second to one prefix against 1,300-1,800 without the
-- guard.
--
-- Now each minute of a scope is counted in up to 16 rows (`shard`), and a send writes the
-- shard its token names (the same in every scope, so that two sends meet on at most one
-- shard's rows); its release and its conversion write the same shard (the attribution keeps
-- the token). Reads sum the shards. Counting stays exact: every change is one atomic
-- increment of one row. The prefix's lock is gone from the send and its release: the block is
-- read in the send's statement, so a block recorded (committed) before a send's step refuses
-- it, on every instance; blocks still serialise on the lock among themselves.

ALTER TABLE vcode_fraud_counts ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE vcode_fraud_counts DROP CONSTRAINT vcode_fraud_counts_pkey;
ALTER TABLE vcode_fraud_counts ADD PRIMARY KEY (scope, minute, shard);

-- The shard of a send: the low bits of its token (random, from the CSPRNG).
CREATE FUNCTION vcode_fraud_shard(p_token bigint) RETURNS smallint LANGUAGE sql IMMUTABLE AS
$$ SELECT (p_token & 15)::smallint $$;

CREATE FUNCTION vcode_fraud_add(p_scope text, p_minute bigint, p_shard smallint,
  p_sends bigint, p_conversions bigint, p_refused bigint, p_expires bigint)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO vcode_fraud_counts AS f
      (scope, minute, shard, sends, conversions, refused, expires_at_ms)
    VALUES (p_scope, p_minute, p_shard, p_sends, p_conversions, p_refused, p_expires)
    ON CONFLICT (scope, minute, shard) DO UPDATE
      SET sends = f.sends + excluded.sends,
          conversions = f.conversions + excluded.conversions,
          refused = f.refused + excluded.refused,
          expires_at_ms = greatest(f.expires_at_ms, excluded.expires_at_ms)
$$;
DROP FUNCTION vcode_fraud_add(text, bigint, bigint, bigint, bigint, bigint);

-- Attributions keep nothing new: the token they hold already names the shard.

CREATE OR REPLACE FUNCTION vcode_fraud_admit(
  p_prefix text, p_country text, p_attribution text, p_now bigint, p_minute bigint,
  p_from bigint, p_judged_before bigint, p_enforce boolean, p_attribution_ttl_ms bigint,
  p_retention_ms bigint, p_token bigint,
  OUT o_refused boolean, OUT o_block text,
  OUT o_prefix bigint[], OUT o_service bigint[], OUT o_previous bigint,
  OUT o_previous_token bigint)
LANGUAGE plpgsql AS $$
DECLARE
  b vcode_fraud_blocks%ROWTYPE;
  has_block boolean;
  expires bigint := p_now + p_retention_ms;
  v_shard smallint := vcode_fraud_shard(p_token);
BEGIN
  SELECT * INTO b FROM vcode_fraud_blocks WHERE prefix = p_prefix;
  has_block := FOUND;
  o_block := CASE WHEN has_block THEN row_to_json(b)::text END;
  IF has_block AND p_enforce AND b.until_ms > p_now THEN
    PERFORM vcode_fraud_add('*', p_minute, v_shard, 0, 0, 1, expires);
    o_refused := true;
    RETURN;
  END IF;
  o_refused := false;
  -- One order everywhere (prefix, country, service): no two steps wait on each other.
  PERFORM vcode_fraud_add('p:' || p_prefix, p_minute, v_shard, 1, 0, 0, expires);
  PERFORM vcode_fraud_add('c:' || p_country, p_minute, v_shard, 1, 0, 0, expires);
  PERFORM vcode_fraud_add('*', p_minute, v_shard, 1, 0, 0, expires);
  -- The prefix's registry row is renewed once a minute, not by every send (it would be one
  -- hot row again).
  IF NOT EXISTS (SELECT 1 FROM vcode_fraud_prefixes
      WHERE prefix = p_prefix AND country = p_country AND expires_at_ms > expires - 60000) THEN
    INSERT INTO vcode_fraud_prefixes AS f (prefix, country, expires_at_ms)
      VALUES (p_prefix, p_country, expires)
      ON CONFLICT (prefix) DO UPDATE
        SET country = excluded.country,
            expires_at_ms = greatest(f.expires_at_ms, excluded.expires_at_ms);
  END IF;
  SELECT minute, token INTO o_previous, o_previous_token FROM vcode_fraud_attributions
    WHERE attribution = p_attribution AND expires_at_ms > p_now;
  INSERT INTO vcode_fraud_attributions AS a (attribution, minute, token, expires_at_ms)
    VALUES (p_attribution, p_minute, p_token, p_now + p_attribution_ttl_ms)
    ON CONFLICT (attribution) DO UPDATE
      SET minute = excluded.minute, token = excluded.token,
          expires_at_ms = excluded.expires_at_ms;
  SELECT ARRAY[
      coalesce(sum(sends) FILTER (WHERE minute < p_judged_before), 0)::bigint,
      coalesce(sum(conversions) FILTER (WHERE minute < p_judged_before), 0)::bigint,
      coalesce(sum(sends) FILTER (WHERE minute >= p_judged_before), 0)::bigint,
      coalesce(sum(conversions) FILTER (WHERE minute >= p_judged_before), 0)::bigint]
    INTO o_prefix FROM vcode_fraud_counts
    WHERE scope = 'p:' || p_prefix AND minute BETWEEN p_from AND p_minute;
  SELECT ARRAY[
      coalesce(sum(sends) FILTER (WHERE minute < p_judged_before), 0)::bigint,
      coalesce(sum(conversions) FILTER (WHERE minute < p_judged_before), 0)::bigint,
      coalesce(sum(sends) FILTER (WHERE minute >= p_judged_before), 0)::bigint,
      coalesce(sum(conversions) FILTER (WHERE minute >= p_judged_before), 0)::bigint]
    INTO o_service FROM vcode_fraud_counts
    WHERE scope = '*' AND minute BETWEEN p_from AND p_minute;
END $$;

-- The send's own shard loses it again (so no shard's count goes below zero).
CREATE OR REPLACE FUNCTION vcode_fraud_release(
  p_prefix text, p_country text, p_attribution text, p_minute bigint, p_token bigint,
  p_previous bigint, p_previous_token bigint, p_refused boolean, p_now bigint,
  p_retention_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := vcode_fraud_shard(p_token);
BEGIN
  UPDATE vcode_fraud_counts f SET sends = greatest(f.sends - 1, 0)
    WHERE f.scope = 'p:' || p_prefix AND f.minute = p_minute AND f.shard = v_shard;
  UPDATE vcode_fraud_counts f SET sends = greatest(f.sends - 1, 0)
    WHERE f.scope = 'c:' || p_country AND f.minute = p_minute AND f.shard = v_shard;
  UPDATE vcode_fraud_counts f SET sends = greatest(f.sends - 1, 0)
    WHERE f.scope = '*' AND f.minute = p_minute AND f.shard = v_shard;
  IF p_refused THEN
    PERFORM vcode_fraud_add('*', p_minute, v_shard, 0, 0, 1, p_now + p_retention_ms);
  END IF;
  -- Only while it holds this send's mark: a concurrent send of the same code may own it now.
  IF p_previous IS NULL THEN
    DELETE FROM vcode_fraud_attributions
      WHERE attribution = p_attribution AND minute = p_minute AND token = p_token;
  ELSE
    UPDATE vcode_fraud_attributions SET minute = p_previous, token = p_previous_token
      WHERE attribution = p_attribution AND minute = p_minute AND token = p_token;
  END IF;
END $$;

-- The conversion counts in the shard of the send it converts (the attribution's token).
CREATE OR REPLACE FUNCTION vcode_fraud_convert(
  p_attribution text, p_prefix text, p_country text, p_since bigint, p_now bigint,
  p_retention_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  sent bigint;
  sent_token bigint;
  v_shard smallint;
  expires bigint := p_now + p_retention_ms;
BEGIN
  DELETE FROM vcode_fraud_attributions
    WHERE attribution = p_attribution AND expires_at_ms > p_now
    RETURNING minute, token INTO sent, sent_token;
  IF sent IS NULL OR sent < p_since THEN
    RETURN -1;
  END IF;
  v_shard := vcode_fraud_shard(sent_token);
  PERFORM vcode_fraud_add('p:' || p_prefix, sent, v_shard, 0, 1, 0, expires);
  PERFORM vcode_fraud_add('c:' || p_country, sent, v_shard, 0, 1, 0, expires);
  PERFORM vcode_fraud_add('*', sent, v_shard, 0, 1, 0, expires);
  RETURN sent;
END $$;
