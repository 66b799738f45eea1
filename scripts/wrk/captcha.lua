-- wrk: a person loading a captcha: POST /api/v1/captcha, then GET its image_url. Requests
-- alternate per thread between creating one and fetching the last created picture.
--   CLIENTS=n    X-Forwarded-For from n addresses (common.lua)
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
package.path = "scripts/wrk/?.lua;" .. package.path
local common = require("common")
setup, init = common.setup, common.init
local image_url = nil
request = function()
  if image_url then
    local url = image_url
    image_url = nil
    return wrk.format("GET", url, common.headers())
  end
  return wrk.format("POST", "/api/v1/captcha", common.headers(), "")
end
response = function(status, headers, body)
  local url = body:match('"image_url":"([^"]+)"')
  if url then image_url = url end
end
