// The statuses the package retries are the contract's ("Which answers a client retries"),
// read from docs/contract.md itself; a request not safe to repeat meets only the first set.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";
import { scriptedFetch } from "./fakes.mjs";

const BASE = "http://api.test";
const client = (fetch) => new sdk.Client({ baseUrl: BASE, token: "t", fetch, random: () => 0.5 });

function contractRetrySets() {
  const text = readFileSync(new URL("../../../../docs/contract.md", import.meta.url), "utf8");
  const section = text.split("## Which answers a client retries")[1].split("\n## ")[0];
  const statuses = (lead) => {
    const line = section.match(new RegExp(`^- ${lead}, on ([^:]*):`, "m"));
    assert.ok(line, `the contract's retry rule has no line starting ${lead}`);
    return new Set([...line[1].matchAll(/\b\d{3}\b/g)].map((m) => Number(m[0])));
  };
  return [statuses("Any request"), statuses("A request that is safe to repeat")];
}

test("the package retries the contract's statuses", () => {
  const [always, ifRepeatable] = contractRetrySets();
  assert.deepEqual(always, new Set([429, 503]), "the parse found the rule");
  assert.deepEqual(ifRepeatable, new Set([502, 504]));
  assert.deepEqual(new Set(sdk.RETRY_ALWAYS), always);
  assert.deepEqual(new Set(sdk.RETRY_IF_REPEATABLE), ifRepeatable);
});

for (const status of [502, 504]) {
  test(`a ${status} is retried on a GET and a cancel, not on a POST that is not safe to repeat`, async () => {
    const get = scriptedFetch([{ status, body: null, headers: { "Retry-After": "0" } }, { body: { job_id: "j1", status: "queued" } }]);
    await client(get.fetch).request("GET", "/api/v1/image-jobs/j1");
    assert.equal(get.requests.length, 2);
    const cancel = scriptedFetch([{ status, headers: { "Retry-After": "0" } }, { body: { job_id: "j1", status: "cancelled" } }]);
    await client(cancel.fetch).job("/api/v1/image-jobs/j1").cancel();
    assert.equal(cancel.requests.length, 2);
    const post = scriptedFetch([{ status, headers: { "Retry-After": "0" } }]);
    await assert.rejects(client(post.fetch).request("POST", "/api/v1/something"), sdk.ApiError);
    assert.equal(post.requests.length, 1);
  });
}

test("a POST not safe to repeat is retried on 429 and 503, not after a lost connection", async () => {
  const { fetch, requests } = scriptedFetch([
    { status: 429, body: { code: "rate_limited" }, headers: { "Retry-After": "0" } },
    { status: 503, body: { code: "overloaded" }, headers: { "Retry-After": "0" } },
    { body: { ok: true } },
  ]);
  assert.deepEqual((await client(fetch).request("POST", "/api/v1/something")).body, { ok: true });
  assert.equal(requests.length, 3);
  const lost = scriptedFetch([new TypeError("fetch failed")]);
  await assert.rejects(client(lost.fetch).request("POST", "/api/v1/something"), sdk.ConnectionFailed);
  assert.equal(lost.requests.length, 1);
});
