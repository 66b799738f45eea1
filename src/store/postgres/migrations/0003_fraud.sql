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
