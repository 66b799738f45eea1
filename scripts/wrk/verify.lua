-- wrk: POST /api/v1/otp/verify: the full verify path (parse, one atomic store step) answering
-- 410 for phones without a pending code.
--   PHONES=n     draw phones from n numbers (default 10^8: nearly every request a new phone,
--                the worst case for the phone-parse cache; 10000 models returning users)
--   VERIFY_PATH  another handler with the same body (the thin reference: /verify)
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
math.randomseed(os.time())
local path = os.getenv("VERIFY_PATH")
if path == nil or path == "" then path = "/api/v1/otp/verify" end
local spread = tonumber(os.getenv("PHONES") or "") or 100000000
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local phone = string.format("+86139%08d", math.random(0, spread - 1))
  return wrk.format(nil, path, nil, '{"phone":"' .. phone .. '","code":"123456"}')
end
