-- wrk: POST /v2/Services/{TWILIO_SERVICE}/VerificationCheck (Twilio Verify's check) of a
-- random VerificationSid that is not there (20404), as verify.lua verifies a random
-- verification_id (404): the same lookup of the id.
--   TWILIO_SERVICE  the Service's SID; TWILIO_AUTH  base64 of "AccountSid:AuthToken"
--   CLIENTS=n       X-Forwarded-For from n addresses (common.lua)
package.path = "scripts/wrk/?.lua;" .. package.path
local common = require("common")
setup, init = common.setup, common.init
local path = "/v2/Services/" .. os.getenv("TWILIO_SERVICE") .. "/VerificationCheck"
local auth = "Basic " .. os.getenv("TWILIO_AUTH")
local hex = "0123456789abcdef"
local function random_sid()
  local digits = {}
  for i = 1, 32 do
    local n = math.random(1, 16)
    digits[i] = hex:sub(n, n)
  end
  return "VE" .. table.concat(digits)
end
request = function()
  local headers = common.headers()
  headers["Content-Type"] = "application/x-www-form-urlencoded"
  headers["Authorization"] = auth
  return wrk.format("POST", path, headers, "VerificationSid=" .. random_sid() .. "&Code=123456")
end
