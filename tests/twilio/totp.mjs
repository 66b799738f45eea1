// Twilio Verify's TOTP factors through the unmodified official Node SDK (npm `twilio`), with
// PyPI `pyotp` as the user's authenticator app (called through python3): the same steps and
// arguments as totp.py (see there). Run by `cargo test --test api twilio_sdk`.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as shared from "./sdk_flow.mjs";

const [baseUrl, accountSid, authToken] = process.argv.slice(2);
const refused = shared.refusals();
const { step } = shared;
const tw = shared.client(baseUrl, accountSid, authToken);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** What pyotp reads of `uri` ([secret, issuer, name, digits, interval]) and its codes at
 * `now + offset` for each offset. */
const authenticator = (uri, now, offsets) =>
  JSON.parse(
    execFileSync("python3", [
      "-c",
      "import json, sys, pyotp; t = pyotp.parse_uri(sys.argv[1]); now = float(sys.argv[2]); " +
        "print(json.dumps([[t.secret, t.issuer, t.name, t.digits, t.interval], " +
        "{o: t.at(now + int(o)) for o in sys.argv[3:]}]))",
      uri,
      String(now),
      ...offsets.map(String),
    ]).toString(),
  );

const service = await tw.verify.v2.services.create({
  friendlyName: "vcode TOTP test",
  "totp.issuer": "Acme Co",
  "totp.timeStep": 30,
  "totp.codeLength": 6,
  "totp.skew": 1,
});
assert.deepEqual(service.totp, { issuer: "Acme Co", time_step: 30, code_length: 6, skew: 1 });
const verify = tw.verify.v2.services(service.sid);
step("service", { sid: service.sid });

const identity = randomUUID();
const entity = await verify.entities.create({ identity });
assert.match(entity.sid, /^YE[0-9a-f]{32}$/);
assert.equal((await verify.entities(identity).fetch()).sid, entity.sid);
assert.ok((await verify.entities.list()).some((e) => e.identity === identity));
step("entity", { sid: entity.sid });

let factor = await verify.entities(identity).newFactors.create({
  friendlyName: "Alice's phone",
  factorType: "totp",
});
assert.match(factor.sid, /^YF[0-9a-f]{32}$/);
assert.equal(factor.status, "unverified");
while (Date.now() / 1000 % 30 > 18) await sleep(200);
const now = Date.now() / 1000;
const [read, codes] = authenticator(factor.binding.uri, now, [-30, 0, 30]);
assert.deepEqual(read, [factor.binding.secret, "Acme Co", "Alice's phone", 6, 30]);
const wrong = codes["0"] !== "000000" ? "000000" : "111111";
step("factor", { sid: factor.sid });

factor = await verify.entities(identity).factors(factor.sid).update({ authPayload: wrong });
assert.equal(factor.status, "unverified");
factor = await verify.entities(identity).factors(factor.sid).update({ authPayload: codes["-30"] });
assert.equal(factor.status, "verified");
step("verified", { sid: factor.sid });

const challenges = verify.entities(identity).challenges;
const approved = await challenges.create({ factorSid: factor.sid, authPayload: codes["0"] });
assert.match(approved.sid, /^YC[0-9a-f]{32}$/);
assert.equal(approved.status, "approved");
const replay = await challenges.create({ factorSid: factor.sid, authPayload: codes["0"] });
assert.equal(replay.status, "pending", "a code is accepted once per step");
assert.equal((await verify.entities(identity).challenges(approved.sid).fetch()).status, "approved");
assert.equal((await challenges.list()).length, 2);
await refused(
  () => challenges.create({ factorSid: "YF" + "0".repeat(32), authPayload: codes["0"] }),
  20404,
  404,
);
step("challenges", { approved: approved.sid });

for (let i = 0; i < 3; i++) {
  assert.equal((await challenges.create({ factorSid: factor.sid, authPayload: wrong })).status, "pending");
}
await refused(() => challenges.create({ factorSid: factor.sid, authPayload: wrong }), 20429, 429);
await refused(() => challenges.create({ factorSid: factor.sid, authPayload: codes["30"] }), 20429, 429);
step("locked", { sid: factor.sid });

assert.equal(await verify.entities(identity).factors(factor.sid).remove(), true);
await refused(() => verify.entities(identity).factors(factor.sid).fetch(), 20404, 404);
assert.equal(await verify.entities(identity).remove(), true);
await refused(() => verify.entities(identity).fetch(), 20404, 404);
step("deleted", { identity });
console.log(`UNDOCUMENTED ERRORS ${refused.count()}`);
console.log("FLOW OK");
