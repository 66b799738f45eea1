-- The fraud guard's levels (issue 39), shared by levels.lua and issue.lua (which counts a send's
-- levels in its own step on one node). Each record is eight little-endian doubles packed in one
-- string (64 bytes): the last change (ms), the recent and the history sends, conversions and
-- undelivered, and when its expiry was last set (ms). Packed, not written as text:
-- `string.match` and `string.format` of seven numbers cost Redis 2.7 µs a record where `struct`
-- costs 0.3 (measured in a loop of EVAL, 2026-12-05), and a send changes five records. Its
-- expiry is set again only once a third of it has passed (`SET ... KEEPTTL` otherwise, 0.55 µs
-- a record cheaper than `PX`): a record lives two to three `ttl` after its last change.
local LEVEL_RECORD = '<dddddddd'

-- Decays each record of KEYS[first..first + n - 1] to `now`, adds `add` (three numbers: sends,
-- conversions, undelivered) to its history and `recent_add` (`add` if nil; nothing for a
-- refused send taken back) to its recent memory, never below 0, keeps it two to three times its
-- life and answers the records after the change, concatenated in one string (n * 64 bytes).
-- `life`: {ttl, young_ttl, young_sends} (ms, ms, sends; numbers): a record whose
-- history holds fewer than `young_sends` sends lives `young_ttl` (RecordLife).
local function levels_count(first, n, now, recent_half, history_half, add, life, recent_add)
  local ttl, young_ttl, young_sends = tonumber(life[1]), tonumber(life[2]), tonumber(life[3])
  recent_add = recent_add or add
  local max = math.max
  local answer = {}
  -- A life as `SET`'s argument, written once a script: Redis writes a number argument with
  -- '%.17g', whose floating-point path cost 2.6k instructions a record set with an expiry.
  local life_text = {}
  local function as_text(ms)
    local text = life_text[ms]
    if not text then
      text = string.format('%d', ms)
      life_text[ms] = text
    end
    return text
  end
  for i = first, first + n - 1 do
    local kept = redis.call('GET', KEYS[i])
    local t, rs, rc, ru, hs, hc, hu, expiry_set = now, 0, 0, 0, 0, 0, 0, nil
    -- Anything else (a record of another layout) starts the scope afresh.
    if kept and #kept == 64 then
      t, rs, rc, ru, hs, hc, hu, expiry_set = struct.unpack(LEVEL_RECORD, kept)
    end
    -- A clock behind the record's (instances differ by a little) decays nothing.
    local age = now - t
    local recent, history = 1, 1
    if age > 0 then
      recent, history = 2 ^ (-age / recent_half), 2 ^ (-age / history_half)
    end
    local kept_sends = hs * history
    local young = kept_sends + add[1] < young_sends
    local life_ms = young and young_ttl or ttl
    -- Set again once a third of it has passed, and at once when the record grows out of the
    -- young's life.
    local refresh = not expiry_set or now - expiry_set >= life_ms / 3
      or (not young and kept_sends < young_sends)
    if refresh then
      expiry_set = now
    end
    local record = struct.pack(LEVEL_RECORD, max(now, t),
      max(rs * recent + recent_add[1], 0), max(rc * recent + recent_add[2], 0),
      max(ru * recent + recent_add[3], 0),
      max(kept_sends + add[1], 0), max(hc * history + add[2], 0), max(hu * history + add[3], 0),
      expiry_set)
    if refresh then
      redis.call('SET', KEYS[i], record, 'PX', as_text(life_ms))
    else
      redis.call('SET', KEYS[i], record, 'KEEPTTL')
    end
    answer[#answer + 1] = record
  end
  return table.concat(answer)
end
