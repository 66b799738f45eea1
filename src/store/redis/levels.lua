-- The fraud guard's levels: decays each scope's record to now, adds the change, and answers
-- the records after it; for a conversion, remembers the destination as returning.
-- KEYS[1..n]: the scopes' records (`fraud_level`), then the returning key if ARGV[8] ~= '0'.
-- ARGV: 1 now (ms), 2 recent half-life (ms), 3 history half-life (ms), 4/5/6 what the event
-- adds to sends, conversions, undelivered, 7 the records' ttl (ms), 8 the returning key's ttl
-- (ms, '0': none).
-- Returns one string per scope: 'rs,rc,ru,hs,hc,hu' (each '%.17g': exact as Rust reads it).
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
  local kept = redis.call('HMGET', KEYS[i], 't', 'rs', 'rc', 'ru', 'hs', 'hc', 'hu')
  local t = tonumber(kept[1]) or now
  -- A clock behind the record's (instances differ by a little) decays nothing.
  local age = math.max(now - t, 0)
  local factors = {2 ^ (-age / recent_half), 2 ^ (-age / history_half)}
  local values = {}
  for j = 1, 6 do
    local factor = factors[math.floor((j - 1) / 3) + 1]
    values[j] = (tonumber(kept[j + 1]) or 0) * factor + add[(j - 1) % 3 + 1]
    values[j] = string.format('%.17g', values[j])
  end
  redis.call('HSET', KEYS[i], 't', string.format('%d', math.max(now, t)), 'rs', values[1],
    'rc', values[2], 'ru', values[3], 'hs', values[4], 'hc', values[5], 'hu', values[6])
  redis.call('PEXPIRE', KEYS[i], ARGV[7])
  answer[i] = table.concat(values, ',')
end
return answer
