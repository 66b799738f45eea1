-- wrk: POST /api/v1/otp/verify: the full verify path for a code that is not there: by a
-- random verification_id (the default VCODE_VERIFY_BY=id: the id's lookup, 404), or by phone
-- (VCODE_VERIFY_BY=phone, and builds before ids, which ignore the id: one atomic step, 410).
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
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
-- 22 URL-safe base64 characters that decode to 128 bits, as the service's ids are: the last
-- character carries 2 bits and 4 zero bits (A, Q, g or w), else the id is refused unread.
local function random_id()
  local chars = {}
  for i = 1, 21 do
    local n = math.random(1, 64)
    chars[i] = alphabet:sub(n, n)
  end
  local last = math.random(0, 3) * 16 + 1
  chars[22] = alphabet:sub(last, last)
  return table.concat(chars)
end
request = function()
  local phone = string.format("+86139%08d", math.random(0, spread - 1))
  return wrk.format("POST", path, common.headers(),
    '{"phone":"' .. phone .. '","code":"123456","verification_id":"' .. random_id() .. '"}')
end
