// What the SDK flows (flow.mjs, tenants.mjs) share; see sdk_flow.py.
import assert from "node:assert/strict";
import twilio from "twilio";

export function client(baseUrl, user, secret, account) {
  const c = twilio(user, secret, account ? { accountSid: account } : {});
  c.verify.baseUrl = baseUrl;
  return c;
}

export const phone = () => "+86138" + String(Math.floor(Math.random() * 1e8)).padStart(8, "0");

/** The codes vcode sent to `{phone}` or `{email}` for the Service, oldest first. */
export async function codes(vcodeUrl, serviceSid, destination) {
  const answer = await fetch(`${vcodeUrl}/api/v1/dev/inbox?${new URLSearchParams(destination)}`);
  const { data } = await answer.json();
  const purpose = "va" + serviceSid.slice(2, 32).toLowerCase();
  return data.messages.filter((m) => m.purpose === purpose).map((m) => m.code);
}

/** Calls that must fail with a Twilio error; `count()` says how many were undocumented. */
export function refusals() {
  let undocumented = 0;
  const refused = async (call, code, status, documented = false) => {
    try {
      await call();
    } catch (error) {
      assert.deepEqual([error.code, error.status], [code, status], error.message);
      undocumented += documented ? 0 : 1;
      return error;
    }
    assert.fail(`expected Twilio error ${code}`);
  };
  refused.count = () => undocumented;
  return refused;
}

export const step = (name, facts = {}) => console.log(JSON.stringify({ step: name, ...facts }));
