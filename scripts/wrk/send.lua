-- wrk: POST /api/v1/otp/send for a different random phone each request (no cooldown hits).
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
math.randomseed(os.time())
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local phone = string.format("+86138%08d", math.random(0, 99999999))
  return wrk.format(nil, "/api/v1/otp/send", nil, '{"phone":"' .. phone .. '"}')
end
