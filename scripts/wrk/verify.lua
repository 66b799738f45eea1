-- wrk: POST /api/v1/otp/verify: the full verify path (parse, one atomic store step) answering
-- 410 for phones without a pending code.
--   PHONES=n     draw phones from n numbers (default 10^8: nearly every request a new phone,
--                the worst case for the phone-parse cache; 10000 models returning users)
--   CLIENTS=n    X-Forwarded-For from n addresses (common.lua)
--   VERIFY_PATH  another handler with the same body (the thin reference: /verify)
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
package.path = "scripts/wrk/?.lua;" .. package.path
local common = require("common")
setup, init = common.setup, common.init
local path = os.getenv("VERIFY_PATH")
if path == nil or path == "" then path = "/api/v1/otp/verify" end
local spread = tonumber(os.getenv("PHONES") or "") or 100000000
request = function()
  local phone = string.format("+86139%08d", math.random(0, spread - 1))
  return wrk.format("POST", path, common.headers(), '{"phone":"' .. phone .. '","code":"123456"}')
end
