// An account's Safe List through the unmodified official Node SDK (npm `twilio`), against a
// live vcode: run by `cargo test --test api safe_list`. The same steps and arguments as
// safe_list.py (see there).
import assert from "node:assert/strict";
import * as shared from "./sdk_flow.mjs";

const [baseUrl, vcodeUrl, oneSid, oneToken, otherSid, otherToken] = process.argv.slice(2);
const refused = shared.refusals();
const { step } = shared;

const one = shared.client(baseUrl, oneSid, oneToken);
const other = shared.client(baseUrl, otherSid, otherToken);
const ownService = await one.verify.v2.services.create({ friendlyName: "vcode safe list" });
const otherService = await other.verify.v2.services.create({ friendlyName: "vcode safe list" });
const start = (client, service, to) =>
  client.verify.v2.services(service.sid).verifications.create({ to, channel: "sms" });

/** The code of vcode's own send API's answer for `to` (a browser's send). */
async function browserSend(to) {
  const answer = await fetch(`${vcodeUrl}/api/v1/otp/send`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ phone: to }),
  });
  return (await answer.json()).code;
}

const number = "+86150" + String(Math.floor(Math.random() * 1e8)).padStart(8, "0");
await refused(() => start(one, ownService, number), 60410, 403);
step("held", { to: number });

const entry = await one.verify.v2.safelist.create({ phoneNumber: number });
assert.match(entry.sid, /^GN[0-9a-f]{32}$/);
assert.equal(entry.phoneNumber, number);
assert.ok(entry.url.endsWith(`/v2/SafeList/Numbers/${number}`), entry.url);
const fetched = await one.verify.v2.safelist(number).fetch();
assert.deepEqual([fetched.sid, fetched.phoneNumber], [entry.sid, number]);
assert.equal((await one.verify.v2.safelist.create({ phoneNumber: number })).sid, entry.sid);
step("added", { sid: entry.sid });

const started = await start(one, ownService, number);
assert.deepEqual([started.status, started.to], ["pending", number]);
assert.equal((await shared.codes(vcodeUrl, ownService.sid, { phone: number })).length, 1);
step("exempt for its account", { verification: started.sid });

await refused(() => start(other, otherService, number), 60410, 403);
await refused(() => other.verify.v2.safelist(number).fetch(), 20404, 404);
await refused(() => other.verify.v2.safelist(number).remove(), 20404, 404);
assert.equal(await browserSend(number), 40300);
step("not for another account nor a browser");

for (const bad of ["+86150", number.slice(1), "+1", "+86 150 0000 0000"]) {
  await refused(() => one.verify.v2.safelist.create({ phoneNumber: bad }), 60200, 400);
}
step("whole E.164 numbers only");

assert.equal(await one.verify.v2.safelist(number).remove(), true);
await refused(() => one.verify.v2.safelist(number).fetch(), 20404, 404);
await refused(() => one.verify.v2.safelist(number).remove(), 20404, 404);
await refused(() => start(one, ownService, number), 60410, 403);
step("removed");

await one.verify.v2.services(ownService.sid).remove();
await other.verify.v2.services(otherService.sid).remove();
console.log(`UNDOCUMENTED ERRORS ${refused.count()}`);
console.log("FLOW OK");
