-- wrk: POST /api/v1/otp/send for a different random phone each request (no cooldown hits).
--   CLIENTS=n    X-Forwarded-For from n addresses (common.lua)
--   SEND_PATH=p  another path for the same body (the thin send's /send-map)
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
package.path = "scripts/wrk/?.lua;" .. package.path
local common = require("common")
setup, init = common.setup, common.init
local path = os.getenv("SEND_PATH")
if path == nil or path == "" then path = "/api/v1/otp/send" end
request = function()
  local phone = string.format("+86138%08d", math.random(0, 99999999))
  return wrk.format("POST", path, common.headers(), '{"phone":"' .. phone .. '"}')
end
