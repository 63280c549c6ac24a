// Against the embedded stack (issue 47, item 10 c, d, f): a service token reads, waits, lists
// and deletes on the service's routes; upload() answers once the job has its file; a stopped
// upload cancels its job unless kept.
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";
import { client, env } from "./helpers.mjs";

const read = (name) => new Uint8Array(fs.readFileSync(env(name)));
const HAS_ITS_FILE = ["queued", "processing", "ready"];

test("upload() answers a PUT's and a multipart's job once it has its file, and a refresh agrees", async () => {
  const c = client();
  for (const name of ["PUT_FILE", "BIG_FILE"]) {
    const job = await c.upload(read(name));
    assert.ok(HAS_ITS_FILE.includes(job.status), `${name}: ${job.status}`);
    assert.ok(HAS_ITS_FILE.includes((await job.refresh()).status), `${name} refreshed: ${job.status}`);
    await job.wait({ timeout: 120 });
    assert.equal(job.status, "ready");
  }
});

test("a stopped upload cancels its job; one kept stays awaiting its file for a resume", async () => {
  const c = client();
  for (const keepStopped of [false, true]) {
    const controller = new AbortController();
    const upload = c.upload(read("PUT_FILE"), { signal: controller.signal, keepStopped, onCreated: () => controller.abort() });
    const stopped = await upload.then(() => null, (error) => error);
    assert.ok(stopped instanceof sdk.UploadStopped, String(stopped));
    const job = c.job(stopped.job.location);
    assert.equal((await job.refresh()).status, keepStopped ? "awaiting_upload" : "cancelled");
    if (keepStopped) await job.cancel();
  }
});

test("a service token reads, waits, lists and deletes any owner's job on the service's routes", async () => {
  const made = await client().upload(read("PHOTO"));
  const service = client({ token: env("IMAGE_JOBS_SERVICE_TOKEN") });
  assert.equal(await service.isService(), true);
  const job = service.job(made.jobId);
  await job.wait({ timeout: 60 });
  assert.equal(job.status, "ready");
  assert.ok(job.owner);
  assert.equal((await service.job(made.location).refresh()).owner, job.owner);
  await assert.rejects(service.jobs().next(), TypeError);
  const listed = [];
  for await (const one of service.jobs({ owner: job.owner, status: "ready" })) listed.push(one.jobId);
  assert.ok(listed.includes(made.jobId));
  await job.delete();
  await assert.rejects(job.refresh(), sdk.JobNotFound);
});
