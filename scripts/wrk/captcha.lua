-- wrk: a person loading a captcha: POST /api/v1/captcha, then GET its image_url. Requests
-- alternate per thread between creating one and fetching the last created picture.
-- Paths and bodies as in crates/vcode-wire, written out: Lua cannot use the Rust crate.
wrk.headers["Content-Type"] = "application/json"
local image_url = nil
request = function()
  if image_url then
    local url = image_url
    image_url = nil
    return wrk.format("GET", url)
  end
  return wrk.format("POST", "/api/v1/captcha", nil, "")
end
response = function(status, headers, body)
  local url = body:match('"image_url":"([^"]+)"')
  if url then image_url = url end
end
