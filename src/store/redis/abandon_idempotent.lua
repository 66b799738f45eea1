-- Free an Idempotency-Key whose first request failed on the server side, only while it still
-- holds that request's running record (its lease may have passed to another request).
-- KEYS[1] the key's record, ARGV[1] the running record as written
-- Returns 1 if freed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
