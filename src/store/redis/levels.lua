-- The fraud guard's levels: decays each scope's record to now, adds the change, and answers
-- the records after it, packed (levels_count, levels_prelude.lua); for a conversion, remembers the
-- destination as returning.
-- KEYS[1..n]: the scopes' records (`fraud_level`), then the returning key if ARGV[10] ~= '0'.
-- ARGV: 1 now (ms), 2 recent half-life (ms), 3 history half-life (ms), 4/5/6 what the event
-- adds to sends, conversions, undelivered, 7/8/9 the records' life (ttl ms, young ttl ms, young
-- sends), 10 the returning key's ttl (ms, '0': none), 11 '1' if the recent memory takes the
-- change too, '0' if the history alone does (a refused send taken back).
-- Returns the scopes' records after the change, concatenated.
local scopes = #KEYS
if ARGV[10] ~= '0' then
  scopes = scopes - 1
  redis.call('SET', KEYS[#KEYS], '1', 'PX', ARGV[10])
end
local add = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}
return levels_count(1, scopes, tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), add,
  {ARGV[7], ARGV[8], ARGV[9]}, ARGV[11] == '0' and {0, 0, 0} or add)
