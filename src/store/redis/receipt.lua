-- Apply a delivery receipt to a verification (the one issue.lua writes): its delivery moves only
-- forward (unconfirmed < sent < delivered | undelivered), so a repeat or a late `sent` changes
-- nothing, and the first final word stays. One step: of two racing receipts one changes it.
-- KEYS[1] the verification {d = '' sent, 'u' unconfirmed, 'd' delivered, 'x' undelivered,
--         r = the provider's error code}, KEYS[2] its name before (verification_prelude.lua)
-- KEYS[3] today's delivery counts (keys::delivery_counts: the phone's slot on a Cluster)
-- ARGV[1] the receipt's delivery ('' sent, 'd', 'x'), ARGV[2] its error code or '',
-- ARGV[3] the counts' field without its last letter ('<hour> <provider> <country> '),
-- ARGV[4] how long the counts are kept (ms)
-- (then the outbox's, events.lua)
-- Returns {} when the verification is gone, {0} when nothing changed, else
--         {1, previous delivery, created (ms), now (ms)}.
local verification_key, verification = find_verification(KEYS[1], KEYS[2], 'c', 'd')
if not verification[1] then
  return {}
end
local rank = {u = 0, [''] = 1, d = 2, x = 2}
local previous = verification[2] or ''
if rank[ARGV[1]] <= rank[previous] then
  return {0}
end
if ARGV[1] == '' then
  redis.call('HDEL', verification_key, 'd')
else
  redis.call('HSET', verification_key, 'd', ARGV[1])
end
if ARGV[2] ~= '' then
  redis.call('HSET', verification_key, 'r', ARGV[2])
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- The fact of a final word (its detail is the caller's), in this step: only a change records one.
-- It counts in the delivery rate, in this step too.
local fact = ({d = 'delivery=delivered', x = 'delivery=undelivered'})[ARGV[1]]
if fact then
  outbox_append(fact, now, now)
  redis.call('HINCRBY', KEYS[3], ARGV[3] .. ARGV[1], '1')
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
return {1, previous, verification[1], now}
