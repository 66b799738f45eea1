-- wrk: POST /v2/Services/{TWILIO_SERVICE}/Verifications (Twilio Verify's start) for a
-- different random phone each request, as send.lua does for /api/v1/otp/send.
--   TWILIO_SERVICE  the Service's SID; TWILIO_AUTH  base64 of "AccountSid:AuthToken"
--   CLIENTS=n       X-Forwarded-For from n addresses (common.lua)
package.path = "scripts/wrk/?.lua;" .. package.path
local common = require("common")
setup, init = common.setup, common.init
local path = "/v2/Services/" .. os.getenv("TWILIO_SERVICE") .. "/Verifications"
local auth = "Basic " .. os.getenv("TWILIO_AUTH")
request = function()
  local headers = common.headers()
  headers["Content-Type"] = "application/x-www-form-urlencoded"
  headers["Authorization"] = auth
  local phone = string.format("%%2B86138%08d", math.random(0, 99999999))
  return wrk.format("POST", path, headers, "To=" .. phone .. "&Channel=sms")
end
