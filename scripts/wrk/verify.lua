-- wrk: POST /api/v1/otp/verify for random phones: the full verify path (parse, one atomic
-- store step) answering 410 for phones without a pending code.
-- VERIFY_PATH points it at another handler with the same body (the thin reference).
math.randomseed(os.time())
local path = os.getenv("VERIFY_PATH")
if path == nil or path == "" then path = "/api/v1/otp/verify" end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local phone = string.format("+86139%08d", math.random(0, 99999999))
  return wrk.format(nil, path, nil, '{"phone":"' .. phone .. '","code":"123456"}')
end
