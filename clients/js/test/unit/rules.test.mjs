// The package's rules on scripted answers: errors by code, retries, held polls and the
// schedule, routes by size, resume from storage, the push ordering rules, variants, sniffing.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";
import { FakeSocket, scriptedFetch } from "./fakes.mjs";

const BASE = "http://api.test";
const JOB = `${BASE}/api/v1/image-jobs/j1`;
const body = (status, extra = {}) => ({ job_id: "j1", status, ...extra });
const client = (fetch, extra = {}) => new sdk.Client({ baseUrl: BASE, token: "t", fetch, random: () => 0.5, ...extra });

test("every stable code of the contract has its class; unknown codes stay ApiError with their code", () => {
  const codes = ["unauthorized", "job_not_found", "webhook_not_found", "job_expired", "job_finished",
    "idempotency_key_reused", "invalid_request", "file_too_large", "unsupported_format", "invalid_image",
    "image_too_large", "image_too_complex", "upload_missing", "storage_unavailable", "rate_limited",
    "overloaded", "processing_failed", "method_not_allowed", "internal_error"];
  for (const code of codes) {
    const error = sdk.errorFor(400, { code, detail: "d" });
    assert.equal(error.code, code);
    assert.notEqual(error.constructor, sdk.ApiError, code);
    assert.ok(error instanceof sdk.ApiError && error instanceof sdk.ImageJobsError);
  }
  const unknown = sdk.errorFor(418, { code: "teapot" });
  assert.equal(unknown.constructor, sdk.ApiError);
  assert.equal(unknown.code, "teapot");
  assert.ok(sdk.errorFor(429, "<html>") instanceof sdk.RateLimited);
  assert.equal(sdk.errorFor(404, null).constructor, sdk.ApiError, "a bare 404 may be a wrong base URL");
  assert.ok(sdk.errorFor(404, { code: "constructor" }).constructor === sdk.ApiError);
});

test("the polling schedule: 3, 5, 8, 15 s with ±20 % jitter, never under Retry-After", () => {
  const { pollWait, retryAfter } = sdk.polling;
  assert.deepEqual([1, 2, 3, 4, 9].map((n) => pollWait(n, null, () => 0.5)), [3, 5, 8, 15, 15]);
  assert.ok(Math.abs(pollWait(1, null, () => 0) - 2.4) < 1e-9);
  assert.ok(Math.abs(pollWait(1, null, () => 0.999999) - 3.6) < 1e-4);
  assert.equal(pollWait(1, 10, () => 0.5), 10);
  const headers = (h) => new Headers(h);
  assert.equal(retryAfter(headers({ "Retry-After": "7" })), 7);
  assert.equal(retryAfter(headers({ "Retry-After": "Tue, 01 Dec 2026 10:00:30 GMT", Date: "Tue, 01 Dec 2026 10:00:00 GMT" })), 30);
  assert.equal(retryAfter(headers({ "Retry-After": "soon" })), null);
});

test("a 503 is retried after its Retry-After with the same Idempotency-Key; a 400 is not", async () => {
  const { fetch, requests } = scriptedFetch([
    { status: 503, body: { code: "storage_unavailable" }, headers: { "Retry-After": "0" } },
    { status: 202, body: body("queued"), headers: { Location: "/api/v1/image-jobs/j1" } },
  ]);
  const job = await client(fetch).upload(new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]));
  assert.equal(job.status, "queued");
  assert.equal(requests.length, 2);
  assert.equal(requests[0].headers["Idempotency-Key"], requests[1].headers["Idempotency-Key"]);
  assert.equal(requests[0].headers["Content-Type"], "image/jpeg");
  assert.equal(requests[0].headers.Authorization, "Bearer t");
  const refused = scriptedFetch([{ status: 400, body: { code: "invalid_request" } }]);
  await assert.rejects(client(refused.fetch).upload(new Uint8Array([1, 2, 3])), sdk.InvalidRequest);
  assert.equal(refused.requests.length, 1);
});

test("a token function is asked again after a 401 and the request repeated once", async () => {
  let n = 0;
  const { fetch, requests } = scriptedFetch([{ status: 401, body: { code: "unauthorized" } }, { body: body("queued") }]);
  const job = await client(fetch, { token: () => `t${n++}` }).job("j1").refresh();
  assert.equal(job.status, "queued");
  assert.deepEqual(requests.map((r) => r.headers.Authorization), ["Bearer t0", "Bearer t2"]);
});

test("wait() sends held polls with If-None-Match and asks again at once after a held answer", async () => {
  const { fetch, requests } = scriptedFetch([
    { body: body("queued"), headers: { ETag: 'W/"1"', "Preference-Applied": "wait=18" } },
    { body: body("processing"), headers: { ETag: 'W/"2"', "Preference-Applied": "wait=18" } },
    { body: body("ready"), headers: { ETag: 'W/"3"' } },
  ]);
  const c = client(fetch);
  const seen = [];
  const job = await c.job("j1").wait({ onStatus: (j) => seen.push(j.status) });
  assert.deepEqual(seen, ["queued", "processing", "ready"]);
  assert.equal(c.holdSeconds, 20, "the most a client asks for, under its 30 s request timeout");
  assert.equal(client(fetch, { timeout: 10 }).holdSeconds, 8, "a shorter timeout holds for less");
  assert.deepEqual(requests.map((r) => r.headers.Prefer), ["wait=20", "wait=20", "wait=20"]);
  assert.deepEqual(requests.map((r) => r.headers["If-None-Match"]), [undefined, 'W/"1"', 'W/"2"']);
  assert.ok(job.ready);
});

test("wait() without a held answer keeps the schedule, and a deadline before the next poll throws at once", async () => {
  const { fetch, requests } = scriptedFetch([{ body: body("queued"), headers: { "Retry-After": "2" } }]);
  const job = client(fetch).job("j1");
  const started = Date.now();
  await assert.rejects(job.wait({ timeout: 2 }), (e) => e instanceof sdk.WaitTimeout && e.job === job);
  assert.ok(Date.now() - started < 1000, "no sleep into a deadline it cannot meet");
  assert.equal(requests.length, 1);
  assert.equal(requests[0].headers.Prefer, "wait=2", "a hold no longer than the time left");
});

test("a 404 stops a wait at once; 503s count as not finished until maxAttempts in a row", async () => {
  await assert.rejects(client(scriptedFetch([{ status: 404, body: { code: "job_not_found" } }]).fetch).job("j1").wait(), sdk.JobNotFound);
  const { fetch, requests } = scriptedFetch([
    { status: 503, body: { code: "overloaded" }, headers: { "Retry-After": "0" } },
    { status: 503, body: { code: "overloaded" }, headers: { "Retry-After": "0" } },
  ]);
  const c = client(fetch, { maxAttempts: 2, waits: false });
  await assert.rejects(c.job("j1").wait({ timeout: 30 }), sdk.Overloaded);
  assert.equal(requests.length, 2);
});

test("an unknown status is not finished; unknown fields stay in raw", async () => {
  const { fetch } = scriptedFetch([{ body: body("quarantined", { novel: 1 }) }]);
  const job = await client(fetch).job("j1").refresh();
  assert.equal(job.finished, false);
  assert.equal(job.raw.novel, 1);
});

test("over the API's limit: POST /uploads by PUT with the SHA-256, then exactly the signed headers", async () => {
  const data = new Uint8Array(5000).fill(7);
  data.set([0xff, 0xd8, 0xff]);
  const digest = Buffer.from(await crypto.subtle.digest("SHA-256", data)).toString("base64");
  const { fetch, requests } = scriptedFetch([
    { status: 202, body: body("awaiting_upload", { upload: { method: "PUT", url: "http://s3.test/o", headers: { "Content-Type": "image/jpeg", "Content-Length": "5000", "x-amz-checksum-sha256": digest } } }), headers: { Location: "/api/v1/image-jobs/j1" } },
    { status: 200 },
    { body: body("queued") }, // storage's event has moved the job: the upload answers then
  ]);
  const job = await client(fetch, { maxUploadBytes: 1000 }).upload(data);
  assert.equal(requests[0].url, `${BASE}/api/v1/uploads`);
  assert.deepEqual(JSON.parse(requests[0].body), { content_type: "image/jpeg", size: 5000, method: "PUT", sha256: digest });
  assert.equal(requests[1].method, "PUT");
  // Content-Length too: in Node the body is a counted stream, whose length fetch cannot see.
  assert.deepEqual(requests[1].headers, { "Content-Type": "image/jpeg", "Content-Length": "5000", "x-amz-checksum-sha256": digest });
  assert.equal(job.status, "queued");
});

test("multipart: only the parts not stored, at most 4 at once, then an empty completion; resumed from storage", async () => {
  const parts = Array.from({ length: 6 }, (_, i) => ({ part_number: i + 1, size: 10, stored: i === 0, url: `http://s3.test/p${i + 1}` }));
  parts[5].size = 5;
  let inFlight = 0;
  let most = 0;
  const storage = sdk.memoryStorage();
  const key = `image-jobs:upload:${BASE}:mine`;
  await storage.setItem(key, JSON.stringify({ idempotencyKey: "k", location: JOB }));
  const put = () => async () => { inFlight++; most = Math.max(most, inFlight); await new Promise((r) => setTimeout(r, 5)); inFlight--; return { status: 200 }; };
  const answers = [
    { body: body("awaiting_upload") }, // the saved job, read
    { body: { method: "multipart", part_size: 10, parts } },
    put(), put(), put(), put(), put(),
    { body: body("queued") },
    { body: body("queued") },
  ];
  const fetchImpl = async (url, init) => { const next = answers.shift(); const a = typeof next === "function" ? await next() : next; return new Response(a.body ? JSON.stringify(a.body) : null, { status: a.status ?? 200 }); };
  const seen = [];
  const c = client(fetchImpl, { storage, maxUploadBytes: 10, multipartThreshold: 20 });
  const job = await c.upload(new Uint8Array(55), { fingerprint: "mine", onProgress: (sent) => seen.push(sent) });
  assert.equal(job.status, "queued");
  assert.ok(most <= 4 && most >= 2, `${most} at once`);
  assert.equal(c.bytesToStorage, 45, "the stored part is not sent again");
  assert.equal(seen.at(-1), 55);
  assert.equal(await storage.getItem(key), null, "forgotten once uploaded");
});

test("multipart: every part's ETag read, the completion names them; a refused part URL is renewed once", async () => {
  const parts = [1, 2, 3].map((n) => ({ part_number: n, size: 10, url: `http://s3.test/p${n}` }));
  const requests = [];
  const fetchImpl = async (url, init = {}) => {
    requests.push({ url, method: init.method ?? "GET", body: init.body });
    if (url.endsWith("/uploads")) {
      return new Response(JSON.stringify(body("awaiting_upload", { upload: { method: "multipart", part_size: 10, parts } })), { status: 202, headers: { Location: JOB } });
    }
    if (url === "http://s3.test/p2") {
      return new Response("<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>", { status: 403 });
    }
    if (url.startsWith("http://s3.test/")) return new Response(null, { status: 200, headers: { ETag: `"e-${url.slice(-2)}"` } });
    if (url.endsWith("/upload") && (init.method ?? "GET") === "GET") {
      return new Response(JSON.stringify({ method: "multipart", part_size: 10, parts: [
        { ...parts[0], stored: true, etag: '"e-p1"' }, { ...parts[1], url: "http://s3.test/fresh2" }, { ...parts[2], stored: true, etag: '"e-p3"' }] }));
    }
    return new Response(JSON.stringify(body("queued")), { status: 202 });
  };
  const c = client(fetchImpl, { maxUploadBytes: 10, multipartThreshold: 20 });
  await c.upload(new Uint8Array(30));
  assert.deepEqual(requests.filter((r) => r.url.startsWith("http://s3.test/")).map((r) => r.url).sort(),
    ["http://s3.test/fresh2", "http://s3.test/p1", "http://s3.test/p2", "http://s3.test/p3"]);
  assert.equal(requests.filter((r) => r.url.endsWith("/upload") && r.method === "GET").length, 1);
  const completion = requests.find((r) => r.url.endsWith("/upload") && r.method === "POST");
  assert.deepEqual(JSON.parse(completion.body).parts, [
    { part_number: 1, etag: '"e-p1"' }, { part_number: 2, etag: '"e-h2"' }, { part_number: 3, etag: '"e-p3"' }]);
});

test("a part refused again after its renewal throws StorageError", async () => {
  const parts = [{ part_number: 1, size: 10, url: "http://s3.test/p1" }, { part_number: 2, size: 10, url: "http://s3.test/p2" }];
  const fetchImpl = async (url, init = {}) => {
    if (url.endsWith("/uploads")) {
      return new Response(JSON.stringify(body("awaiting_upload", { upload: { method: "multipart", part_size: 10, parts } })), { status: 202, headers: { Location: JOB } });
    }
    if (url.endsWith("/upload")) return new Response(JSON.stringify({ method: "multipart", part_size: 10, parts }));
    return new Response("<Error><Code>AccessDenied</Code><Message>no</Message></Error>", { status: 403 });
  };
  const c = client(fetchImpl, { maxUploadBytes: 10, multipartThreshold: 20 });
  await assert.rejects(c.upload(new Uint8Array(20)), (e) => e instanceof sdk.StorageError && e.status === 403);
});

test("an aborted presigned PUT stops at once with UploadStopped", async () => {
  const controller = new AbortController();
  const fetchImpl = async (url, init = {}) => {
    if (url.endsWith("/uploads")) {
      return new Response(JSON.stringify(body("awaiting_upload", { upload: { method: "PUT", url: "http://s3.test/o", headers: {} } })), { status: 202, headers: { Location: JOB } });
    }
    if (url.endsWith("/cancel")) return new Response(JSON.stringify(body("cancelled")));
    return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
  };
  const c = client(fetchImpl, { maxUploadBytes: 10 });
  const upload = c.upload(new Uint8Array(15), { onCreated: () => setTimeout(() => controller.abort(), 10), signal: controller.signal });
  await assert.rejects(upload, (e) => e instanceof sdk.UploadStopped && e.job?.location === JOB);
});

// Held until the caller aborts: the request must carry the caller's signal to end.
const hung = (init) => new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))));
const multipartAccepted = () => new Response(JSON.stringify(body("awaiting_upload", { upload: { method: "multipart", part_size: 10,
  parts: [{ part_number: 1, size: 10, url: "http://s3.test/p1" }, { part_number: 2, size: 10, url: "http://s3.test/p2" }] } })),
{ status: 202, headers: { Location: JOB } });
for (const [route, size, answer, job] of [
  ["POST /images", 7, (url, init) => hung(init), null],
  ["POST /uploads", 15, (url, init) => hung(init), null],
  ["the multipart completion", 20, (url, init) => (url.endsWith("/uploads") ? multipartAccepted()
    : url.startsWith("http://s3.test/") ? new Response(null, { status: 200 }) : hung(init)), JOB],
]) {
  test(`an abort while ${route} is in flight ends it with UploadStopped, not the signal's AbortError`, async () => {
    const controller = new AbortController();
    let asked = 0;
    let cancels = 0;
    const fetchImpl = async (url, init = {}) => {
      asked += 1;
      // The stopped upload's job is cancelled (best effort): answered, not held until the
      // request's own timeout and its retries (165 s of this test's wait before).
      if (url === `${JOB}/cancel`) {
        cancels += 1;
        return new Response(JSON.stringify(body("cancelled")));
      }
      const answered = answer(url, init);
      if (!(answered instanceof Response)) setTimeout(() => controller.abort(), 5);
      return answered;
    };
    const c = client(fetchImpl, { maxUploadBytes: 10, multipartThreshold: 20 });
    const data = new Uint8Array(size).fill(1);
    data.set([0xff, 0xd8, 0xff]);
    await assert.rejects(c.upload(data, { signal: controller.signal }),
      (e) => e instanceof sdk.UploadStopped && (e.job?.location ?? null) === job);
    assert.ok(asked >= 1);
    assert.equal(cancels, job ? 1 : 0);
  });
}

test("maxHeld: past it a poll goes unheld, on the schedule; the slot comes back after the answer", async () => {
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const requests = [];
  const fetchImpl = async (url, init = {}) => {
    requests.push({ url, prefer: init.headers?.Prefer });
    if (url.endsWith("/j1")) await gate;
    return new Response(JSON.stringify({ job_id: url.slice(-2), status: "ready" }));
  };
  const c = client(fetchImpl, { maxHeld: 1 });
  const first = c.job("j1").wait();
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(c.held, 1);
  await c.job("j2").wait();
  release();
  await first;
  assert.equal(c.held, 0);
  assert.deepEqual(requests.map((r) => [r.url.slice(-2), r.prefer]), [["j1", "wait=20"], ["j2", undefined]]);
});

test("metadata: an ASCII header on POST /images, a member of /uploads; job.metadata reads it", async () => {
  const { fetch, requests } = scriptedFetch([
    { status: 202, body: body("queued", { metadata: { name: "été.jpg" } }), headers: { Location: "/api/v1/image-jobs/j1" } },
    { status: 202, body: body("awaiting_upload", { upload: { method: "PUT", url: "http://s3.test/o", headers: {} } }), headers: { Location: "/api/v1/image-jobs/j1" } },
    { status: 200 },
    { body: body("queued") },
  ]);
  const small = await client(fetch).upload(new Uint8Array([0xff, 0xd8, 0xff, 1]), { metadata: { name: "été.jpg" } });
  assert.equal(requests[0].headers["Image-Jobs-Metadata"], '{"name":"\\u00e9t\\u00e9.jpg"}');
  assert.deepEqual(JSON.parse(requests[0].headers["Image-Jobs-Metadata"]), { name: "été.jpg" });
  assert.deepEqual(small.metadata, { name: "été.jpg" });
  await client(fetch, { maxUploadBytes: 2 }).upload(new Uint8Array([0xff, 0xd8, 0xff, 1]), { metadata: { k: "v" } });
  assert.deepEqual(JSON.parse(requests[1].body).metadata, { k: "v" });
});

test("jobs(): every page in turn with the filter, each a Job as GET shows it", async () => {
  const { fetch, requests } = scriptedFetch([
    { body: { jobs: [body("ready"), { job_id: "j2", status: "queued" }], next_page_token: "t2" } },
    { body: { jobs: [{ job_id: "j3", status: "failed" }] } },
  ]);
  const seen = [];
  for await (const job of client(fetch).jobs({ status: ["ready", "failed"], pageSize: 2 })) seen.push([job.jobId, job.status, job.location]);
  assert.deepEqual(seen.map(([id, status]) => [id, status]), [["j1", "ready"], ["j2", "queued"], ["j3", "failed"]]);
  assert.equal(seen[0][2], JOB);
  assert.deepEqual(requests.map((r) => r.url), [
    `${BASE}/api/v1/image-jobs?status=ready&status=failed&page_size=2`,
    `${BASE}/api/v1/image-jobs?status=ready&status=failed&page_size=2&page_token=t2`]);
});

test("an aborted multipart upload starts no more parts and throws UploadStopped with its job", async () => {
  const controller = new AbortController();
  const parts = Array.from({ length: 8 }, (_, i) => ({ part_number: i + 1, size: 10, url: `http://s3.test/p${i + 1}` }));
  let puts = 0;
  const fetchImpl = async (url, init) => {
    if (url.endsWith("/uploads")) return new Response(JSON.stringify(body("awaiting_upload", { upload: { method: "multipart", part_size: 10, parts } })), { status: 202, headers: { Location: JOB } });
    puts++;
    controller.abort();
    return new Response(null, { status: 200 });
  };
  const c = client(fetchImpl, { maxUploadBytes: 10, multipartThreshold: 20 });
  await assert.rejects(c.upload(new Uint8Array(80), { signal: controller.signal }), (e) => e instanceof sdk.UploadStopped && e.job?.location === JOB);
  assert.ok(puts <= 4, `${puts} parts sent`);
});

test("watch(): one socket with the bearer subprotocol, sequence/ETag/status order, re-read after a reconnect", async () => {
  FakeSocket.sockets = [];
  const answers = [
    { body: { url: "ws://push.test" } },
    { body: body("queued"), headers: { ETag: 'W/"q"' } }, // the GET after connect
    { body: { url: "ws://push.test" } },
    { body: body("processing", { attempt: 2 }), headers: { ETag: 'W/"p2"' } }, // the GET after the reconnect: a re-claim
  ];
  const { fetch } = scriptedFetch(answers);
  const c = client(fetch, { WebSocket: FakeSocket });
  const events = [];
  const watch = c.watch(["j1"], { timeout: 20, onOpen: () => events.push("open"), onClose: () => events.push("closed") });
  const seen = [];
  for await (const job of watch) {
    seen.push(job.status);
    const socket = FakeSocket.sockets.at(-1);
    if (seen.length === 1) {
      assert.deepEqual(socket.protocols, ["image-jobs.v1", "bearer.t"]);
      socket.raw("not json");
      socket.raw(JSON.stringify({ type: "other" }));
      socket.send(body("queued"), 1, 'W/"q"'); // the state held: dropped
      socket.send(body("awaiting_upload"), 0, 'W/"a"'); // behind by status: dropped
      socket.send(body("processing"), 2, 'W/"p"');
    } else if (seen.length === 2) {
      socket.send(body("queued"), 1, 'W/"q1"'); // an older sequence: dropped
      socket.close(); // cut: reconnect and GET
    } else if (seen.length === 3) {
      socket.send(body("ready"), 3, 'W/"r"');
    }
  }
  assert.deepEqual(seen, ["queued", "processing", "processing", "ready"]);
  assert.equal(watch.connects, 2);
  assert.deepEqual(events, ["open", "closed", "open", "closed"]);
  assert.equal(watch.connected, false);
  assert.ok(watch.dropped >= 3, `${watch.dropped} dropped`);
});

test("two objects of one job in one watch both follow it (two waits, a replayed upload)", async () => {
  FakeSocket.sockets = [];
  const answers = [
    { body: { url: "ws://push.test" } },
    { body: body("queued"), headers: { ETag: 'W/"q"' } }, // the GET after connect
  ];
  const { fetch } = scriptedFetch(answers);
  const c = client(fetch, { WebSocket: FakeSocket });
  const first = c.job("j1");
  const second = c.job("j1");
  const watch = c.watch([first, second], { timeout: 20 });
  for await (const job of watch) {
    const socket = FakeSocket.sockets.at(-1);
    if (job.status === "queued") socket.send(body("processing"), 2, 'W/"p"');
    else if (job.status === "processing") socket.send(body("ready"), 3, 'W/"r"');
  }
  assert.deepEqual([first.status, second.status], ["ready", "ready"]);
});

test("the same file uploaded twice at once is two uploads, each with its own Idempotency-Key", async () => {
  const keys = [];
  const fetchImpl = async (url, init = {}) => {
    const n = keys.push(init.headers["Idempotency-Key"]);
    await new Promise((r) => setTimeout(r, 5));
    return new Response(JSON.stringify(body("queued", { job_id: `j${n}` })), { status: 202 });
  };
  const c = client(fetchImpl);
  const data = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
  const jobs = await Promise.all([c.upload(data), c.upload(data)]);
  assert.equal(new Set(keys).size, 2, keys.join());
  assert.deepEqual(jobs.map((j) => j.jobId).sort(), ["j1", "j2"]);
});

test("pickVariant takes the first supported format the rendition has, else the JPEG", () => {
  const rendition = { name: "display", url: "j", width: 1, height: 1, contentType: "image/jpeg", cacheKey: "kj",
    variants: { "image/webp": { contentType: "image/webp", url: "w", bytes: 5, cacheKey: "kw", width: 1, height: 1 } } };
  assert.deepEqual(sdk.pickVariant(rendition, ["avif", "image/webp"]), { url: "w", contentType: "image/webp", bytes: 5, cacheKey: "kw", animated: false });
  assert.deepEqual(sdk.pickVariant(rendition, ["avif"]), { url: "j", contentType: "image/jpeg", bytes: null, cacheKey: "kj", animated: false });
  assert.equal(sdk.pickVariant(rendition).contentType, "image/jpeg");
});

test("an animated source's rendition picks its animation where the app shows WebP, and types it", () => {
  const job = new sdk.Job(client(scriptedFetch([]).fetch), JOB, body("ready", {
    source: { width: 480, height: 360, format: "gif", bytes: 9000, captured_at: null, color_space: "srgb",
      has_alpha: false, animated: true, frames: 12, duration_ms: 960 },
    renditions: { thumb: { url: "j", cache_key: "kj", width: 256, height: 256, content_type: "image/jpeg", variants: {},
      animation: { url: "a", cache_key: "ka", content_type: "image/webp", width: 256, height: 256, frames: 12,
        duration_ms: 960, bytes: 4000 } } } }));
  const thumb = job.renditions.thumb;
  assert.deepEqual(thumb.animation, { url: "a", cacheKey: "ka", contentType: "image/webp", width: 256, height: 256,
    frames: 12, durationMs: 960, bytes: 4000 });
  assert.equal(job.source.animated, true);
  assert.deepEqual(sdk.pickVariant(thumb, ["avif", "webp"]), { url: "a", contentType: "image/webp", bytes: 4000, cacheKey: "ka", animated: true });
  assert.equal(sdk.pickVariant(thumb, ["webp"], { animate: false }).url, "j");
  assert.equal(sdk.pickVariant(thumb, ["avif"]).url, "j");  // no WebP: the still
  assert.equal(sdk.pickVariant(thumb).url, "j");
  const skipped = new sdk.Job(client(scriptedFetch([]).fetch), JOB, body("ready", {
    animation_skipped: { code: "animation_too_many_frames", message: "m" }, renditions: {} }));
  assert.deepEqual(skipped.animationSkipped, { code: "animation_too_many_frames", message: "m" });
  assert.equal(job.animationSkipped, null);
});

test("decodePlaceholder decodes at the display rendition's aspect", async () => {
  const job = new sdk.Job(client(scriptedFetch([]).fetch), JOB, body("ready", {
    placeholder: { blurhash: "LEHV6nWB2yk8pyo0adR*.7kCMdnj", average_color: "#806040" },
    renditions: { display: { url: "u", width: 1280, height: 640, content_type: "image/jpeg", variants: {} } } }));
  const decoded = sdk.decodePlaceholder(job);
  assert.equal(decoded.width, 32);
  assert.equal(decoded.height, 16);
  assert.equal(decoded.pixels.length, 32 * 16 * 4);
  assert.equal(sdk.decodePlaceholder(new sdk.Job(client(scriptedFetch([]).fetch), JOB, body("queued"))), null);
});

test("guessType knows the formats the server takes from their first bytes", () => {
  const b = (...xs) => new Uint8Array(xs.flatMap((x) => (typeof x === "string" ? [...x].map((c) => c.charCodeAt(0)) : [x])));
  assert.equal(sdk.guessType(b(0xff, 0xd8, 0xff, 0xe1)), "image/jpeg");
  assert.equal(sdk.guessType(b(0x89, "PNG\r\n", 0x1a, "\n")), "image/png");
  assert.equal(sdk.guessType(b("GIF89a")), "image/gif");
  assert.equal(sdk.guessType(b("RIFF", 0, 0, 0, 0, "WEBP")), "image/webp");
  assert.equal(sdk.guessType(b(0, 0, 0, 24, "ftypheic", 0, 0, 0, 0, "mif1heic")), "image/heic");
  assert.equal(sdk.guessType(b(0, 0, 0, 24, "ftypavif", 0, 0, 0, 0)), "image/avif");
  assert.equal(sdk.guessType(b("hello")), null);
});

test("the upload limit's old option name is still taken for a release", () => {
  assert.equal(client(undefined, { directThreshold: 1000 }).maxUploadBytes, 1000);
  assert.equal(client(undefined, { maxUploadBytes: 10, directThreshold: 1000 }).maxUploadBytes, 10);
  assert.equal(sdk.DEFAULT_DIRECT_THRESHOLD, sdk.DEFAULT_MAX_UPLOAD_BYTES);
});
