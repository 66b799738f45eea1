"""What the SDK flows (flow.py, tenants.py) share: a Twilio client aimed at vcode (or Prism in
front of it), test phones, the codes vcode "sent" (dev mode's outbox), and the count of the
error answers a flow provokes on purpose whose HTTP status Twilio's OpenAPI description does
not list for the operation (it lists none but 429 on a start): a validating proxy reports each,
and only those."""

import json
import random
import urllib.parse
import urllib.request

from twilio.base.exceptions import TwilioRestException
from twilio.rest import Client


def client(base_url, user, secret, account=None):
    twilio = Client(user, secret, account)
    twilio.verify.base_url = base_url
    return twilio


def phone():
    return "+86138%08d" % random.randrange(100_000_000)


def codes(vcode_url, service_sid, **destination):
    """The codes vcode sent to `phone=` or `email=` for the Service, oldest first."""
    url = vcode_url + "/api/v1/dev/inbox?" + urllib.parse.urlencode(destination)
    with urllib.request.urlopen(url, timeout=10) as answer:
        messages = json.load(answer)["data"]["messages"]
    purpose = "va" + service_sid[2:32].lower()
    return [m["code"] for m in messages if m["purpose"] == purpose]


class Refusals:
    """Calls that must fail with a Twilio error, and how many of them were undocumented."""

    def __init__(self):
        self.undocumented = 0

    def __call__(self, call, code, status, documented=False):
        try:
            call()
        except TwilioRestException as error:
            assert (error.code, error.status) == (code, status), (error.code, error.status, error.msg)
            self.undocumented += 0 if documented else 1
            return error
        raise AssertionError(f"expected Twilio error {code}")


def step(name, **facts):
    print(json.dumps({"step": name, **facts}), flush=True)
