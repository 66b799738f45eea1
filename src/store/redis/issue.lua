-- Issue a code for one (phone, purpose): create it, or apply the resend policy to the pending
-- one once its cooldown has passed, within the phone's SMS quota. One step, so concurrent
-- sends make exactly one code and one SMS. The hash holds the code's record: its keyed digest
-- and, for the `reuse` policy, the code sealed by the service: never the code.
-- KEYS[1] code hash {h = record (digest, then sealed code), a = failed attempts (absent: 0),
--         n = deliveries (absent: 1), t = last sent (ms), v = the id of the latest send that
--         delivered it, only where verifies by phone may come (they end that verification and
--         emit its events)};
--         fields at their default are left out, which keeps a pending code within one small
--         allocation
-- KEYS[2] the phone's SMS log (quota.lua)
-- KEYS[3] this send's verification {g = the first ARGV[12] bytes of the digest of the code
--         it delivers (8: it binds, the code's own digest is what verifies compare; 16 where
--         older instances read it), c = created (ms), e = its code's expiry (ms), p = the send
--         the code named as its latest before (a resend's), later a = failed attempts, s = how
--         it ended, d = 'u' for an unconfirmed SMS}: the id's own attempt budget, under the
--         phone's hash tag (`…:v:<id>`, or with older instances `…:verification:<id>`)
-- KEYS[4] on one node only (ARGV[8] not empty): the id's target, `<E.164> <purpose>`, the one
--         record a verify by id reads before this phone's script (on a Cluster it has its own
--         hash tag, so the caller writes it)
-- KEYS[5..] (one node only) the send's other budgets' logs (the client's, the global one):
--         reserved in this same step, so a send is one round trip and a refusal by any limit
--         records nothing anywhere
-- then (one node only, ARGV[10] = '1' or '2') the fraud guard's one key, its blocks hash
--         (fraud.rs): its step is taken here too, refusing a send that would issue if its
--         prefix's block is active and enforced, before anything is written (no refusal is
--         counted here: the traffic report is the instance's to flush); then with ARGV[10] =
--         '2' the levels' keys, whose records count only a send that issues (a double submit
--         answered by the cooldown is no send)
-- ARGV[1] candidate record, ARGV[2] TTL ms, ARGV[3] cooldown ms, ARGV[4] 'reuse' | 'rotate',
-- ARGV[5] quota token, ARGV[6] not after (unix ms: the caller has given up by then),
-- ARGV[7] how long the verification outlives the code's TTL (ms), ARGV[8] its target or '',
-- ARGV[9] how many phone rule numbers follow (n), ARGV[10] '1' with the guard's step, '2' with
-- its levels too (their keys and one argument after the guard's), else '0',
-- ARGV[11] this send's verification id for the code's `v`, or '' (verifies by id only),
-- ARGV[12] how many bytes of the code's digest bind the verification (`g`),
-- ARGV[13..12+n] the phone's quota rules,
-- ARGV[13+n] the budgets' token, then for each budget the number of its rules followed by
--         those rules, then with the guard its one argument, '<enforce 0|1><prefix>' (one byte
--         and one sub to read: the block is compared with this script's own clock), then with
--         the levels theirs
-- With a companion record (a Twilio-compatible first start's send log), its key follows the
-- script's own KEYS and its value, its TTL (ms) and 'companion' the own ARGV: it is created
-- with the code only if the issue delivers, and if it is there already nothing is written.
-- With events on, the outbox's KEYS and ARGV follow those (events.lua).
-- Returns {-2} when run too late (nothing written: a send its caller already answered with a
--         timeout must leave no code, cooldown or quota event behind),
--         {-4, block} when the guard refuses the send (nothing written),
--         {0, retry_after_ms} while cooling down, {-1, retry_after_ms} over quota,
--         {-3, i, retry_after_ms} when the i-th budget is the first without room,
--         {-5} when the companion record is there already, or
--         {1, sent_at_ms} when created (the record is the caller's ARGV[1]), or
--         {kind, record, sent_at_ms, deliveries, previous_record, previous_sent_at_ms,
--          previous_expires_at_ms} with kind 2 redelivered, 3 rotated; followed with the
--         guard by the prefix's block record (JSON, active only if not enforced) or '', and
--         with its levels by their records after the send (packed, levels_prelude.lua), each
--         '' when not asked for; a delivery's values packed in one string (`delivered`), the
--         other replies an array.
-- A code's record starts with its digest of this many bytes (CodeDigest::LEN; tested).
local DIGEST_BYTES = 16
local time = redis.call('TIME')
local now = num(time[1]) * 1000 + math.floor(num(time[2]) / 1000)
if now > num(ARGV[6]) then
  return {-2}
end
local phone_last = 12 + num(ARGV[9])
local rules = quota_rules(13, phone_last)
local budget_token = ARGV[phone_last + 1]
local with_target = ARGV[8] ~= ''
local binding_bytes = num(ARGV[12])
if binding_bytes < 8 or binding_bytes > DIGEST_BYTES then
  return redis.error_reply('issue.lua: a binding of ' .. ARGV[12] .. ' bytes')
end
-- The companion record, if any, ends the script's own KEYS and ARGV.
local companion
if ARGV[OWN_ARGV] == 'companion' then
  companion = {key = KEYS[OWN_KEYS], value = ARGV[OWN_ARGV - 2], ttl = ARGV[OWN_ARGV - 1]}
  OWN_KEYS, OWN_ARGV = OWN_KEYS - 1, OWN_ARGV - 3
  if redis.call('EXISTS', companion.key) == 1 then
    return {-5}
  end
end
-- The guard's key and argument end the script's own (before the outbox's); with its levels
-- (ARGV[10] = '2'), the levels' keys and their one argument (`n now recent_half history_half
-- ttl young_ttl young_sends`, packed) come last.
local guarded = ARGV[10] ~= '0'
local guard_keys = OWN_KEYS
local guard_enforce, guard_prefix
local levels
if ARGV[10] == '2' then
  -- Seven little-endian doubles: one `struct.unpack` where seven numbers written as text cost
  -- Redis a `strtod` each (about 9k instructions a send).
  if #ARGV[OWN_ARGV] ~= 56 then
    return redis.error_reply('fraud guard: malformed levels')
  end
  local n, at, recent_half, history_half, ttl, young_ttl, young_sends =
    struct.unpack('<ddddddd', ARGV[OWN_ARGV])
  levels = {n = n, now = at, recent_half = recent_half, history_half = history_half,
    life = {ttl, young_ttl, young_sends}, first = OWN_KEYS - n + 1}
  OWN_KEYS, OWN_ARGV = OWN_KEYS - levels.n, OWN_ARGV - 1
  guard_keys = OWN_KEYS
end
if guarded then
  -- KEYS[guard_keys + 1], the blocks; ARGV[OWN_ARGV], '<enforce 0|1><prefix>'.
  guard_keys = OWN_KEYS - 1
  local step = ARGV[OWN_ARGV] or ''
  if #step < 2 then
    return redis.error_reply('fraud guard: a malformed step')
  end
  guard_enforce = string.byte(step, 1) == 49
  guard_prefix = string.sub(step, 2)
end
local budgets = quota_budgets(with_target and 5 or 4, phone_last + 2, guard_keys)

-- The prefix's block record, if any, once the guard has looked (below).
local guard_block
-- The reply of a send that delivers, with the prefix's block record (or '') when the guard
-- takes its step and the levels' records after the send when it counts them: packed in one
-- string, each value a tag and its bytes ('i' and a little-endian 8-byte integer, 's' and a
-- little-endian 4-byte length and the string). The client parses one string for a quarter of
-- what an array of these values cost it (4.5k instructions a send, redis-rs's parser;
-- callgrind, 2026-12-07). A new code's reply, the common one, is one `struct.pack` of a
-- constant format, its block and levels '' when not asked for: a pack and a concatenation a
-- value cost Redis 10k instructions a send, a pack of a format built for the reply 22k.
local function delivered(reply)
  local block, counted = '', ''
  if guarded then
    block = guard_block or ''
    if levels then
      -- The send counted in its levels: their records after it, packed.
      counted = levels_count(levels.first, levels.n, levels.now, levels.recent_half,
        levels.history_half, {1, 0, 0}, levels.life)
    end
  end
  if #reply == 2 then
    return struct.pack('<c1i8c1i8c1I4c0c1I4c0', 'i', reply[1], 'i', reply[2], 's', #block,
      block, 's', #counted, counted)
  end
  reply[#reply + 1] = block
  reply[#reply + 1] = counted
  for i = 1, #reply do
    local value = reply[i]
    if type(value) == 'number' then
      reply[i] = struct.pack('<c1i8', 'i', value)
    else
      reply[i] = struct.pack('<c1I4c0', 's', #value, value)
    end
  end
  return table.concat(reply)
end

-- The send's verification, bound to the code it delivers (whose record starts with its digest).
local function bind_verification(record)
  local ttl = num(ARGV[2])
  -- As text: a Lua number passed to redis.call is written with '%.17g', whose floating-point
  -- path cost Redis 4k instructions a send here (callgrind, 2026-12-07).
  local keep = int(ttl + num(ARGV[7]))
  redis.call('HSET', KEYS[3], 'g', string.sub(record, 1, binding_bytes), 'c', int(now),
    'e', int(now + ttl))
  redis.call('PEXPIRE', KEYS[3], keep)
  if with_target then
    redis.call('SET', KEYS[4], ARGV[8], 'PX', keep)
  end
  -- Its events: created, and the timer that tells at its expiry whether it expired unused.
  if OUTBOX then
    local expires = now + ttl
    local created = outbox_append('created', now, now,
      'expires_at_ms=' .. int(expires))
    local timer = outbox_append('expiry_due', now, expires, '')
    redis.call('HSET', KEYS[3], 'o', created .. ' ' .. timer)
  end
end

-- The code names this send's id (`v`) where verifies by phone may end its verification; the
-- send's verification keeps the one it named before (`p`), for undo_issue.lua to name again.
local function name_latest_send(before)
  if ARGV[11] ~= '' then
    redis.call('HSET', KEYS[1], 'v', ARGV[11])
    if before then
      redis.call('HSET', KEYS[3], 'p', before)
    end
  end
end

local pending = redis.call('HMGET', KEYS[1], 'h', 'n', 't', 'v')
if pending[1] then
  local wait = tonumber(pending[3]) + num(ARGV[3]) - now
  if wait > 0 then
    return {0, wait}
  end
end
local wait = quota_wait(KEYS[2], now, rules)
if wait > 0 then
  return {-1, wait}
end
local refused, budget_wait = quota_budgets_wait(budgets, now)
if refused > 0 then
  return {-3, refused, budget_wait}
end
-- The guard refuses only a send that would issue, as where its step follows the issue; the
-- record is decoded only when it could refuse (a blocked prefix is rare).
if guarded then
  guard_block = redis.call('HGET', KEYS[guard_keys + 1], guard_prefix)
  if guard_block and guard_enforce and cjson.decode(guard_block).until_ms > now then
    return {-4, guard_block}
  end
end
quota_record(KEYS[2], now, rules, ARGV[5])
quota_budgets_record(budgets, now, budget_token)
if companion then
  redis.call('SET', companion.key, companion.value, 'PX', companion.ttl)
end

if pending[1] then
  local expires_at = now + redis.call('PTTL', KEYS[1])
  local record, kind = pending[1], 2
  if ARGV[4] == 'rotate' then
    record, kind = ARGV[1], 3
  end
  local deliveries = tonumber(pending[2] or 1) + 1
  redis.call('HSET', KEYS[1], 'h', record, 'n', int(deliveries), 't', int(now))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  bind_verification(record)
  name_latest_send(pending[4])
  return delivered({kind, record, now, deliveries, pending[1], tonumber(pending[3]), expires_at})
end

redis.call('HSET', KEYS[1], 'h', ARGV[1], 't', int(now))
name_latest_send(nil)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
bind_verification(ARGV[1])
return delivered({1, now})
