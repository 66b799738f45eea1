-- Undo an issue whose SMS was not sent. Its event leaves the phone's SMS log in any case; the
-- code hash is restored only while it still holds exactly what that issue wrote (same code
-- digest, send time and delivery count): a later send's code is never touched.
-- The send's verification goes too: its id was never handed out (its target, on a Cluster under
-- another hash tag, is left to expire: without this record it leads nowhere).
-- KEYS[1] code hash, KEYS[2] the phone's SMS log, KEYS[3] the send's verification
-- ARGV[1] digest, ARGV[2] sent_at_ms, ARGV[3] deliveries written by the issue, ARGV[4] quota
-- token; ARGV[5..7] previous record, sent_at_ms, expires_at_ms (absent when the issue created
-- the hash: OWN_ARGV is 4)
-- With events on, the outbox's KEYS and ARGV follow (events.lua): the send's events go.
-- Returns 1 if the code was rolled back, 0 if the hash had moved on.
-- A code's record starts with its digest of this many bytes (CodeDigest::LEN; tested).
local DIGEST_BYTES = 16

-- Drops the entries `fields` (space-separated) from the outbox: a send rolled back.
local function outbox_forget(fields)
  if not OUTBOX or not fields then return end
  for field in string.gmatch(fields, '%d+') do
    redis.call('ZREM', OUTBOX.pending, field)
    redis.call('HDEL', OUTBOX.entries, field)
  end
end

redis.call('ZREM', KEYS[2], ARGV[4])
-- The send's outbox entries, and the send the code named as its latest before it (issue.lua).
local send = redis.call('HMGET', KEYS[3], 'o', 'p')
outbox_forget(send[1])
redis.call('DEL', KEYS[3])
local pending = redis.call('HMGET', KEYS[1], 'h', 't', 'n')
if not pending[1] or string.sub(pending[1], 1, DIGEST_BYTES) ~= ARGV[1]
    or tonumber(pending[2]) ~= tonumber(ARGV[2])
    or tonumber(pending[3] or 1) ~= tonumber(ARGV[3]) then
  return 0
end
-- Counted in its own arguments: with events on, the outbox's follow them.
if OWN_ARGV < 5 then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'h', ARGV[5], 't', ARGV[6])
if send[2] then
  redis.call('HSET', KEYS[1], 'v', send[2])
end
local deliveries = tonumber(ARGV[3]) - 1
if deliveries > 1 then
  redis.call('HSET', KEYS[1], 'n', deliveries)
else
  redis.call('HDEL', KEYS[1], 'n')
end
-- An expiry already in the past deletes the hash, as the old code would have expired.
redis.call('PEXPIREAT', KEYS[1], ARGV[7])
return 1
