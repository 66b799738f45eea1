-- vcode's PostgreSQL store, version 3: the fraud guard's counts and blocks. Times are the
-- caller's unix milliseconds (the guard judges with one clock on every store). Counts are one
-- row per scope ('p:<prefix>', 'c:<country>', '*' for the service) and minute; a send's step
-- serialises on an advisory lock named after its prefix, then updates its rows in one order
-- (prefix, country, service) everywhere, so concurrent sends never deadlock nor lose a count.

CREATE TABLE vcode_fraud_counts (
  scope text NOT NULL,
  minute bigint NOT NULL,
  sends bigint NOT NULL DEFAULT 0,
  conversions bigint NOT NULL DEFAULT 0,
  refused bigint NOT NULL DEFAULT 0,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (scope, minute)
);
CREATE INDEX vcode_fraud_counts_minute ON vcode_fraud_counts (minute);
CREATE INDEX vcode_fraud_counts_expiry ON vcode_fraud_counts (expires_at_ms);

-- Each prefix counted, with its country (for the traffic report).
CREATE TABLE vcode_fraud_prefixes (
  prefix text PRIMARY KEY,
  country text NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_fraud_prefixes_expiry ON vcode_fraud_prefixes (expires_at_ms);

-- The mark (minute and token) of the last send of a pending code ('<E.164>:<purpose>'): its
-- verify converts it.
CREATE TABLE vcode_fraud_attributions (
  attribution text PRIMARY KEY,
  minute bigint NOT NULL,
  token bigint NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_fraud_attributions_expiry ON vcode_fraud_attributions (expires_at_ms);

-- One row per prefix ever blocked: its last suspension or hold; kept for its strikes.
CREATE TABLE vcode_fraud_blocks (
  prefix text PRIMARY KEY,
  country text NOT NULL,
  reason text NOT NULL,
  since_ms bigint NOT NULL,
  until_ms bigint NOT NULL,
  strikes integer NOT NULL,
  struck_ms bigint NOT NULL,
  sends bigint NOT NULL,
  conversions bigint NOT NULL,
  lifted_ms bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION vcode_fraud_add(p_scope text, p_minute bigint, p_sends bigint,
  p_conversions bigint, p_refused bigint, p_expires bigint)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO vcode_fraud_counts AS f (scope, minute, sends, conversions, refused, expires_at_ms)
    VALUES (p_scope, p_minute, p_sends, p_conversions, p_refused, p_expires)
    ON CONFLICT (scope, minute) DO UPDATE
      SET sends = f.sends + excluded.sends,
          conversions = f.conversions + excluded.conversions,
          refused = f.refused + excluded.refused,
          expires_at_ms = greatest(f.expires_at_ms, excluded.expires_at_ms)
$$;

-- fraud_admit.lua's contract: refused (and the block), or counted (and the prefix's and the
-- service's judged and unjudged sends and conversions, the block if any, the attribution's
-- previous mark).
CREATE FUNCTION vcode_fraud_admit(
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
BEGIN
  PERFORM vcode_lock('fraud:' || p_prefix);
  SELECT * INTO b FROM vcode_fraud_blocks WHERE prefix = p_prefix;
  has_block := FOUND;
  o_block := CASE WHEN has_block THEN row_to_json(b)::text END;
  IF has_block AND p_enforce AND b.until_ms > p_now THEN
    PERFORM vcode_fraud_add('*', p_minute, 0, 0, 1, expires);
    o_refused := true;
    RETURN;
  END IF;
  o_refused := false;
  PERFORM vcode_fraud_add('p:' || p_prefix, p_minute, 1, 0, 0, expires);
  PERFORM vcode_fraud_add('c:' || p_country, p_minute, 1, 0, 0, expires);
  PERFORM vcode_fraud_add('*', p_minute, 1, 0, 0, expires);
  INSERT INTO vcode_fraud_prefixes AS f (prefix, country, expires_at_ms)
    VALUES (p_prefix, p_country, expires)
    ON CONFLICT (prefix) DO UPDATE SET country = excluded.country, expires_at_ms = excluded.expires_at_ms;
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

-- fraud_release.lua's contract.
CREATE FUNCTION vcode_fraud_release(
  p_prefix text, p_country text, p_attribution text, p_minute bigint, p_token bigint,
  p_previous bigint, p_previous_token bigint, p_refused boolean, p_now bigint,
  p_retention_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM vcode_lock('fraud:' || p_prefix);
  UPDATE vcode_fraud_counts SET sends = greatest(sends - 1, 0)
    WHERE scope = 'p:' || p_prefix AND minute = p_minute;
  UPDATE vcode_fraud_counts SET sends = greatest(sends - 1, 0)
    WHERE scope = 'c:' || p_country AND minute = p_minute;
  UPDATE vcode_fraud_counts SET sends = greatest(sends - 1, 0)
    WHERE scope = '*' AND minute = p_minute;
  IF p_refused THEN
    PERFORM vcode_fraud_add('*', p_minute, 0, 0, 1, p_now + p_retention_ms);
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

-- fraud_convert.lua's contract: the minute converted, or -1.
CREATE FUNCTION vcode_fraud_convert(
  p_attribution text, p_prefix text, p_country text, p_since bigint, p_now bigint,
  p_retention_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  sent bigint;
  expires bigint := p_now + p_retention_ms;
BEGIN
  DELETE FROM vcode_fraud_attributions
    WHERE attribution = p_attribution AND expires_at_ms > p_now
    RETURNING minute INTO sent;
  IF sent IS NULL OR sent < p_since THEN
    RETURN -1;
  END IF;
  PERFORM vcode_fraud_add('p:' || p_prefix, sent, 0, 1, 0, expires);
  PERFORM vcode_fraud_add('c:' || p_country, sent, 0, 1, 0, expires);
  PERFORM vcode_fraud_add('*', sent, 0, 1, 0, expires);
  RETURN sent;
END $$;

-- fraud_block.lua's contract: recorded unless an active block stands.
CREATE FUNCTION vcode_fraud_block(
  p_prefix text, p_country text, p_reason text, p_since bigint, p_until bigint,
  p_strikes integer, p_struck bigint, p_sends bigint, p_conversions bigint, p_lifted bigint,
  p_now bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM vcode_lock('fraud:' || p_prefix);
  INSERT INTO vcode_fraud_blocks AS b
    VALUES (p_prefix, p_country, p_reason, p_since, p_until, p_strikes, p_struck, p_sends,
      p_conversions, p_lifted)
    ON CONFLICT (prefix) DO UPDATE
      SET country = excluded.country, reason = excluded.reason, since_ms = excluded.since_ms,
          until_ms = excluded.until_ms, strikes = excluded.strikes,
          struck_ms = excluded.struck_ms, sends = excluded.sends,
          conversions = excluded.conversions, lifted_ms = excluded.lifted_ms
      WHERE b.until_ms <= p_now;
  RETURN FOUND;
END $$;
