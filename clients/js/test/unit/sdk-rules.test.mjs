// The rules both SDKs keep (tests/sdk_rules.json, which tests/client/test_sdk_rules.py runs on
// the Python SDK), run on this package: each case's scripted answers behind a fake fetch, and
// the outcome the table names.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import * as sdk from "../../dist/index.js";

const TABLE = JSON.parse(readFileSync(new URL("../../../../tests/sdk_rules.json", import.meta.url), "utf8"));
const API = "http://api.test";
const FINGERPRINT = "the-file";
const RECORD = `image-jobs:upload:${API}:${FINGERPRINT}`;
const JPEG_START = [0xff, 0xd8, 0xff, 0xe0];
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** Answers each request by its name ("METHOD /path" on the API, "METHOD http://host/path"
 * elsewhere) from the case's answers in order, the last repeating; aborts `stop` once
 * `stopAfter` answers were given. A request whose signal has fired is not sent, as fetch's. */
function scripted(answers, stop, stopAfter) {
  const scripts = Object.fromEntries(Object.entries(answers).map(([name, list]) => [name, [...list]]));
  const sent = [];
  const fetch = async (target, init = {}) => {
    if (init.signal?.aborted) throw init.signal.reason ?? new DOMException("aborted", "AbortError");
    const url = new URL(target);
    const method = init.method ?? "GET";
    const name = `${method} ${url.origin === API ? url.pathname : url.origin + url.pathname}`;
    const request = { name, headers: { ...(init.headers ?? {}) }, started: performance.now() };
    sent.push(request);
    const script = scripts[name];
    if (!script?.length) throw new Error(`no answer scripted for ${name}`);
    const answer = script.length > 1 ? script.shift() : script[0];
    if (stopAfter !== undefined && sent.length >= stopAfter) stop.abort();
    if (answer.lost) throw new TypeError("fetch failed");
    if (answer.hang) {  // no answer: the try ends when its signal fires (its own timeout)
      await new Promise((_, reject) => init.signal.addEventListener("abort", () => {
        request.held = (performance.now() - request.started) / 1000;
        reject(init.signal.reason);
      }, { once: true }));
    }
    const body = answer.body ?? null;
    const status = answer.status ?? 200;
    const text = body === null || status === 204 ? null : typeof body === "string" ? body : JSON.stringify(body);
    return new Response(text, { status, headers: answer.headers ?? {} });
  };
  return { fetch, sent };
}

const file = (size) => { const data = new Uint8Array(size); data.set(JPEG_START); return data; };

async function perform(client, step, job, signal) {
  if (step.job) job = client.job(step.job);
  switch (step.do) {
    case "upload": {
      if (step.saved) {
        const saved = { idempotencyKey: step.saved.idempotency_key, ...(step.saved.location ? { location: step.saved.location } : {}) };
        await client.storage.setItem(RECORD, JSON.stringify(saved));
      }
      return client.upload(file(step.size), { fingerprint: FINGERPRINT, signal, keepStopped: step.keep_stopped });
    }
    case "resume": return client.resume(job, file(step.size), { signal, keepStopped: step.keep_stopped });
    case "refresh": return job.refresh();
    case "cancel": return job.cancel();
    case "delete": await job.delete(); return job;
    case "wait": return job.wait({ timeout: 60 });
    default: throw new Error(`unknown step ${step.do}`);
  }
}

async function run(rule) {
  const stop = new AbortController();
  const { fetch, sent } = scripted(rule.answers, stop, rule.stop_after);
  if (rule.stop_after === 0) stop.abort();
  const options = Object.fromEntries(Object.entries(rule.client ?? {}).map(([name, value]) => [camel(name), value]));
  const client = new sdk.Client({ baseUrl: API, token: "tok", fetch, random: () => 0.5, ...options });
  let job = null;
  try {
    for (const step of rule.steps) job = await perform(client, step, job, stop.signal);
  } catch (error) {
    return { job, error, sent, client };
  }
  return { job, error: null, sent, client };
}

/** A rendition as the API names its fields. */
function asApi(rendition) {
  const fields = (object, names) => Object.fromEntries(names.map((name) => [name, object[camel(name)]]));
  const variants = Object.fromEntries(Object.entries(rendition.variants).map(([kind, v]) =>
    [kind, fields(v, ["url", "cache_key", "bytes", "width", "height", "content_type"])]));
  return { ...fields(rendition, ["url", "cache_key", "width", "height", "content_type"]), variants };
}

for (const rule of TABLE.cases) {
  test(rule.name, async () => {
    const { job, error, sent, client } = await run(rule);
    const outcome = rule.outcome;
    if (outcome.error) {
      assert.ok(error, `expected ${outcome.error}, got ${job}`);
      assert.ok(error instanceof sdk[outcome.error], `expected ${outcome.error}, got ${error?.stack ?? error}`);
      if ("error_job" in outcome) assert.equal(error.job?.jobId ?? null, outcome.error_job);
    } else {
      assert.equal(error, null, error?.stack);
      assert.equal(job.jobId, outcome.job.job_id);
      if (outcome.job.status) assert.equal(job.status, outcome.job.status);
      if (outcome.job.error_code) assert.equal(job.error?.code, outcome.job.error_code);
    }
    const names = sent.map((request) => request.name);
    for (const [name, count] of Object.entries(outcome.sent ?? {})) {
      assert.equal(names.filter((n) => n === name).length, count, `${name} in ${names.join(", ")}`);
    }
    const savedKey = rule.steps.find((step) => step.saved)?.saved.idempotency_key;
    for (const [name, wanted] of Object.entries(outcome.idempotency ?? {})) {
      const keys = sent.filter((r) => r.name === name).map((r) => r.headers["Idempotency-Key"]);
      assert.ok(keys.length && keys.every((k) => (k === savedKey) === (wanted === "stored")), `${name}: ${keys} (saved ${savedKey})`);
    }
    if (outcome.same_key) {
      const keys = new Set(sent.filter((r) => outcome.same_key.includes(r.name)).map((r) => r.headers["Idempotency-Key"]));
      assert.ok(keys.size === 1 && !keys.has(undefined), [...keys].join());
    }
    if (outcome.record) {
      const kept = (await client.storage.getItem(RECORD)) ?? null;
      assert.equal(kept === null ? "forgotten" : "kept", outcome.record, kept);
    }
    for (const [name, seconds] of Object.entries(outcome.timeouts ?? {})) {
      // Real time: held at least its seconds, and given up within a loaded machine's margin.
      const held = sent.filter((r) => r.name === name).map((r) => r.held);
      assert.ok(held.length && held.every((s) => s >= seconds - 0.05 && s < seconds + 10), `${name}: ${held}`);
    }
    if (outcome.renditions) {
      const shown = Object.fromEntries(Object.entries(job.renditions).map(([name, r]) => [name, asApi(r)]));
      assert.deepEqual(shown, outcome.renditions);
    }
  });
}
