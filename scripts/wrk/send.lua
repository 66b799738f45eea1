-- wrk: POST /api/v1/otp/send for a different random phone each request (no cooldown hits).
--   CLIENTS=n    X-Forwarded-For from n addresses (common.lua)
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
package.path = "scripts/wrk/?.lua;" .. package.path
local common = require("common")
setup, init = common.setup, common.init
request = function()
  local phone = string.format("+86138%08d", math.random(0, 99999999))
  return wrk.format("POST", "/api/v1/otp/send", common.headers(), '{"phone":"' .. phone .. '"}')
end
