-- Version 2: verification ids. Each accepted send has a row of its own, bound to the code it
-- delivered (its digest), with its own failed attempts: a verify by id counts there, never in
-- the code, so guesses under one id cannot destroy the code another id verifies. The row
-- outlives its code by the retention the send asks for, so its status can still be read.
CREATE TABLE vcode_verifications (
  id text PRIMARY KEY,
  phone text NOT NULL,
  purpose text NOT NULL,
  -- The digest of the code the send delivered: the id verifies that code only.
  digest bytea NOT NULL,
  failed_attempts integer NOT NULL DEFAULT 0,
  -- 'approved', 'canceled' or 'max_attempts_reached' once it has ended.
  ended text,
  unconfirmed boolean NOT NULL DEFAULT false,
  created_at_ms bigint NOT NULL,
  -- The id verifies until then (its code's expiry as the send left it).
  verifies_until_ms bigint NOT NULL,
  -- The row's own expiry, for the sweep.
  expires_at_ms bigint NOT NULL
);
CREATE INDEX vcode_verifications_expiry ON vcode_verifications (expires_at_ms);

DROP FUNCTION IF EXISTS vcode_issue(text, text, bytea, bytea, bigint, bigint, boolean, bigint, bigint,
  integer[], bigint[]);

DROP FUNCTION IF EXISTS vcode_undo_issue(text, text, bytea, bigint, integer, bigint, bytea, bytea, bigint,
  bigint);
