// prepareUpload(): the job made as upload() makes it, the requests a background uploader
// sends, complete(), renew(), and the JSON another process finishes from; the owner's webhook
// methods. Scripted answers behind a fake fetch.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";

const API = "http://api.test";
const MIB = 1024 * 1024;

function scripted(answers) {
  const sent = [];
  const fetch = async (target, init = {}) => {
    const url = new URL(target);
    const name = `${init.method ?? "GET"} ${url.origin === API ? url.pathname : url.origin + url.pathname}`;
    sent.push({ name, headers: { ...(init.headers ?? {}) }, body: typeof init.body === "string" ? JSON.parse(init.body) : init.body ?? null });
    const list = answers[name];
    if (!list) throw new Error(`nothing scripted for ${name}`);
    const answer = list.length > 1 ? list.shift() : list[0];
    return new Response(answer.body === undefined ? null : JSON.stringify(answer.body),
      { status: answer.status ?? 200, headers: { "Content-Type": "application/json", ...(answer.headers ?? {}) } });
  };
  return { fetch, sent };
}

const parts = (size, stored = []) => Array.from({ length: Math.ceil(size / (8 * MIB)) }, (_, i) => ({
  part_number: i + 1, size: Math.min(8 * MIB, size - i * 8 * MIB),
  ...(stored.includes(i + 1) ? { stored: true, etag: `"e${i + 1}"` } : { stored: false, url: `http://s3.test/p${i + 1}?n=${Math.random()}` }),
}));
const multipart = (size, stored) => ({ method: "multipart", part_size: 8 * MIB, parts: parts(size, stored), expires_at: "2026-12-06T10:00:00Z" });
const photo = (size) => { const data = new Uint8Array(size); data.set([0xff, 0xd8, 0xff, 0xe0]); return data; };

test("a multipart prepareUpload: upload()'s options, one request per part, and a JSON another client completes", async () => {
  const size = 20 * MIB;
  const { fetch, sent } = scripted({
    "POST /api/v1/uploads": [{ status: 202, headers: { Location: "/api/v1/image-jobs/j1" }, body: { job_id: "j1", status: "awaiting_upload", upload: multipart(size) } }],
    "POST /api/v1/image-jobs/j1/upload": [{ body: { job_id: "j1", status: "queued" } }],
  });
  const storage = sdk.memoryStorage();
  const client = new sdk.Client({ baseUrl: API, fetch, storage });
  const prepared = await client.prepareUpload(photo(size), { fingerprint: "f1", formats: ["webp"], renditions: ["thumb_512"],
    focus: { x: 0.25, y: 0.75 }, metadata: { album: "a" }, idempotencyKey: "k-1" });
  assert.deepEqual(sent[0].body, { content_type: "image/jpeg", size, formats: ["webp"], renditions: ["thumb_512"],
    focus: { x: 0.25, y: 0.75 }, metadata: { album: "a" }, method: "multipart" });
  assert.equal(sent[0].headers["Idempotency-Key"], "k-1");
  assert.deepEqual(prepared.requests.map((r) => [r.method, r.offset, r.length, r.partNumber, r.headers["Content-Length"]]),
    [["PUT", 0, 8 * MIB, 1, String(8 * MIB)], ["PUT", 8 * MIB, 8 * MIB, 2, String(8 * MIB)], ["PUT", 16 * MIB, 4 * MIB, 3, String(4 * MIB)]]);
  const saved = JSON.stringify(prepared);
  assert.ok(!saved.includes("Bearer"), "no token kept");
  assert.ok(Object.keys(JSON.parse(saved)).includes("record"));
  // Another process: a fresh client and the JSON.
  const again = sdk.PreparedUpload.from(saved, new sdk.Client({ baseUrl: API, fetch, storage }));
  assert.deepEqual(again.requests, prepared.requests);
  const job = await again.complete();
  assert.equal(sent.at(-1).name, "POST /api/v1/image-jobs/j1/upload");
  assert.equal(sent.at(-1).body, null, "no body: the server lists the parts storage holds");
  assert.equal(job.status, "queued");
  assert.equal(await storage.getItem(again.record), null, "the file's record is forgotten once complete");
});

test("complete() with a part missing throws UploadIncomplete naming it, its request renewed", async () => {
  const size = 20 * MIB;
  const { fetch } = scripted({
    "POST /api/v1/uploads": [{ status: 202, headers: { Location: "/api/v1/image-jobs/j2" }, body: { job_id: "j2", status: "awaiting_upload", upload: multipart(size) } }],
    "POST /api/v1/image-jobs/j2/upload": [{ status: 400, body: { code: "invalid_request", detail: "part 2 is missing" } }],
    "GET /api/v1/image-jobs/j2/upload": [{ body: multipart(size, [1, 3]) }],
  });
  const prepared = await new sdk.Client({ baseUrl: API, fetch }).prepareUpload(photo(size));
  const before = prepared.requests[1].url;
  const error = await prepared.complete().catch((e) => e);
  assert.ok(error instanceof sdk.UploadIncomplete, String(error));
  assert.deepEqual(error.missing, [2]);
  assert.deepEqual(prepared.requests.map((r) => r.partNumber), [2]);
  assert.notEqual(prepared.requests[0].url, before, "signed anew");
});

test("a React Native {uri, type, size} is not read, and the single PUT carries no checksum then", async () => {
  const { fetch, sent } = scripted({
    "POST /api/v1/uploads": [{ status: 202, headers: { Location: "/api/v1/image-jobs/j3" },
      body: { job_id: "j3", status: "awaiting_upload", upload: { method: "PUT", url: "http://s3.test/o", headers: { "Content-Type": "image/heic", "Content-Length": "5000000" } } } }],
    "GET /api/v1/image-jobs/j3": [{ body: { job_id: "j3", status: "queued" } }],
  });
  const prepared = await new sdk.Client({ baseUrl: API, fetch }).prepareUpload({ uri: "file:///photo.heic", type: "image/heic", size: 5_000_000 });
  assert.deepEqual(sent.map((s) => s.name), ["POST /api/v1/uploads"], "the file itself is never fetched");
  assert.deepEqual(sent[0].body, { content_type: "image/heic", size: 5_000_000, method: "PUT" });
  assert.deepEqual(prepared.requests, [{ method: "PUT", url: "http://s3.test/o", partNumber: null, offset: 0, length: 5_000_000,
    headers: { "Content-Type": "image/heic", "Content-Length": "5000000" } }]);
  const job = await prepared.complete();
  assert.equal(job.status, "queued");
});

test("the same file prepared again while its job awaits its file answers that job and what storage lacks", async () => {
  const size = 20 * MIB;
  const { fetch, sent } = scripted({
    "POST /api/v1/uploads": [{ status: 202, headers: { Location: "/api/v1/image-jobs/j4" }, body: { job_id: "j4", status: "awaiting_upload", upload: multipart(size) } }],
    "GET /api/v1/image-jobs/j4": [{ body: { job_id: "j4", status: "awaiting_upload" } }],
    "GET /api/v1/image-jobs/j4/upload": [{ body: multipart(size, [1]) }],
  });
  const client = new sdk.Client({ baseUrl: API, fetch });
  const first = await client.prepareUpload(photo(size), { fingerprint: "same" });
  const second = await client.prepareUpload(photo(size), { fingerprint: "same" });
  assert.equal(second.job.jobId, first.job.jobId);
  assert.deepEqual(second.requests.map((r) => r.partNumber), [2, 3]);
  assert.equal(sent.filter((s) => s.name === "POST /api/v1/uploads").length, 1);
});

test("the owner's webhook methods call the owner's routes", async () => {
  const { fetch, sent } = scripted({
    "PUT /api/v1/webhook": [{ body: { url: "https://h.test/", secret: "whsec_x" } }],
    "GET /api/v1/webhook": [{ body: { url: "https://h.test/", deliveries: [] } }],
    "POST /api/v1/webhook/test": [{ status: 429, headers: { "Retry-After": "20" }, body: { code: "rate_limited" } }],
    "POST /api/v1/webhook/rotate-secret": [{ body: { url: "https://h.test/", secret: "whsec_y" } }],
    "DELETE /api/v1/webhook": [{ status: 204 }],
  });
  const client = new sdk.Client({ baseUrl: API, fetch });
  assert.equal((await client.setWebhook("https://h.test/")).secret, "whsec_x");
  assert.deepEqual(sent[0].body, { url: "https://h.test/" });
  assert.deepEqual((await client.webhook()).deliveries, []);
  await assert.rejects(client.testWebhook(), sdk.RateLimited);
  assert.equal(sent.filter((s) => s.name === "POST /api/v1/webhook/test").length, 1, "a test event is never retried");
  assert.equal((await client.rotateWebhookSecret()).secret, "whsec_y");
  await client.deleteWebhook();
  assert.equal(sent.at(-1).name, "DELETE /api/v1/webhook");
});
