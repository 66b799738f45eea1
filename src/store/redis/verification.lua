-- Read a verification (and with ARGV[1] 'cancel', cancel it while pending; with 'unconfirmed',
-- record that its SMS is unconfirmed). Whether it is still pending is worked out here, against
-- the code hash, in the same step as a cancel.
-- KEYS[1] the code hash of its (phone, purpose), KEYS[2] the verification (issue.lua); with
-- events on, the outbox's KEYS and ARGV follow (events.lua)
-- Returns {} when there is no such verification, else {now, digest_bound (1/0), c, e, a, s, d, r}
-- with a, s, d and r '' when absent (d and r: receipt.lua).
-- A code's record starts with its digest of this many bytes (CodeDigest::LEN; tested).
local DIGEST_BYTES = 16
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local verification = redis.call('HMGET', KEYS[2], 'g', 'c', 'e', 'a', 's', 'd', 'r')
if not verification[1] then
  return {}
end
local record = redis.call('HGET', KEYS[1], 'h')
local bound = record and string.sub(record, 1, DIGEST_BYTES) == verification[1]
if ARGV[1] == 'cancel' and bound and not verification[5] and tonumber(verification[3]) > now then
  redis.call('HSET', KEYS[2], 's', 'c')
  verification[5] = 'c'
  outbox_append('ended=canceled', now, now, '')
elseif ARGV[1] == 'unconfirmed' then
  redis.call('HSET', KEYS[2], 'd', 'u')
  verification[6] = 'u'
end
return {now, bound and 1 or 0, verification[2], verification[3], verification[4] or '',
  verification[5] or '', verification[6] or '', verification[7] or ''}
