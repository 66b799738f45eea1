"""An account's Safe List through the unmodified official Python SDK (PyPI `twilio`), against a
live vcode: run by `cargo test --test api safe_list`.

usage: safe_list.py VERIFY_BASE_URL VCODE_URL ACCOUNT_SID AUTH_TOKEN OTHER_ACCOUNT_SID OTHER_AUTH_TOKEN

The test holds the prefix +86150 back (the fraud guard refuses its sends) before it runs this.
A number the first account adds to its Safe List is then served to that account's starts, and
to no one else's (the second account's, a browser's on /api/v1); only whole E.164 numbers are
taken; removed, the number is refused again. Prints one line per step and exits non-zero at
the first step that does not behave as described.
"""

import json
import random
import sys
import urllib.error
import urllib.request

import sdk_flow

base_url, vcode_url, one_sid, one_token, other_sid, other_token = sys.argv[1:7]
refused, step = sdk_flow.Refusals(), sdk_flow.step

one = sdk_flow.client(base_url, one_sid, one_token)
other = sdk_flow.client(base_url, other_sid, other_token)
own_service = one.verify.v2.services.create(friendly_name="vcode safe list")
other_service = other.verify.v2.services.create(friendly_name="vcode safe list")


def start(client, service, to):
    return client.verify.v2.services(service.sid).verifications.create(to=to, channel="sms")


def browser_send(to):
    """The code of vcode's own send API's answer for `to` (a browser's send)."""
    request = urllib.request.Request(vcode_url + "/api/v1/otp/send", data=json.dumps({"phone": to}).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)["code"]
    except urllib.error.HTTPError as error:
        return json.load(error)["code"]


number = "+86150%08d" % random.randrange(100_000_000)
refused(lambda: start(one, own_service, number), 60410, 403)
step("held", to=number)

entry = one.verify.v2.safelist.create(phone_number=number)
assert entry.sid.startswith("GN") and len(entry.sid) == 34, entry.sid
assert entry.phone_number == number and entry.url.endswith("/v2/SafeList/Numbers/" + number), entry.url
fetched = one.verify.v2.safelist(number).fetch()
assert (fetched.sid, fetched.phone_number) == (entry.sid, number), fetched.sid
again = one.verify.v2.safelist.create(phone_number=number)
assert again.sid == entry.sid
step("added", sid=entry.sid)

started = start(one, own_service, number)
assert started.status == "pending" and started.to == number, started.status
assert len(sdk_flow.codes(vcode_url, own_service.sid, phone=number)) == 1
step("exempt for its account", verification=started.sid)

refused(lambda: start(other, other_service, number), 60410, 403)
refused(lambda: other.verify.v2.safelist(number).fetch(), 20404, 404)
refused(lambda: other.verify.v2.safelist(number).delete(), 20404, 404)
assert browser_send(number) == 40300
step("not for another account nor a browser")

for bad in ["+86150", number[1:], "+1", "+86 150 0000 0000"]:
    refused(lambda: one.verify.v2.safelist.create(phone_number=bad), 60200, 400)
step("whole E.164 numbers only")

assert one.verify.v2.safelist(number).delete() is True
refused(lambda: one.verify.v2.safelist(number).fetch(), 20404, 404)
refused(lambda: one.verify.v2.safelist(number).delete(), 20404, 404)
refused(lambda: start(one, own_service, number), 60410, 403)
step("removed")

one.verify.v2.services(own_service.sid).delete()
other.verify.v2.services(other_service.sid).delete()
print(f"UNDOCUMENTED ERRORS {refused.undocumented}", flush=True)
print("FLOW OK", flush=True)
