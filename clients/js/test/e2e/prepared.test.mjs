// Issue 52 against the embedded stack: an upload handed to another process (a plain HTTP
// sender killed half-way, another one finishing, then complete() from a fresh SDK in a third),
// files by path with their progress by the byte, and the owner's webhook.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { once } from "node:events";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import * as sdk from "../../dist/node.js";
import { env } from "./helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const client = (options = {}) => new sdk.Client({ baseUrl: env("IMAGE_JOBS_URL"), token: env("IMAGE_JOBS_TOKEN"), ...options });

/** A node process of this folder; its stdout's JSON lines, as they come, to `onLine`. */
function run(script, args, onLine = () => {}) {
  const child = spawn(process.execPath, [path.join(here, script), ...args], { env: process.env, stdio: ["ignore", "pipe", "pipe"] });
  const lines = [];
  let buffered = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    buffered += chunk;
    for (let end; (end = buffered.indexOf("\n")) >= 0; buffered = buffered.slice(end + 1)) {
      const line = JSON.parse(buffered.slice(0, end));
      lines.push(line);
      onLine(line, child);
    }
  });
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  return new Promise((resolve) => child.on("close", (code, signal) => resolve({ code, signal, lines, stderr })));
}

test("a prepared multipart upload: a plain sender killed half-way, another finishing, complete() from a fresh process", async () => {
  const file = env("BIG_FILE");
  const prepared = await client().prepareUpload(file, { metadata: { album: "handed-over" } });
  assert.equal(prepared.job.status, "awaiting_upload");
  assert.equal(prepared.method, "multipart");
  const size = fs.statSync(file).size;
  assert.deepEqual(prepared.requests.map((r) => [r.offset, r.length]),
    prepared.requests.map((r, i) => [i * prepared.partSize, Math.min(prepared.partSize, size - i * prepared.partSize)]));
  assert.ok(prepared.requests.length >= 3, "at least three parts");
  const saved = path.join(env("WORK_DIR"), `prepared-${Date.now()}.json`);
  fs.writeFileSync(saved, JSON.stringify(prepared));

  // The first sender stores part 1, sends half of part 2 and is SIGKILLed there.
  const first = await run("plain-sender.mjs", [saved, file, "stall"], (line, child) => {
    if (line.stalled) child.kill("SIGKILL");
  });
  assert.equal(first.signal, "SIGKILL", first.stderr);
  assert.deepEqual(first.lines[0], { part: 1, status: 200 });

  const renewed = await run("finish-prepared.mjs", ["renew", saved]);
  assert.equal(renewed.code, 0, renewed.stderr);
  const missing = renewed.lines[0].parts;
  assert.ok(!missing.includes(1) && missing.includes(2), `storage holds part 1 only: ${missing}`);

  const second = await run("plain-sender.mjs", [saved, file]);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(second.lines.length, missing.length);

  const done = await run("finish-prepared.mjs", ["complete", saved]);
  assert.equal(done.code, 0, done.stderr);
  assert.deepEqual(done.lines[0], { status: "ready", jobId: prepared.job.jobId });
  const job = await client().job(prepared.job.jobId).refresh();
  assert.equal(job.metadata.album, "handed-over");
});

test("a prepared single PUT: complete() waits for storage's event; before the PUT it says the file is not there", async () => {
  const file = env("PUT_FILE");
  const c = client();
  const prepared = await c.prepareUpload(file);
  assert.equal(prepared.method, "PUT");
  assert.equal(prepared.requests.length, 1);
  assert.ok(prepared.requests[0].headers["x-amz-checksum-sha256"], "the SHA-256, hashed from the path as a stream");
  await assert.rejects(prepared.complete({ timeout: 1 }), sdk.UploadIncomplete);
  const saved = path.join(env("WORK_DIR"), `prepared-put-${Date.now()}.json`);
  fs.writeFileSync(saved, JSON.stringify(prepared));
  const sent = await run("plain-sender.mjs", [saved, file]);
  assert.equal(sent.code, 0, sent.stderr);
  const job = await sdk.PreparedUpload.from(fs.readFileSync(saved, "utf8"), client()).complete();
  assert.notEqual(job.status, "awaiting_upload");
  await job.wait({ timeout: 90 });
  assert.equal(job.status, "ready");
});

test("upload(path) by multipart reports progress by the byte, and resumes from what storage holds", async () => {
  const file = env("BIG_FILE");
  const size = fs.statSync(file).size;
  const events = [];
  const storage = sdk.memoryStorage();
  const stop = new AbortController();
  // Stopped once a part is stored, kept; the same call resumes it.
  await assert.rejects(client({ storage }).upload(file, {
    signal: stop.signal, keepStopped: true,
    onPartProgress: (part, sent, partSize) => { if (sent === partSize) stop.abort(); },
  }), sdk.UploadStopped);
  const info = fs.statSync(file);
  const recordKey = `image-jobs:upload:${client().baseUrl}:path:${path.resolve(file)}:${info.size}:${info.mtimeMs}`;
  assert.ok(await storage.getItem(recordKey), "kept under the path, its size and its modification time");
  const job = await client({ storage }).upload(file, { onProgress: (sent, total) => events.push([sent, total]) });
  assert.ok(events[0][0] > 0, "a resume starts from what storage holds");
  assert.deepEqual(events.at(-1), [size, size]);
  const step = Math.min(sdk.PROGRESS_STEP_BYTES, Math.ceil(size / 100));
  for (let i = 1; i < events.length; i++) {
    assert.ok(events[i][0] > events[i - 1][0], "never backwards");
    assert.ok(events[i][0] - events[i - 1][0] <= step + sdk.CHUNK_BYTES * 4, `a gap of ${events[i][0] - events[i - 1][0]}`);
  }
  await job.wait({ timeout: 120 });
  assert.equal(job.status, "ready");
});

test("the owner's webhook: set, a test event the receiver verifies, its delivery shown, deleted", async () => {
  const received = [];
  let secret = null;
  const receiver = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => { body += chunk; });
    req.on("end", async () => {
      received.push(await sdk.verifyWebhook(secret, req.headers, body));
      res.writeHead(204).end();
    });
  });
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");
  try {
    const c = client();
    const set = await c.setWebhook(`http://127.0.0.1:${receiver.address().port}/hook`);
    secret = set.secret;
    assert.match(secret, /^whsec_/);
    const attempt = await c.testWebhook();
    assert.equal(attempt.status_code, 204);
    assert.equal(received[0].type, "webhook.test");
    const shown = await c.webhook();
    assert.equal(shown.deliveries[0].event, "webhook.test");
    const rotated = await c.rotateWebhookSecret();
    assert.notEqual(rotated.secret, secret);
    await c.deleteWebhook();
    assert.equal((await c.webhook()).url, null);
  } finally {
    receiver.close();
  }
});
