-- The sweep of a Cluster's event outboxes, run on every primary (no KEYS: it reads keys it
-- names, which a script without a shebang may do on its own node, across slots). A slot
-- outbox's tag comes from TAGS (prepended by events.rs: TAGS[slot + 1], keys::slot_tags).
-- Only the slots this node serves that hold any key are looked at (COUNTKEYSINSLOT is O(1)).
-- ARGV[1] 'due' | 'failed' | 'status' | 'delivery', ARGV[2] now (unix ms), ARGV[3] and
-- ARGV[4] the first and last slot looked at (a sweep is a few such calls, so that none holds
-- the node long), for 'delivery' ARGV[5..] the days whose delivery counts to read
-- (keys::delivery_counts, same tags).
-- Returns for 'due' the slots with events placed by now, for 'failed' those with failed
-- events, for 'status' {events placed by now, the oldest one's place or -1, failed events},
-- for 'delivery' the counts' fields and values, one after the other.
local mode, now = ARGV[1], ARGV[2]
local first, last = tonumber(ARGV[3]), tonumber(ARGV[4])
local me = redis.call('CLUSTER', 'MYID')
local found, pending, oldest, failed = {}, 0, -1, 0
for _, range in ipairs(redis.call('CLUSTER', 'SLOTS')) do
  if range[3][3] == me then
    for slot = math.max(range[1], first), math.min(range[2], last) do
      if redis.call('CLUSTER', 'COUNTKEYSINSLOT', slot) > 0 then
        local outbox = 'verify_code:events:{' .. TAGS[slot + 1] .. '}:'
        if mode == 'delivery' then
          for i = 5, #ARGV do
            local day = redis.call('HGETALL', 'verify_code:delivery:{' .. TAGS[slot + 1] .. '}:' .. ARGV[i])
            for _, value in ipairs(day) do
              found[#found + 1] = value
            end
          end
        elseif mode == 'failed' then
          if redis.call('ZCARD', outbox .. 'failed') > 0 then
            found[#found + 1] = slot
          end
        else
          local due = redis.call('ZCOUNT', outbox .. 'pending', '-inf', now)
          if due > 0 then
            found[#found + 1] = slot
            pending = pending + due
            local first = redis.call('ZRANGE', outbox .. 'pending', '0', '0', 'WITHSCORES')
            local place = tonumber(first[2])
            if oldest < 0 or place < oldest then
              oldest = place
            end
          end
          if mode == 'status' then
            failed = failed + redis.call('ZCARD', outbox .. 'failed')
          end
        end
      end
    end
  end
end
if mode == 'status' then
  return {pending, oldest, failed}
end
return found
