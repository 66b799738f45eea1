-- The fraud guard's levels: decays each scope's record to now, adds the change, and answers
-- the records after it, packed (levels_count, levels_prelude.lua); for a conversion, remembers the
-- destination as returning.
-- KEYS[1..n]: the scopes' records (`fraud_level`), then the returning key if ARGV[2] ~= '0'.
-- ARGV[1]: nine little-endian doubles, `now recent_half history_half sends conversions
-- undelivered ttl young_ttl young_sends` (ms; what the event adds; the records' life), packed:
-- Redis reads each number written as text with a `strtod` (nine were about 8k instructions of a
-- verified code's). ARGV[2]: the returning key's ttl (ms, as text: it is `SET`'s argument;
-- '0': none). ARGV[3]: '1' if the recent memory takes the change too, '0' if the history alone
-- does (a refused send taken back).
-- Returns the scopes' records after the change, concatenated.
if #ARGV[1] ~= 72 then
  return redis.error_reply('fraud guard: malformed levels')
end
local now, recent_half, history_half, sends, conversions, undelivered, ttl, young_ttl,
  young_sends = struct.unpack('<ddddddddd', ARGV[1])
local scopes = #KEYS
if ARGV[2] ~= '0' then
  scopes = scopes - 1
  redis.call('SET', KEYS[#KEYS], '1', 'PX', ARGV[2])
end
local add = {sends, conversions, undelivered}
return levels_count(1, scopes, now, recent_half, history_half, add,
  {ttl, young_ttl, young_sends}, ARGV[3] == '0' and {0, 0, 0} or add)
