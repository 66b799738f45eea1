-- vcode's PostgreSQL store, version 1: one table per role and one function per operation that
-- reads, compares and writes, so that each is one transaction and one round trip. Times are
-- unix milliseconds from the database's clock (vcode_now_ms); a row whose expires_at_ms has
-- passed is treated as absent by every read and deleted later by the sweep (vcode_sweep).
-- Per-phone operations (issue, undo, verify) serialise on an advisory lock named after the
-- phone, which also covers rows that do not exist yet (a first send) and the phone's quota logs;
-- they lock the code's row too, so the sweep never deletes a row one of them is renewing.

-- Pending codes: the keyed digest and (resend policy `reuse`) the sealed code; never the code.
CREATE TABLE vcode_codes (
  phone text NOT NULL,
  purpose text NOT NULL,
  digest bytea NOT NULL,
  sealed bytea,
  failed_attempts integer NOT NULL DEFAULT 0,
  deliveries integer NOT NULL,
  sent_at_ms bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (phone, purpose)
);
CREATE INDEX vcode_codes_expiry ON vcode_codes (expires_at_ms);

-- Sliding-window quota logs: one row per event. `log` names the log ('sends:<phone>',
-- 'fails:<phone>', 'fails:<phone>:<client>', 'ip:<client>', 'captcha:<client>', 'global').
CREATE TABLE vcode_quota_events (
  log text NOT NULL,
  token bigint NOT NULL,
  at_ms bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (log, token)
);
CREATE INDEX vcode_quota_events_time ON vcode_quota_events (log, at_ms);
CREATE INDEX vcode_quota_events_expiry ON vcode_quota_events (expires_at_ms);

CREATE TABLE vcode_captchas (
  id text PRIMARY KEY,
  seed bigint NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_captchas_expiry ON vcode_captchas (expires_at_ms);

CREATE TABLE vcode_idempotency (
  key text PRIMARY KEY,
  record bytea NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_idempotency_expiry ON vcode_idempotency (expires_at_ms);

CREATE TABLE vcode_pow_replays (
  digest text PRIMARY KEY,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_pow_replays_expiry ON vcode_pow_replays (expires_at_ms);

CREATE TABLE vcode_stats (
  day text NOT NULL,
  field text NOT NULL,
  count bigint NOT NULL,
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (day, field)
);
CREATE INDEX vcode_stats_expiry ON vcode_stats (expires_at_ms);

-- Dev mode only.
CREATE TABLE vcode_outbox (
  id bigserial PRIMARY KEY,
  phone text NOT NULL,
  message text NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_outbox_phone ON vcode_outbox (phone, id);
CREATE INDEX vcode_outbox_expiry ON vcode_outbox (expires_at_ms);
