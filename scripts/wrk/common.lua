-- Shared by the wrk scripts: a random seed per thread (wrk runs one Lua state per thread;
-- seeded alike, two threads would send the same phones), and the request headers, with
-- X-Forwarded-For from CLIENTS=n addresses (10.x.y.z) when set, as a trusted proxy would add.
local common = {}
local clients = tonumber(os.getenv("CLIENTS") or "")
local counter = 0

function common.setup(thread)
  counter = counter + 1
  thread:set("thread_id", counter)
end

function common.init()
  math.randomseed(os.time() * 1000 + (thread_id or 0))
end

function common.headers()
  local headers = { ["Content-Type"] = "application/json" }
  if clients then
    local n = math.random(0, clients - 1)
    headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
  end
  return headers
end

return common
