-- vcode's PostgreSQL store, version 8: a send's issue and the fraud guard's step in one
-- statement and one transaction (issue 25 point 7), as issue.lua takes both on one Redis node.
-- Apart they were two statements and two round trips per send (and a third, the undo, for
-- every send the guard refused).

-- vcode_issue's contract, then, for a send that delivers, vcode_fraud_admit's: o_kind -4 with
-- o_block when the prefix's block refuses the send (the issue is undone in this same
-- transaction: nothing stays of it but the refusal's count), else the issue's outcome and,
-- when it delivers, the guard's counts (o_prefix, o_service), the block if any and the
-- attribution's previous mark. The phone's lock is taken first, then the prefix's (as every
-- other step takes at most one of them, no two steps wait on each other in opposite orders).
CREATE FUNCTION vcode_issue_guarded(
  p_phone text, p_purpose text, p_digest bytea, p_sealed bytea, p_ttl_ms bigint,
  p_cooldown_ms bigint, p_rotate boolean, p_token bigint, p_not_after_ms bigint,
  p_limits integer[], p_windows bigint[], p_verification text, p_retention_ms bigint,
  p_prefix text, p_country text, p_attribution text, p_now bigint, p_minute bigint,
  p_from bigint, p_judged_before bigint, p_enforce boolean, p_attribution_ttl_ms bigint,
  p_counters_ms bigint, p_send_token bigint,
  OUT o_kind integer, OUT o_wait_ms bigint, OUT o_digest bytea, OUT o_sealed bytea,
  OUT o_sent_at_ms bigint, OUT o_deliveries integer, OUT o_previous_digest bytea,
  OUT o_previous_sealed bytea, OUT o_previous_sent_at_ms bigint,
  OUT o_previous_expires_at_ms bigint,
  OUT o_block text, OUT o_prefix bigint[], OUT o_service bigint[], OUT o_previous bigint,
  OUT o_previous_token bigint)
LANGUAGE plpgsql AS $$
DECLARE
  admitted record;
BEGIN
  SELECT * INTO o_kind, o_wait_ms, o_digest, o_sealed, o_sent_at_ms, o_deliveries,
      o_previous_digest, o_previous_sealed, o_previous_sent_at_ms, o_previous_expires_at_ms
    FROM vcode_issue(p_phone, p_purpose, p_digest, p_sealed, p_ttl_ms, p_cooldown_ms,
      p_rotate, p_token, p_not_after_ms, p_limits, p_windows, p_verification, p_retention_ms);
  -- Only a send that issues is the guard's (a cooldown or a quota refusal counts nothing).
  IF o_kind < 1 THEN
    RETURN;
  END IF;
  SELECT * INTO admitted
    FROM vcode_fraud_admit(p_prefix, p_country, p_attribution, p_now, p_minute, p_from,
      p_judged_before, p_enforce, p_attribution_ttl_ms, p_counters_ms, p_send_token);
  o_block := admitted.o_block;
  IF admitted.o_refused THEN
    PERFORM vcode_undo_issue(p_phone, p_purpose, o_digest, o_sent_at_ms, o_deliveries, p_token,
      o_previous_digest, o_previous_sealed, o_previous_sent_at_ms, o_previous_expires_at_ms,
      p_verification);
    o_kind := -4;
    RETURN;
  END IF;
  o_prefix := admitted.o_prefix;
  o_service := admitted.o_service;
  o_previous := admitted.o_previous;
  o_previous_token := admitted.o_previous_token;
END $$;
