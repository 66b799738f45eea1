-- An outbox entry (events.lua) as its fields, and back.
local function entry_fields(entry)
  local fields = {}
  for value in string.gmatch(entry .. '|', '([^|]*)|') do fields[#fields + 1] = value end
  return fields
end

local function entry_of(fields)
  return table.concat(fields, '|')
end

local function clock_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
