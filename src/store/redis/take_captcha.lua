-- Take a captcha (GETDEL: of concurrent takers only one gets it); nothing if run after the
-- caller gave up waiting (it answered 503, and its retry must find the captcha).
-- KEYS[1] the captcha, ARGV[1] not after (unix ms)
-- Returns the captcha, false when absent, or -1 when run too late.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if now > tonumber(ARGV[1]) then
  return -1
end
return redis.call('GETDEL', KEYS[1])
