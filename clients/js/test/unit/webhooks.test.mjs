// verifyWebhook against webhooks signed by the server's own Python code (tests/js/sign_webhooks.py,
// run here with the repository's Python): signature, tolerance, rotation, several secrets.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import * as sdk from "../../dist/index.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
const VENV_PYTHON = join(ROOT, ".venv", "bin", "python");
const PYTHON = process.env.IMAGE_JOBS_PYTHON ?? (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");
const fixture = JSON.parse(execFileSync(PYTHON, [join(ROOT, "tests", "js", "sign_webhooks.py")], { encoding: "utf8" }));
const { now, body, secret, signed, rotated, stranger } = fixture;
const rejects = (promise) => assert.rejects(promise, sdk.WebhookVerificationError);

test("an event the server signed verifies from text, bytes or a Headers, and its body comes back", async () => {
  const expected = JSON.parse(body);
  assert.deepEqual(await sdk.verifyWebhook(secret, signed, body, { now }), expected);
  assert.deepEqual(await sdk.verifyWebhook(secret, signed, new TextEncoder().encode(body), { now }), expected);
  assert.deepEqual(await sdk.verifyWebhook(secret, new Headers(signed), body, { now }), expected);
  const upper = Object.fromEntries(Object.entries(signed).map(([k, v]) => [k.toUpperCase(), v]));
  assert.deepEqual(await sdk.verifyWebhook(secret, upper, body, { now }), expected);
});

test("a changed body, id or secret, or a missing header, is refused", async () => {
  await rejects(sdk.verifyWebhook(secret, signed, body.replace("ready", "failed"), { now }));
  await rejects(sdk.verifyWebhook(secret, { ...signed, "webhook-id": "msg_other" }, body, { now }));
  await rejects(sdk.verifyWebhook(stranger, signed, body, { now }));
  const { "webhook-signature": _, ...unsigned } = signed;
  await rejects(sdk.verifyWebhook(secret, unsigned, body, { now }));
});

test("the timestamp must be within five minutes either way, or the tolerance given", async () => {
  for (const at of [now - 300, now + 300]) await sdk.verifyWebhook(secret, signed, body, { now: at });
  for (const at of [now - 301, now + 301]) await rejects(sdk.verifyWebhook(secret, signed, body, { now: at }));
  await sdk.verifyWebhook(secret, signed, body, { now: now + 3600, tolerance: 3601 });
  await sdk.verifyWebhook(secret, signed, body); // this clock: signed just now
});

test("during a rotation either secret verifies, and several secrets may be given", async () => {
  assert.equal(rotated["webhook-signature"].split(" ").length, 2);
  for (const s of [secret, fixture.rotated_secret, [stranger, fixture.rotated_secret]]) {
    await sdk.verifyWebhook(s, rotated, body, { now });
  }
  await rejects(sdk.verifyWebhook([stranger], rotated, body, { now }));
  await assert.rejects(sdk.verifyWebhook([], signed, body, { now }), TypeError);
  await assert.rejects(sdk.verifyWebhook("whsec_not base64!", signed, body, { now }), TypeError);
});
