-- wrk: POST /api/v1/otp/verify for random phones: the full verify path (parse, one atomic
-- store step) answering 410 for phones without a pending code.
math.randomseed(os.time())
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local phone = string.format("+86139%08d", math.random(0, 99999999))
  return wrk.format(nil, "/api/v1/otp/verify", nil, '{"phone":"' .. phone .. '","code":"123456"}')
end
