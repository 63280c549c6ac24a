// The focus (issue 49): upload(..., { focus }) sends it as each route takes it, and a job
// exposes the focus it shows.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";
import { scriptedFetch } from "./fakes.mjs";

const BASE = "http://api.test";
const body = (status, extra = {}) => ({ job_id: "j1", status, ...extra });
const client = (fetch, extra = {}) => new sdk.Client({ baseUrl: BASE, token: "t", fetch, random: () => 0.5, ...extra });
const accepted = (status = "queued", extra = {}) => ({ status: 202, body: body(status, extra), headers: { Location: "/api/v1/image-jobs/j1" } });
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, ...new Array(60).fill(1)]);

test("the focus goes in the query of POST /images, in plain decimals", async () => {
  const { fetch, requests } = scriptedFetch([accepted()]);
  await client(fetch).upload(JPEG, { focus: { x: 0.31, y: 1e-7 }, formats: ["webp"] });
  const url = new URL(requests[0].url);
  assert.equal(url.pathname, "/api/v1/images");
  assert.match(url.searchParams.get("focus"), /^0\.31,0\.000000(1|09999+)$/);
  assert.doesNotMatch(url.searchParams.get("focus"), /e/i);
  assert.equal(url.searchParams.get("formats"), "webp");
});

test("the focus is a member of a direct upload's body", async () => {
  const { fetch, requests } = scriptedFetch([accepted("queued")]);
  await client(fetch, { maxUploadBytes: 10 }).upload(JPEG, { focus: { x: 0, y: 1 } });
  assert.equal(new URL(requests[0].url).pathname, "/api/v1/uploads");
  assert.deepEqual(JSON.parse(requests[0].body).focus, { x: 0, y: 1 });
});

test("without a focus nothing is sent", async () => {
  const { fetch, requests } = scriptedFetch([accepted()]);
  await client(fetch).upload(JPEG);
  assert.equal(new URL(requests[0].url).searchParams.has("focus"), false);
});

test("a job shows its focus once ready, and none before or from before the focus", async () => {
  const { fetch } = scriptedFetch([
    { body: body("ready", { focus: { x: 0.31, y: 0.22, source: "faces" } }) }, { body: body("ready") },
  ]);
  const job = client(fetch).job("j1");
  assert.equal(job.focus, null);
  assert.deepEqual((await job.refresh()).focus, { x: 0.31, y: 0.22, source: "faces" });
  assert.equal((await job.refresh()).focus, null);
});
