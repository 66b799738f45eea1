"""Twilio Verify's TOTP factors through the unmodified official Python SDK (PyPI `twilio`),
with PyPI `pyotp` as the user's authenticator app: run by `cargo test --test api twilio_sdk`.

usage: totp.py VERIFY_BASE_URL ACCOUNT_SID AUTH_TOKEN

A Service with Totp.* settings, an Entity, a Factor (`binding.secret` and `binding.uri`, read
by pyotp), its verification by update with AuthPayload (a wrong code leaves it unverified),
Challenges (approved, a replay pending), a lock after five wrong codes, and deletes. Prints
one line per step and exits non-zero at the first that does not behave as on Twilio.
"""

import sys
import time
import uuid

import pyotp

import sdk_flow

base_url, account_sid, auth_token = sys.argv[1:4]
refused, step = sdk_flow.Refusals(), sdk_flow.step
twilio = sdk_flow.client(base_url, account_sid, auth_token)

service = twilio.verify.v2.services.create(
    friendly_name="vcode TOTP test",
    totp_issuer="Acme Co",
    totp_time_step=30,
    totp_code_length=6,
    totp_skew=1,
)
assert service.totp == {"issuer": "Acme Co", "time_step": 30, "code_length": 6, "skew": 1}, service.totp
verify = twilio.verify.v2.services(service.sid)
step("service", sid=service.sid)

identity = str(uuid.uuid4())
entity = verify.entities.create(identity=identity)
assert entity.sid.startswith("YE") and entity.identity == identity, entity.sid
assert verify.entities(identity).fetch().sid == entity.sid
assert identity in [e.identity for e in verify.entities.list()]
step("entity", sid=entity.sid)

factor = verify.entities(identity).new_factors.create(friendly_name="Alice's phone", factor_type="totp")
assert factor.sid.startswith("YF") and factor.status == "unverified", factor.status
assert factor.factor_type == "totp" and factor.entity_sid == entity.sid
app = pyotp.parse_uri(factor.binding["uri"])
assert app.secret == factor.binding["secret"] and len(app.secret) >= 32, factor.binding
assert (app.issuer, app.name, app.digits, app.interval) == ("Acme Co", "Alice's phone", 6, 30)
assert factor.config == {"alg": "sha1", "skew": 1, "code_length": 6, "time_step": 30}, factor.config
fetched = verify.entities(identity).factors(factor.sid).fetch()
assert fetched.status == "unverified" and not getattr(fetched, "binding", None), "the secret once"
step("factor", sid=factor.sid)

# Early in a step, so that the codes computed stay in theirs while they are typed.
while time.time() % 30 > 18:
    time.sleep(0.2)
now = time.time()
code = lambda offset: app.at(now + offset)
wrong = "000000" if code(0) != "000000" else "111111"
factor = verify.entities(identity).factors(factor.sid).update(auth_payload=wrong)
assert factor.status == "unverified", factor.status
factor = verify.entities(identity).factors(factor.sid).update(auth_payload=code(-30))
assert factor.status == "verified", factor.status
step("verified", sid=factor.sid)

challenges = verify.entities(identity).challenges
approved = challenges.create(factor_sid=factor.sid, auth_payload=code(0))
assert approved.sid.startswith("YC") and approved.status == "approved", approved.status
assert approved.factor_sid == factor.sid and approved.factor_type == "totp"
replay = challenges.create(factor_sid=factor.sid, auth_payload=code(0))
assert replay.status == "pending", "a code is accepted once per step"
assert verify.entities(identity).challenges(approved.sid).fetch().status == "approved"
assert {c.sid for c in challenges.list()} == {approved.sid, replay.sid}
refused(lambda: challenges.create(factor_sid="YF" + "0" * 32, auth_payload=code(0)), 20404, 404)
step("challenges", approved=approved.sid)

# Four more wrong codes (the replay was one): the factor locks, even for the right code.
for _ in range(3):
    assert challenges.create(factor_sid=factor.sid, auth_payload=wrong).status == "pending"
refused(lambda: challenges.create(factor_sid=factor.sid, auth_payload=wrong), 20429, 429)
refused(lambda: challenges.create(factor_sid=factor.sid, auth_payload=code(30)), 20429, 429)
step("locked", sid=factor.sid)

assert verify.entities(identity).factors(factor.sid).delete()
refused(lambda: verify.entities(identity).factors(factor.sid).fetch(), 20404, 404)
assert verify.entities(identity).delete()
refused(lambda: verify.entities(identity).fetch(), 20404, 404)
step("deleted", identity=identity)
print(f"UNDOCUMENTED ERRORS {refused.undocumented}", flush=True)
print("FLOW OK", flush=True)
