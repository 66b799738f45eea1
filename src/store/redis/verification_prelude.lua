-- Finding a verification, prepended to the scripts that read one (verify, verify_id,
-- verification, receipt). A verification lives under `…{<E.164>}:v:<id>`; builds before
-- 2026-12-07 named it `…{<E.164>}:verification:<id>`, and this one still does with
-- VCODE_REDIS_OLDER_INSTANCES (those instances read nothing else). A reader tries the name of
-- today first: a verification found there costs one read, as before.
-- Returns the key the verification is under (`key` when under neither) and its `fields`
-- (HMGET; the first must be one every verification has).
local function find_verification(key, key_before, ...)
  local found = redis.call('HMGET', key, ...)
  if found[1] then
    return key, found
  end
  local before = redis.call('HMGET', key_before, ...)
  if before[1] then
    return key_before, before
  end
  return key, found
end

-- Whether a verification's binding `g` names the code whose record is `record`: `g` is the
-- first bytes of the code's digest, 8 of them (16 where older instances read it: issue.lua).
local function binds(g, record)
  if not record then return false end
  return string.sub(record, 1, #g) == g
end
