// The package against the embedded stack, through HTTP and the push port.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import * as sdk from "../../dist/index.js";
import { client, counting, cuttableProxy, env, fileStorage } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const read = (name) => new Uint8Array(fs.readFileSync(env(name)));
// The runner's push URL is this proxy's port: every socket of these tests goes through it.
const proxy = await cuttableProxy(Number(env("PUSH_PROXY_PORT")), Number(env("PUSH_PORT")));
after(() => proxy.close());

test("a small photo goes through POST /images and comes back ready in one held call", async () => {
  const { calls, fetch } = counting();
  const c = client({ fetch });
  const job = await c.upload(read("PHOTO"), { wait: 20, formats: ["webp", "avif"] });
  assert.equal(calls[0].method, "POST");
  assert.match(calls[0].url, /\/api\/v1\/images\?formats=webp,avif$/);
  if (!job.finished) await job.wait({ timeout: 60 });
  assert.equal(job.status, "ready");
  assert.ok(job.ready && job.renditions.display && job.renditions.thumb);
  const picked = sdk.pickVariant(job.renditions.display, ["image/jxl", "webp"]);
  assert.ok(["image/webp", "image/jpeg"].includes(picked.contentType));
  const image = await fetch(picked.url);
  assert.equal(image.status, 200);
  assert.equal(image.headers.get("content-type"), picked.contentType);
  const placeholder = sdk.decodePlaceholder(job);
  assert.ok(placeholder && placeholder.pixels.length === placeholder.width * placeholder.height * 4);
  assert.match(placeholder.averageColor, /^#[0-9a-f]{6}$/);
});

test("a file over the API's limit goes by one presigned PUT with its SHA-256, and its focus", async () => {
  const { calls, fetch } = counting();
  const c = client({ fetch });
  const data = read("PUT_FILE");
  const job = await c.upload(data, { focus: { x: 0.2, y: 0.75 } });
  const create = calls.find((call) => call.url.endsWith("/api/v1/uploads"));
  assert.ok(create, "POST /uploads");
  assert.ok(calls.some((call) => call.method === "PUT"), "a PUT to storage");
  assert.equal(c.bytesToStorage, data.byteLength);
  assert.equal(job.focus, null); // shown once ready
  await job.wait({ timeout: 90 });
  assert.equal(job.status, "ready");
  assert.deepEqual(job.focus, { x: 0.2, y: 0.75, source: "client" });
});

test("the presigned form (method POST) is sent by resume()", async () => {
  const c = client();
  const data = read("PUT_FILE");
  const answer = await c.request("POST", "/api/v1/uploads", { json: { content_type: "image/jpeg", size: data.byteLength } });
  const job = c.job(answer.headers.get("location"));
  assert.equal(answer.body.upload.method, "POST");
  await c.resume(job, new Blob([data], { type: "image/jpeg" }));
  await job.wait({ timeout: 90 });
  assert.equal(job.status, "ready");
});

test("a saved upload whose file arrived is answered and forgotten; one whose job was cancelled is uploaded anew", async () => {
  const storage = sdk.memoryStorage();
  const c = client({ storage });
  const data = read("PUT_FILE");
  const record = (fingerprint) => `image-jobs:upload:${c.baseUrl}:${fingerprint}`;
  const saved = async (fingerprint) => {
    const answer = await c.request("POST", "/api/v1/uploads", { json: { content_type: "image/jpeg", size: data.byteLength, method: "PUT" } });
    const job = c.job(answer.headers.get("location"));
    await storage.setItem(record(fingerprint), JSON.stringify({ idempotencyKey: `k-${fingerprint}-${Date.now()}`, location: job.location }));
    return job;
  };
  const arrived = await saved("arrived");
  await c.resume(arrived, data);
  await arrived.wait({ timeout: 90 }); // past its upload: GET .../upload answers the job, no method
  const answered = await c.upload(data, { fingerprint: "arrived" });
  assert.equal(answered.jobId, arrived.jobId);
  assert.equal(answered.status, "ready");
  assert.equal(await storage.getItem(record("arrived")), null, "the record is forgotten");
  const cancelled = await saved("cancelled");
  await cancelled.cancel();
  const fresh = await c.upload(data, { fingerprint: "cancelled" });
  assert.notEqual(fresh.jobId, cancelled.jobId, "the cancelled job is not handed back");
  await fresh.wait({ timeout: 90 });
  assert.equal(fresh.status, "ready");
  assert.equal(await storage.getItem(record("cancelled")), null);
});

test("a multipart upload killed half-way resumes in a new process and sends only the missing parts", async () => {
  const state = path.join(env("WORK_DIR"), "multipart-state.json");
  const run = (mode) => new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(here, "resume-child.mjs"), mode, env("BIG_FILE"), state],
      { stdio: ["ignore", "pipe", "inherit"], env: process.env });
    let out = "";
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.on("exit", (code, signal) => resolve({ code, signal, out }));
  });
  const first = await run("kill-after-one-part");
  assert.equal(first.signal, "SIGKILL", first.out);
  const saved = JSON.parse(fs.readFileSync(state, "utf8"));
  assert.equal(Object.keys(saved).length, 1, "the upload's state was kept");
  const second = await run("resume");
  assert.equal(second.code, 0, second.out);
  const result = JSON.parse(second.out.trim().split("\n").pop());
  const size = fs.statSync(env("BIG_FILE")).size;
  assert.equal(result.status, "ready");
  assert.ok(result.bytesToStorage > 0 && result.bytesToStorage < size, `resent ${result.bytesToStorage} of ${size}`);
  assert.deepEqual(JSON.parse(fs.readFileSync(state, "utf8")), {}, "the state is forgotten once done");
});

test("wait() holds its polls: a few GETs, each with Prefer: wait", async () => {
  const { calls, fetch } = counting();
  const c = client({ fetch });
  const job = await c.upload(read("PHOTO"));
  calls.length = 0;
  const statuses = [];
  await job.wait({ timeout: 60, onStatus: (j) => statuses.push(j.status) });
  assert.equal(job.status, "ready");
  assert.ok(calls.length <= 4, `${calls.length} polls`);
  assert.ok(calls.every((call) => /^wait=\d+$/.test(call.prefer)));
  assert.equal(statuses.at(-1), "ready");
});

test("a wait past its timeout throws WaitTimeout with the job as last seen", async () => {
  const c = client();
  const answer = await c.request("POST", "/api/v1/uploads", { json: { content_type: "image/jpeg", size: 5_000_000, method: "PUT" } });
  const job = c.job(answer.headers.get("location"));
  await assert.rejects(job.wait({ timeout: 2 }), (error) => error instanceof sdk.WaitTimeout && error.job.status === "awaiting_upload");
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 300);
  await assert.rejects(job.wait({ signal: controller.signal }), sdk.WaitCancelled);
  await job.cancel();
  assert.equal(job.status, "cancelled");
  await job.delete();
  await assert.rejects(job.refresh(), sdk.JobNotFound);
});

test("watch() follows several uploads over one socket, through a cut, with the ordering rules", async () => {
  const c = client();
  const jobs = [];
  for (let i = 0; i < 2; i++) jobs.push(await c.upload(read("PHOTO")));
  // One job whose file is sent only after the cut: the watch must reconnect to see it done.
  const answer = await c.request("POST", "/api/v1/uploads", { json: { content_type: "image/jpeg", size: read("PUT_FILE").byteLength } });
  const late = c.job(answer.headers.get("location"));
  jobs.push(late);
  const watch = c.watch(jobs, { timeout: 120 });
  let cut = false;
  const seen = new Map();
  for await (const job of watch) {
    seen.set(job.jobId, [...(seen.get(job.jobId) ?? []), job.status]);
    if (!cut) {
      cut = true;
      proxy.cut();
      await c.resume(late, read("PUT_FILE"));
    }
  }
  assert.ok(jobs.every((job) => job.status === "ready"), jobs.map(String).join());
  assert.ok(watch.connects >= 2, `connects: ${watch.connects}`);
  const order = ["awaiting_upload", "queued", "processing", "ready"];
  for (const statuses of seen.values()) {
    const steps = statuses.map((s) => order.indexOf(s));
    assert.deepEqual(steps, [...steps].sort((a, b) => a - b), `never backwards: ${statuses}`);
  }
});

test("job.wait({push: true}) learns the result from the client's one socket", async () => {
  const { calls, fetch } = counting();
  const c = client({ fetch });
  const jobs = await Promise.all([0, 1].map(() => c.upload(read("PHOTO"))));
  calls.length = 0;
  await Promise.all(jobs.map((job) => job.wait({ timeout: 60, push: true })));
  assert.ok(jobs.every((job) => job.ready));
  assert.equal(calls.filter((call) => call.url.endsWith("/push")).length, 1, "one socket for both waits");
  assert.ok(calls.every((call) => call.prefer === null), "no held poll while the socket is open");
  c.close();
});

test("errors come as their classes, by the contract's codes", async () => {
  const c = client();
  await assert.rejects(c.job("no-such-job").refresh(), (e) => e instanceof sdk.JobNotFound && e.status === 404 && e.code === "job_not_found");
  await assert.rejects(c.upload(new TextEncoder().encode("not an image at all")), sdk.UnsupportedFormat);
  const stranger = client({ token: "not-a-token" });
  await assert.rejects(stranger.job("x").refresh(), sdk.Unauthorized);
  const job = await c.upload(read("PHOTO"), { wait: 20 });
  await job.wait({ timeout: 60 });
  await assert.rejects(job.cancel(), sdk.JobFinished);
  const key = crypto.randomUUID();
  await c.upload(read("PHOTO"), { idempotencyKey: key });
  await assert.rejects(c.upload(read("SMALL_JPEG"), { idempotencyKey: key }), sdk.IdempotencyKeyReused);
});

test("in a React-Native-like runtime (no window, no File, no Web Crypto) a {uri} photo uploads and is watched", async () => {
  const child = spawn(process.execPath, [path.join(here, "rn-like.mjs")], { stdio: ["ignore", "pipe", "inherit"], env: process.env });
  let out = "";
  child.stdout.on("data", (chunk) => { out += chunk; });
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, out);
  assert.match(out, /rn-like ok/);
});
