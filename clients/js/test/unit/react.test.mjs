// @image-jobs/client/react in jsdom, with React 19 and react-dom: useUpload() tells the bytes
// and the job; useJob() follows a job to ready with its placeholder and variant, shows the
// bytes of its upload while useUpload() sends it, and cancels.
import assert from "node:assert/strict";
import { test } from "node:test";
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><div id=root></div>", { url: "http://app.test/" });
Object.assign(globalThis, { window: dom.window, document: dom.window.document, navigator: dom.window.navigator, IS_REACT_ACT_ENVIRONMENT: true });
const React = await import("react");
const { createRoot } = await import("react-dom/client");
const sdk = await import("../../dist/index.js");
const { ImageJobsProvider, useJob, useUpload } = await import("../../dist/react.js");
const { act, createElement: h } = React;

const API = "http://api.test";
const BLURHASH = "LEHV6nWB2yk8pyo0adR*.7kCMdnj";

/** A fetch answering by "METHOD path" from lists of answers (the last repeating), recording each. */
function scripted(answers) {
  const sent = [];
  const fetch = async (target, init = {}) => {
    const url = new URL(target);
    const name = `${init.method ?? "GET"} ${url.origin === API ? url.pathname : url.origin + url.pathname}`;
    sent.push(name);
    const list = answers[name];
    if (!list) throw new Error(`nothing scripted for ${name}`);
    const answer = typeof list[0] === "function" ? await list[0](init) : list[0];
    if (list.length > 1) list.shift();
    return new Response(answer.body === undefined ? null : JSON.stringify(answer.body),
      { status: answer.status ?? 200, headers: { "Content-Type": "application/json", ...(answer.headers ?? {}) } });
  };
  return { fetch, sent };
}

const ready = (id) => ({ job_id: id, status: "ready", placeholder: { blurhash: BLURHASH, average_color: "#aabbcc" },
  renditions: { display: { url: `https://cdn.test/${id}.jpg`, width: 1200, height: 800, content_type: "image/jpeg",
    variants: { "image/webp": { url: `https://cdn.test/${id}.webp`, bytes: 10 } } } } });

async function render(element) {
  const container = document.createElement("div");
  document.body.append(container);
  const root = createRoot(container);
  await act(async () => root.render(element));
  return root;
}

/** Until `check()` holds, acting on what React was told meanwhile (every scripted answer is at once). */
async function until(check) {
  for (let i = 0; i < 200 && !check(); i++) await act(() => new Promise((done) => setTimeout(done, 0)));
  assert.ok(check());
}

test("useUpload tells the bytes as they go and the job; useJob of it follows to ready with its placeholder and variant", async () => {
  const size = 3 * 1024 * 1024;
  const { fetch } = scripted({
    "POST /api/v1/uploads": [{ status: 202, headers: { Location: "/api/v1/image-jobs/j1" },
      body: { job_id: "j1", status: "awaiting_upload", upload: { method: "PUT", url: "http://s3.test/o", headers: {} } } }],
    "PUT http://s3.test/o": [async (init) => { for await (const _ of init.body) { /* drained as storage does */ } return { status: 200 }; }],
    "GET /api/v1/image-jobs/j1": [{ body: { job_id: "j1", status: "queued" } }, { body: ready("j1") }],
  });
  const client = new sdk.Client({ baseUrl: API, fetch, transfer: "stream", maxUploadBytes: 1024, waits: false, random: () => 0, clock: fakeClock() });
  const seen = { upload: null, job: null };
  function Picker() {
    const upload = useUpload();
    seen.upload = upload;
    return upload.job ? h(Card, { job: upload.job }) : null;
  }
  function Card({ job }) {
    seen.job = useJob(job, { formats: ["webp"] });
    return h("p", null, seen.job.status);
  }
  const root = await render(h(ImageJobsProvider, { client }, h(Picker)));
  const data = new Uint8Array(size); data.set([0xff, 0xd8, 0xff, 0xe0]);
  let job;
  const told = [];
  await act(async () => { job = await seen.upload.upload(data, { onProgress: (sent) => told.push(sent) }); });
  assert.equal(seen.upload.phase, "uploaded");
  // act() renders once at its end; the caller's onProgress sees every step the state took.
  assert.ok(told.length >= 12, `progress by the byte: ${told.length} steps`);
  assert.equal(seen.upload.progress.sent, size);
  await until(() => seen.job.status === "ready");
  assert.equal(seen.job.job.jobId, job.jobId);
  assert.equal(seen.job.variant.contentType, "image/webp");
  assert.equal(seen.job.placeholder.averageColor, "#aabbcc");
  assert.equal(seen.job.placeholder.width, 32);
  assert.equal(document.querySelector("p")?.textContent, "ready");
  await act(async () => root.unmount());
});

test("useJob of an id reads it, and cancel() cancels it", async () => {
  const { fetch, sent } = scripted({
    "GET /api/v1/image-jobs/j2": [{ body: { job_id: "j2", status: "processing" } }],
    "POST /api/v1/image-jobs/j2/cancel": [{ body: { job_id: "j2", status: "cancelled" } }],
  });
  const client = new sdk.Client({ baseUrl: API, fetch, waits: false, random: () => 0, clock: fakeClock() });
  let state;
  function Card() { state = useJob("j2"); return null; }
  const root = await render(h(ImageJobsProvider, { client }, h(Card)));
  await until(() => state.status === "processing");
  await act(async () => state.cancel());
  assert.equal(state.status, "cancelled");
  assert.ok(sent.includes("POST /api/v1/image-jobs/j2/cancel"));
  await act(async () => root.unmount());
});

test("useUpload's cancel() stops the upload: phase stopped, its job cancelled", async () => {
  let release;
  const { fetch, sent } = scripted({
    "POST /api/v1/uploads": [{ status: 202, headers: { Location: "/api/v1/image-jobs/j3" },
      body: { job_id: "j3", status: "awaiting_upload", upload: { method: "PUT", url: "http://s3.test/o3", headers: {} } } }],
    "PUT http://s3.test/o3": [(init) => new Promise((_, fail) => { release = () => {}; init.signal.addEventListener("abort", () => fail(init.signal.reason)); })],
    "POST /api/v1/image-jobs/j3/cancel": [{ body: { job_id: "j3", status: "cancelled" } }],
  });
  const client = new sdk.Client({ baseUrl: API, fetch, transfer: "stream", maxUploadBytes: 10, waits: false, random: () => 0 });
  let state;
  function Picker() { state = useUpload(); return null; }
  const root = await render(h(ImageJobsProvider, { client }, h(Picker)));
  const data = new Uint8Array(100); data.set([0xff, 0xd8, 0xff, 0xe0]);
  let outcome;
  await act(async () => { outcome = state.upload(data).catch((error) => error); });
  await until(() => state.job !== null && release !== undefined);
  await act(async () => { state.cancel(); await outcome; });
  assert.ok((await outcome) instanceof sdk.UploadStopped);
  assert.equal(state.phase, "stopped");
  assert.ok(sent.includes("POST /api/v1/image-jobs/j3/cancel"));
  await act(async () => root.unmount());
});

/** A clock whose every read is a second on: the polls' schedule passes at once. */
function fakeClock() { let now = 0; return () => (now += 1000); }
