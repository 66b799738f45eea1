// The Twilio Verify flow through the unmodified official Node SDK (npm `twilio`), against a
// live vcode: run by `cargo test --test api twilio_sdk`. The same steps and arguments as
// flow.py (see there); only the base URL and the credentials differ from an application
// written against Twilio.
import assert from "node:assert/strict";
import * as shared from "./sdk_flow.mjs";

const [baseUrl, vcodeUrl, accountSid, authToken, keySid, keySecret, ttlArg] = process.argv.slice(2);
const ttl = Number(ttlArg);

const client = (user, secret, account) => shared.client(baseUrl, user, secret, account);
const smsCodes = (to, serviceSid) => shared.codes(vcodeUrl, serviceSid, { phone: to });
const mailCodes = (to, serviceSid) => shared.codes(vcodeUrl, serviceSid, { email: to });
const refused = shared.refusals();
const { phone, step } = shared;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const tw = client(accountSid, authToken);
let service = await tw.verify.v2.services.create({ friendlyName: "vcode SDK test", codeLength: 4 });
assert.match(service.sid, /^VA[0-9a-f]{32}$/);
assert.equal(service.accountSid, accountSid);
service = await tw.verify.v2.services(service.sid).update({ doNotShareWarningEnabled: true });
assert.equal(service.doNotShareWarningEnabled, true);
assert.ok((await tw.verify.v2.services.list()).some((s) => s.sid === service.sid));
assert.equal((await tw.verify.v2.services(service.sid).fetch()).codeLength, 4);
step("service", { sid: service.sid });
const verify = tw.verify.v2.services(service.sid);

let to = phone();
let started = await verify.verifications.create({ to, channel: "sms" });
assert.equal(started.status, "pending");
assert.equal(started.sendCodeAttempts.length, 1);
let [code] = await smsCodes(to, service.sid);
let wrong = code !== "0000" ? "0000" : "1111";
let check = await verify.verificationChecks.create({ to, code: wrong });
assert.deepEqual([check.status, check.valid, check.sid], ["pending", false, started.sid]);
check = await verify.verificationChecks.create({ to, code });
assert.deepEqual([check.status, check.valid], ["approved", true]);
assert.equal((await verify.verifications(started.sid).fetch()).status, "approved");
await refused(() => verify.verificationChecks.create({ to, code }), 20404, 404);
step("approved", { verification: started.sid });

to = phone();
const first = await verify.verifications.create({ to, channel: "sms" });
const again = await verify.verifications.create({ to, channel: "sms" });
assert.equal(again.sid, first.sid);
assert.equal(again.sendCodeAttempts.length, 2);
let codes = await smsCodes(to, service.sid);
assert.equal(codes.length, 2);
assert.equal(codes[0], codes[1]);
check = await verify.verificationChecks.create({ verificationSid: first.sid, code: codes[0] });
assert.equal(check.status, "approved");
step("resent", { verification: first.sid });

to = phone();
started = await verify.verifications.create({ to, channel: "sms" });
assert.equal((await verify.verifications(started.sid).update({ status: "canceled" })).status, "canceled");
[code] = await smsCodes(to, service.sid);
await refused(() => verify.verificationChecks.create({ verificationSid: started.sid, code }), 20404, 404);
assert.equal((await verify.verifications(started.sid).fetch()).status, "canceled");
step("canceled", { verification: started.sid });

to = phone();
started = await verify.verifications.create({ to, channel: "sms" });
assert.equal((await verify.verifications(started.sid).update({ status: "approved" })).status, "approved");
step("approved by status", { verification: started.sid });

to = phone();
started = await verify.verifications.create({ to, channel: "sms" });
[code] = await smsCodes(to, service.sid);
wrong = code !== "0000" ? "0000" : "1111";
for (let i = 0; i < 4; i++) {
  assert.equal((await verify.verificationChecks.create({ to, code: wrong })).status, "pending");
}
await refused(() => verify.verificationChecks.create({ to, code: wrong }), 60202, 429);
await refused(() => verify.verificationChecks.create({ to, code }), 60202, 429);
assert.equal((await verify.verifications(started.sid).fetch()).status, "max_attempts_reached");
step("max check attempts", { verification: started.sid });

to = phone();
for (let attempt = 0; attempt < 5; attempt++) {
  started = await verify.verifications.create({ to, channel: "sms" });
  assert.equal(started.sendCodeAttempts.length, attempt + 1);
}
await refused(() => verify.verifications.create({ to, channel: "sms" }), 60203, 429, true);
assert.equal((await smsCodes(to, service.sid)).length, 5);
step("max send attempts", { verification: started.sid });

to = `Ann.${String(Math.floor(Math.random() * 1e9)).padStart(9, "0")}@Example.COM`;
started = await verify.verifications.create({ to, channel: "email" });
assert.deepEqual([started.channel, started.status, started.to], ["email", "pending", to.split("@")[0] + "@example.com"]);
assert.deepEqual(started.sendCodeAttempts.map((a) => a.channel), ["email"]);
const resent = await verify.verifications.create({ to, channel: "email", channelConfiguration: { from_name: "Acme" } });
assert.equal(resent.sid, started.sid);
assert.equal(resent.sendCodeAttempts.length, 2);
codes = await mailCodes(to, service.sid);
assert.equal(codes.length, 2);
assert.equal(codes[0], codes[1]);
check = await verify.verificationChecks.create({ to: to.toLowerCase(), code: codes[0] });
assert.deepEqual([check.status, check.valid, check.channel, check.sid], ["approved", true, "email", started.sid]);
assert.equal((await verify.verifications(started.sid).fetch()).status, "approved");
await refused(() => verify.verifications.create({ to: "ann@", channel: "email" }), 60200, 400);
await refused(() => verify.verifications.create({ to: phone(), channel: "email" }), 60200, 400);
await refused(() => verify.verifications.create({ to: "ann@example.com", channel: "sms" }), 60200, 400);
step("email", { verification: started.sid });

await refused(() => verify.verifications.create({ to: phone(), channel: "call" }), 60223, 400);
await refused(() => verify.verifications.create({ to: "+1", channel: "sms" }), 60200, 400);

to = phone();
started = await verify.verifications.create({ to, channel: "sms" });
[code] = await smsCodes(to, service.sid);
await sleep((ttl + 1) * 1000);
await refused(() => verify.verificationChecks.create({ to, code }), 20404, 404);
assert.equal((await verify.verifications(started.sid).fetch()).status, "expired");
step("expired", { verification: started.sid });

const keyed = client(keySid, keySecret, accountSid);
assert.equal((await keyed.verify.v2.services(service.sid).fetch()).sid, service.sid);
await refused(() => client(accountSid, "0".repeat(32)).verify.v2.services(service.sid).fetch(), 20003, 401);
await refused(() => client("AC" + "0".repeat(32), authToken).verify.v2.services(service.sid).fetch(), 20003, 401);
step("credentials");

await tw.verify.v2.services(service.sid).remove();
await refused(() => tw.verify.v2.services(service.sid).fetch(), 20404, 404);
step("deleted", { sid: service.sid });
console.log(`UNDOCUMENTED ERRORS ${refused.count()}`);
console.log("FLOW OK");
