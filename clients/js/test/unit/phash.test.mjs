// The photo's facts and phash on a job, and the Hamming distance of two phash values.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";

test("phashDistance counts the bits that differ, as the Python SDK and the server do", () => {
  assert.equal(sdk.phashDistance("0000000000000000", "ffffffffffffffff"), 64);
  assert.equal(sdk.phashDistance("bb8320376c0f3637", "bb8320376c0f3637"), 0);
  assert.equal(sdk.phashDistance("0000000000000001", "8000000000000000"), 2);
  assert.equal(sdk.PHASH_NEAR, 8);
});

test("a job gives its source and phash, null when the body has none", () => {
  const client = new sdk.Client({ baseUrl: "http://api.test", token: "t", fetch: async () => { throw new Error("no"); } });
  const source = { width: 400, height: 600, format: "heic", bytes: 10, captured_at: "2024-05-01T12:34:56+02:00",
    color_space: "display-p3", has_alpha: false };
  const job = client.job("j1");
  assert.equal(job.source, null);
  assert.equal(job.phash, null);
  assert.equal(job.duplicateOf, null);
  job._data = { job_id: "j1", status: "ready", source, phash: "bb8320376c0f3637", duplicate_of: "j0" };
  assert.equal(job.duplicateOf, "j0");
  assert.deepEqual(job.source, source);
  assert.equal(job.phash, "bb8320376c0f3637");
});
