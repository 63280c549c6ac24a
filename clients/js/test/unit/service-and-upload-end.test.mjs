// Which routes a service client takes, and how a direct upload ends (issue 47, item 10 c, d, f):
// a finished upload never reads awaiting_upload, and a stopped one cancels its job unless kept.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";
import { scriptedFetch } from "./fakes.mjs";

const BASE = "http://api.test";
const JOB = `${BASE}/api/v1/image-jobs/j1`;
const SERVICE_JOB = `${BASE}/api/v1/service/image-jobs/j1`;
const body = (status, extra = {}) => ({ job_id: "j1", status, ...extra });
const client = (fetch, extra = {}) => new sdk.Client({ baseUrl: BASE, token: "t", fetch, random: () => 0.5, ...extra });
const jwt = (claims) => ["{}", JSON.stringify(claims), "sig"].map((part) => Buffer.from(part).toString("base64url")).join(".");
const SERVICE_TOKEN = jwt({ sub: "app-backend", scope: "image-jobs/service", token_use: "access" });
const putAccepted = { status: 202, body: body("awaiting_upload", { upload: { method: "PUT", url: "http://s3.test/o", headers: {} } }), headers: { Location: "/api/v1/image-jobs/j1" } };
const held = (status) => ({ body: body(status), headers: { "Preference-Applied": "wait=20" } });

test("a service token reads, waits and deletes on the service's routes, whichever route a Location names", async () => {
  const { fetch, requests } = scriptedFetch([
    { body: body("processing", { owner: "alice" }) }, { body: body("ready", { owner: "alice" }) }, { status: 204 },
  ]);
  const c = client(fetch, { token: SERVICE_TOKEN });
  assert.equal(await c.isService(), true);
  const job = c.job("j1");
  assert.equal((await job.refresh()).owner, "alice");
  await c.job(JOB).wait({ timeout: 30 }); // the Location the app was given
  await c.job("/api/v1/image-jobs/j1").delete();
  assert.deepEqual(requests.map((r) => [r.method, r.url]), [["GET", SERVICE_JOB], ["GET", SERVICE_JOB], ["DELETE", SERVICE_JOB]]);
});

test("a service client's jobs() names an owner, or says so before asking", async () => {
  const { fetch, requests } = scriptedFetch([{ body: { jobs: [body("ready", { owner: "alice" })] } }]);
  const c = client(fetch, { token: () => SERVICE_TOKEN });
  await assert.rejects(c.jobs().next(), (e) => e instanceof TypeError && /owner/.test(e.message));
  assert.equal(requests.length, 0);
  const listed = [];
  for await (const job of c.jobs({ owner: "alice" })) listed.push(job.location);
  assert.deepEqual(listed, [SERVICE_JOB]);
  assert.equal(requests[0].url, `${BASE}/api/v1/service/image-jobs?owner=alice`);
});

test("a client is an owner's unless its token's scope or its caller says service", async () => {
  assert.equal(await client(null, { token: "opaque" }).isService(), false);
  assert.equal(await client(null, { token: jwt({ sub: "alice", token_use: "id" }) }).isService(), false);
  assert.equal(await client(null, { token: "opaque", service: true }).isService(), true);
  assert.equal(await client(null, { token: SERVICE_TOKEN, service: false }).isService(), false);
  assert.equal(sdk.isServiceToken(jwt({ scope: "openid image-jobs/service" })), true);
});

test("a PUT upload answers once storage's event has moved its job, by held polls", async () => {
  const { fetch, requests } = scriptedFetch([putAccepted, { status: 200 }, held("awaiting_upload"), held("queued")]);
  const job = await client(fetch, { maxUploadBytes: 4 }).upload(new Uint8Array([0xff, 0xd8, 0xff, 1, 2]));
  assert.equal(job.status, "queued");
  const polls = requests.filter((r) => r.url === JOB);
  assert.equal(polls.length, 2);
  assert.ok(polls.every((r) => r.headers.Prefer?.startsWith("wait=")));
});

test("the wait for storage's event is bounded, and its errors never fail the stored upload", async () => {
  let now = 0;
  const answers = [putAccepted, { status: 200 }];
  const fetch = async (url, init) => {
    const next = answers.shift();
    if (next) return new Response(next.status === 200 && !next.body ? null : JSON.stringify(next.body), { status: next.status ?? 200, headers: next.headers });
    now += 12_000; // each held poll takes its time, and shows no change
    return new Response(JSON.stringify(body("awaiting_upload")), { headers: { "Preference-Applied": "wait=12" } });
  };
  const job = await client(fetch, { maxUploadBytes: 4, clock: () => now }).upload(new Uint8Array([0xff, 0xd8, 0xff, 1, 2]));
  assert.equal(job.status, "awaiting_upload");
  assert.ok(now <= sdk.polling.ARRIVAL_SECONDS * 1000 + 12_000, `${now} ms`);
});

test("a multipart upload takes its completion's answer, queued, and polls nothing", async () => {
  const parts = [1, 2, 3].map((n) => ({ part_number: n, size: 10, url: `http://s3.test/p${n}` }));
  const { fetch, requests } = scriptedFetch([
    { status: 202, body: body("awaiting_upload", { upload: { method: "multipart", part_size: 10, parts } }), headers: { Location: "/api/v1/image-jobs/j1" } },
    { status: 200, headers: { ETag: '"1"' } }, { status: 200, headers: { ETag: '"2"' } }, { status: 200, headers: { ETag: '"3"' } },
    { body: body("queued") },
  ]);
  const job = await client(fetch, { maxUploadBytes: 10, multipartThreshold: 20 }).upload(new Uint8Array(30));
  assert.equal(job.status, "queued");
  assert.equal(requests.filter((r) => r.url === JOB).length, 0);
});

test("an aborted upload cancels its job and forgets its record, unless keepStopped", async () => {
  for (const keepStopped of [false, true]) {
    const storage = sdk.memoryStorage();
    const { fetch, requests } = scriptedFetch([putAccepted, { body: body("cancelled") }]);
    const controller = new AbortController();
    const c = client(fetch, { maxUploadBytes: 4, storage });
    const upload = c.upload(new Uint8Array([0xff, 0xd8, 0xff, 1, 2]), { signal: controller.signal, keepStopped, fingerprint: "f", onCreated: () => controller.abort() });
    await assert.rejects(upload, (e) => e instanceof sdk.UploadStopped && e.job?.status === (keepStopped ? "awaiting_upload" : "cancelled"));
    assert.deepEqual(requests.map((r) => r.url.replace(BASE, "")), keepStopped ? ["/api/v1/uploads"] : ["/api/v1/uploads", "/api/v1/image-jobs/j1/cancel"]);
    assert.equal((await storage.getItem(`image-jobs:upload:${BASE}:f`)) !== null, keepStopped);
  }
});

test("the service webhook's four calls", async () => {
  const { fetch, requests } = scriptedFetch([
    { body: { url: "https://b.test/h", events: ["ready"], secret: "whsec_1" } }, { body: { url: "https://b.test/h", events: ["ready"] } },
    { body: { url: "https://b.test/h", secret: "whsec_2" } }, { status: 204 },
  ]);
  const c = client(fetch, { token: SERVICE_TOKEN });
  assert.equal((await c.setServiceWebhook("https://b.test/h", ["ready"])).secret, "whsec_1");
  assert.deepEqual((await c.serviceWebhook()).events, ["ready"]);
  assert.equal((await c.rotateServiceWebhookSecret()).secret, "whsec_2");
  await c.deleteServiceWebhook();
  assert.deepEqual(requests.map((r) => [r.method, r.url.replace(BASE, "")]), [
    ["PUT", "/api/v1/service/webhook"], ["GET", "/api/v1/service/webhook"],
    ["POST", "/api/v1/service/webhook/rotate-secret"], ["DELETE", "/api/v1/service/webhook"]]);
  assert.deepEqual(JSON.parse(requests[0].body), { url: "https://b.test/h", events: ["ready"] });
});
