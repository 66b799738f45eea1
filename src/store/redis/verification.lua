-- Read a verification (and with ARGV[1] 'cancel', cancel it while pending; with 'unconfirmed',
-- record that its SMS is unconfirmed). Whether it is still pending is worked out here, against
-- the code hash, in the same step as a cancel.
-- KEYS[1] the code hash of its (phone, purpose), KEYS[2] the verification (issue.lua), KEYS[3]
-- its name before (verification_prelude.lua); with events on, the outbox's KEYS and ARGV
-- follow (events.lua)
-- Returns {} when there is no such verification, else {now, digest_bound (1/0), c, e, a, s, d, r}
-- with a, s, d and r '' when absent (d and r: receipt.lua).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local verification_key, verification =
  find_verification(KEYS[2], KEYS[3], 'g', 'c', 'e', 'a', 's', 'd', 'r')
if not verification[1] then
  return {}
end
local bound = binds(verification[1], redis.call('HGET', KEYS[1], 'h'))
if ARGV[1] == 'cancel' and bound and not verification[5] and tonumber(verification[3]) > now then
  redis.call('HSET', verification_key, 's', 'c')
  verification[5] = 'c'
  outbox_append('ended=canceled', now, now, '')
elseif ARGV[1] == 'unconfirmed' then
  redis.call('HSET', verification_key, 'd', 'u')
  verification[6] = 'u'
end
return {now, bound and 1 or 0, verification[2], verification[3], verification[4] or '',
  verification[5] or '', verification[6] or '', verification[7] or ''}
