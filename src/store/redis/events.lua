-- The event outbox (one node), prepended to every script that changes a verification or a
-- prefix block, so an event is written in the same step as its change. A caller with events on
-- passes the outbox as the last two KEYS (its entries hash, its pending index, tag {events})
-- and, as the last five ARGV, the subject, the phone, the purpose, a detail and 'outbox'; with
-- events off it passes neither and outbox_append writes nothing. A script reads its own KEYS
-- and ARGV up to OWN_KEYS and OWN_ARGV.
-- An entry: the hash field is its seq, 15 digits (the index's order among equal places), the
-- value `due|attempts|delivered_to|lease|fact|subject|phone|purpose|at|place|detail`; the
-- index scores it by its place in its subject's order. Field 'seq' numbers them.
local OUTBOX = nil
local OWN_KEYS, OWN_ARGV = #KEYS, #ARGV
if ARGV[#ARGV] == 'outbox' then
  OUTBOX = {entries = KEYS[#KEYS - 1], pending = KEYS[#KEYS], subject = ARGV[#ARGV - 4],
    phone = ARGV[#ARGV - 3], purpose = ARGV[#ARGV - 2], detail = ARGV[#ARGV - 1]}
  OWN_KEYS, OWN_ARGV = #KEYS - 2, #ARGV - 5
end

-- Appends one fact of the caller's subject (`created`, `ended=approved`…: crate::store::Fact's
-- words; the events module makes the event), placed (and due) at `place`; returns its field.
-- Nothing without an outbox (callers that build a detail check OUTBOX first, to skip that work).
local function outbox_append(fact, at, place, detail)
  if not OUTBOX then return nil end
  local seq = redis.call('HINCRBY', OUTBOX.entries, 'seq', '1')
  local field = string.format('%015d', seq)
  redis.call('ZADD', OUTBOX.pending, string.format('%d', place), field)
  redis.call('HSET', OUTBOX.entries, field, table.concat({string.format('%d', place), '0', '0',
    '0', fact, OUTBOX.subject, OUTBOX.phone, OUTBOX.purpose, string.format('%d', at),
    string.format('%d', place), detail or OUTBOX.detail}, '|'))
  return field
end
