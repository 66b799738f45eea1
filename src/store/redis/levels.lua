-- The fraud guard's levels: decays each scope's record to now, adds the change, and answers
-- the records after it; for a conversion, remembers the destination as returning.
-- Each record is one string, 't rs rc ru hs hc hu': the last change (ms) and the recent and
-- history sends, conversions and undelivered in millionths. Integers: formatting a float
-- ('%.17g') costs Redis several times what an integer's does, and a send writes six per scope;
-- one string is one GET and one SET with its expiry, where a hash took three commands.
-- KEYS[1..n]: the scopes' records (`fraud_level`), then the returning key if ARGV[8] ~= '0'.
-- ARGV: 1 now (ms), 2 recent half-life (ms), 3 history half-life (ms), 4/5/6 what the event
-- adds to sends, conversions, undelivered (in millionths), 7 the records' ttl (ms), 8 the
-- returning key's ttl (ms, '0': none).
-- Returns each scope's record after the change.
local now = tonumber(ARGV[1])
local recent_half, history_half = tonumber(ARGV[2]), tonumber(ARGV[3])
local add = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}
local scopes = #KEYS
if ARGV[8] ~= '0' then
  scopes = scopes - 1
  redis.call('SET', KEYS[#KEYS], '1', 'PX', ARGV[8])
end
local answer = {}
for i = 1, scopes do
  local kept = redis.call('GET', KEYS[i])
  local t, values = now, {0, 0, 0, 0, 0, 0}
  if kept then
    local fields = {string.match(kept, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
    if fields[1] then
      t = tonumber(fields[1])
      for j = 1, 6 do
        values[j] = tonumber(fields[j + 1])
      end
    end
  end
  -- A clock behind the record's (instances differ by a little) decays nothing.
  local age = now - t
  local recent, history = 1, 1
  if age > 0 then
    recent, history = 2 ^ (-age / recent_half), 2 ^ (-age / history_half)
  end
  for j = 1, 3 do
    values[j] = math.floor(values[j] * recent + add[j] + 0.5)
    values[j + 3] = math.floor(values[j + 3] * history + add[j] + 0.5)
  end
  local record = string.format('%d %d %d %d %d %d %d', math.max(now, t), values[1], values[2],
    values[3], values[4], values[5], values[6])
  redis.call('SET', KEYS[i], record, 'PX', ARGV[7])
  answer[i] = record
end
return answer
