-- vcode's PostgreSQL store, version 15: the fraud guard's levels (issue 39). One row per scope
-- and shard (the send's claimed shard, as vcode_fraud_counts: the service's and a country's
-- rows are written by every send) with the decayed recent and history counts as of t_ms;
-- a scope's counts are the sum of its shards', each decayed to now (decay is linear). And the
-- destinations that verified, by keyed digest, until expires_at_ms. The sweep drops both when
-- their time is over.
CREATE TABLE IF NOT EXISTS vcode_fraud_levels (
  scope text NOT NULL,
  shard smallint NOT NULL,
  t_ms bigint NOT NULL,
  rs double precision NOT NULL DEFAULT 0,
  rc double precision NOT NULL DEFAULT 0,
  ru double precision NOT NULL DEFAULT 0,
  hs double precision NOT NULL DEFAULT 0,
  hc double precision NOT NULL DEFAULT 0,
  hu double precision NOT NULL DEFAULT 0,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (scope, shard)
);
CREATE INDEX IF NOT EXISTS vcode_fraud_levels_expiry ON vcode_fraud_levels (expires_at_ms);

CREATE TABLE IF NOT EXISTS vcode_fraud_returning (
  digest bigint PRIMARY KEY,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS vcode_fraud_returning_expiry ON vcode_fraud_returning (expires_at_ms);

-- A block's evidence, for the operator (a level's verdict in words), and the block function
-- that writes it: the old one, without it, goes (functions.sql has the new).
ALTER TABLE vcode_fraud_blocks ADD COLUMN IF NOT EXISTS evidence text NOT NULL DEFAULT '';
DROP FUNCTION IF EXISTS vcode_fraud_block(text, text, text, bigint, bigint, integer, bigint,
  bigint, bigint, bigint, bigint);
