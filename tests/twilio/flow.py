"""The Twilio Verify flow through the unmodified official Python SDK (PyPI `twilio`), against a
live vcode: run by `cargo test --test api twilio_sdk`.

usage: flow.py VERIFY_BASE_URL VCODE_URL ACCOUNT_SID AUTH_TOKEN API_KEY_SID API_KEY_SECRET CODE_TTL_SECS

VERIFY_BASE_URL is where the SDK sends its requests (vcode itself, or Prism in front of it);
VCODE_URL is vcode's own address, for its dev inbox (the SMS and mail "sent"). Only the base URL and the
credentials differ from an application written against Twilio. Prints one line per step and
exits non-zero at the first step that does not behave as on Twilio.
"""

import random
import sys
import time

import sdk_flow

base_url, vcode_url, account_sid, auth_token, key_sid, key_secret, ttl = sys.argv[1:8]
ttl = int(ttl)


def client(user, secret, account=None):
    return sdk_flow.client(base_url, user, secret, account)


def sms_codes(to, service_sid):
    return sdk_flow.codes(vcode_url, service_sid, phone=to)


def mail_codes(to, service_sid):
    return sdk_flow.codes(vcode_url, service_sid, email=to)


refused = sdk_flow.Refusals()
phone, step = sdk_flow.phone, sdk_flow.step

twilio = client(account_sid, auth_token)

service = twilio.verify.v2.services.create(friendly_name="vcode SDK test", code_length=4)
assert service.sid.startswith("VA") and len(service.sid) == 34, service.sid
assert service.account_sid == account_sid and service.code_length == 4
service = twilio.verify.v2.services(service.sid).update(do_not_share_warning_enabled=True)
assert service.do_not_share_warning_enabled is True and service.friendly_name == "vcode SDK test"
assert service.sid in [s.sid for s in twilio.verify.v2.services.list()]
assert twilio.verify.v2.services(service.sid).fetch().code_length == 4
step("service", sid=service.sid)
verify = twilio.verify.v2.services(service.sid)

# Start, a wrong code (pending), the right one (approved), fetch.
to = phone()
started = verify.verifications.create(to=to, channel="sms")
assert started.sid.startswith("VE") and started.status == "pending" and started.to == to
assert started.valid is False and len(started.send_code_attempts) == 1
[code] = sms_codes(to, service.sid)
assert len(code) == 4, code
wrong = "0000" if code != "0000" else "1111"
check = verify.verification_checks.create(to=to, code=wrong)
assert (check.status, check.valid, check.sid) == ("pending", False, started.sid), check.status
check = verify.verification_checks.create(to=to, code=code)
assert (check.status, check.valid) == ("approved", True), check.status
fetched = verify.verifications(started.sid).fetch()
assert fetched.status == "approved" and fetched.sid == started.sid, fetched.status
refused(lambda: verify.verification_checks.create(to=to, code=code), 20404, 404)
step("approved", verification=started.sid)

# A re-send: the same SID and code, one more send attempt; checked by VerificationSid.
to = phone()
first = verify.verifications.create(to=to, channel="sms")
again = verify.verifications.create(to=to, channel="sms")
assert again.sid == first.sid and len(again.send_code_attempts) == 2, again.send_code_attempts
codes = sms_codes(to, service.sid)
assert len(codes) == 2 and codes[0] == codes[1], codes
check = verify.verification_checks.create(verification_sid=first.sid, code=codes[0])
assert check.status == "approved", check.status
step("resent", verification=first.sid)

# Cancel.
to = phone()
started = verify.verifications.create(to=to, channel="sms")
canceled = verify.verifications(started.sid).update(status="canceled")
assert canceled.status == "canceled", canceled.status
[code] = sms_codes(to, service.sid)
refused(lambda: verify.verification_checks.create(verification_sid=started.sid, code=code), 20404, 404)
assert verify.verifications(started.sid).fetch().status == "canceled"
step("canceled", verification=started.sid)

# Approved without its code (Status=approved).
to = phone()
started = verify.verifications.create(to=to, channel="sms")
approved = verify.verifications(started.sid).update(status="approved")
assert approved.status == "approved", approved.status
step("approved by status", verification=started.sid)

# Max check attempts: five wrong codes end it (60202), the right one no longer works.
to = phone()
started = verify.verifications.create(to=to, channel="sms")
[code] = sms_codes(to, service.sid)
wrong = "0000" if code != "0000" else "1111"
for _ in range(4):
    assert verify.verification_checks.create(to=to, code=wrong).status == "pending"
refused(lambda: verify.verification_checks.create(to=to, code=wrong), 60202, 429)
refused(lambda: verify.verification_checks.create(to=to, code=code), 60202, 429)
assert verify.verifications(started.sid).fetch().status == "max_attempts_reached"
step("max check attempts", verification=started.sid)

# Max send attempts: five sends, the sixth is 60203 and sends nothing.
to = phone()
for attempt in range(5):
    started = verify.verifications.create(to=to, channel="sms")
    assert len(started.send_code_attempts) == attempt + 1
refused(lambda: verify.verifications.create(to=to, channel="sms"), 60203, 429, documented=True)
assert len(sms_codes(to, service.sid)) == 5
step("max send attempts", verification=started.sid)

# By email: the address echoed (its domain lower-cased), a re-send with a ChannelConfiguration
# (accepted, ignored) mails the same code under the same SID, checked by the address in another
# case; a malformed address or a phone on the email channel is an invalid parameter.
to = "Ann.%09d@Example.COM" % random.randrange(1_000_000_000)
started = verify.verifications.create(to=to, channel="email")
assert (started.channel, started.status, started.to) == ("email", "pending", to.split("@")[0] + "@example.com")
assert [a["channel"] for a in started.send_code_attempts] == ["email"], started.send_code_attempts
again = verify.verifications.create(to=to, channel="email", channel_configuration={"from_name": "Acme"})
assert again.sid == started.sid and len(again.send_code_attempts) == 2, again.send_code_attempts
codes = mail_codes(to, service.sid)
assert len(codes) == 2 and codes[0] == codes[1] and len(codes[0]) == 4, codes
check = verify.verification_checks.create(to=to.lower(), code=codes[0])
assert (check.status, check.valid, check.channel, check.sid) == ("approved", True, "email", started.sid)
assert verify.verifications(started.sid).fetch().status == "approved"
refused(lambda: verify.verifications.create(to="ann@", channel="email"), 60200, 400)
refused(lambda: verify.verifications.create(to=phone(), channel="email"), 60200, 400)
refused(lambda: verify.verifications.create(to="ann@example.com", channel="sms"), 60200, 400)
step("email", verification=started.sid)

# Other channels are Twilio's "channel disabled"; a bad number is an invalid parameter.
refused(lambda: verify.verifications.create(to=phone(), channel="call"), 60223, 400)
refused(lambda: verify.verifications.create(to="+1", channel="sms"), 60200, 400)

# An expired verification: its check is not found, its fetch says expired.
to = phone()
started = verify.verifications.create(to=to, channel="sms")
[code] = sms_codes(to, service.sid)
time.sleep(ttl + 1)
refused(lambda: verify.verification_checks.create(to=to, code=code), 20404, 404)
assert verify.verifications(started.sid).fetch().status == "expired"
step("expired", verification=started.sid)

# An API key acts for its account; bad credentials are 20003.
keyed = client(key_sid, key_secret, account_sid)
assert keyed.verify.v2.services(service.sid).fetch().sid == service.sid
refused(lambda: client(account_sid, "0" * 32).verify.v2.services(service.sid).fetch(), 20003, 401)
refused(lambda: client("AC" + "0" * 32, auth_token).verify.v2.services(service.sid).fetch(), 20003, 401)
step("credentials")

twilio.verify.v2.services(service.sid).delete()
refused(lambda: twilio.verify.v2.services(service.sid).fetch(), 20404, 404)
step("deleted", sid=service.sid)
print(f"UNDOCUMENTED ERRORS {refused.undocumented}", flush=True)
print("FLOW OK", flush=True)
