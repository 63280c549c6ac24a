// Progress by the byte: in Node the body is a stream counted as fetch pulls it, in a browser
// (jsdom's XMLHttpRequest here) XHR's upload.onprogress; against a real HTTP server playing
// the API and storage.
import assert from "node:assert/strict";
import http from "node:http";
import { once } from "node:events";
import { after, before, test } from "node:test";
import { JSDOM } from "jsdom";
import * as sdk from "../../dist/index.js";

let server;
let origin;
const received = [];

before(async () => {
  server = http.createServer((req, res) => {
    let bytes = 0;
    req.on("data", (chunk) => { bytes += chunk.length; });
    req.on("end", () => {
      received.push({ method: req.method, url: req.url, bytes, headers: req.headers });
      res.setHeader("Access-Control-Allow-Origin", "*");
      if (req.method === "POST" && req.url.startsWith("/api/v1/images")) {
        res.writeHead(202, { "Content-Type": "application/json", Location: "/api/v1/image-jobs/j1" });
        return res.end(JSON.stringify({ job_id: "j1", status: "queued" }));
      }
      if (req.method === "POST" && req.url === "/api/v1/uploads") {
        res.writeHead(202, { "Content-Type": "application/json", Location: "/api/v1/image-jobs/j2" });
        return res.end(JSON.stringify({ job_id: "j2", status: "awaiting_upload",
          upload: { method: "PUT", url: `${origin}/storage/j2`, headers: { "Content-Type": "image/jpeg" } } }));
      }
      if (req.method === "PUT") return res.writeHead(200, { ETag: '"e"' }).end();
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ job_id: "j2", status: "queued" }));
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  origin = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

const photo = (size) => { const data = new Uint8Array(size); data.set([0xff, 0xd8, 0xff, 0xe0]); return data; };

function checkSteps(events, size) {
  assert.deepEqual(events[0], [0, size], "the start");
  assert.deepEqual(events.at(-1), [size, size], "the end");
  const step = Math.min(sdk.PROGRESS_STEP_BYTES, Math.ceil(size / 100));
  for (let i = 1; i < events.length; i++) {
    const gap = events[i][0] - events[i - 1][0];
    assert.ok(gap > 0 && gap <= Math.max(step, sdk.CHUNK_BYTES), `gap ${gap} at ${i}`);
  }
}

test("in Node, POST /images's body is counted as it is sent: an event each 1 % or 256 KiB", async () => {
  const size = 3 * 1024 * 1024 + 5;
  const events = [];
  const client = new sdk.Client({ baseUrl: origin, waits: false });
  assert.equal(client.transfer, "stream");
  await client.upload(photo(size), { onProgress: (sent, total) => events.push([sent, total]) });
  assert.equal(received.at(-1).bytes, size);
  assert.ok(events.length >= size / sdk.PROGRESS_STEP_BYTES, `${events.length} events`);
  checkSteps(events, size);
});

test("in Node, the presigned PUT is a counted stream with its Content-Length (never chunked)", async () => {
  const size = 6 * 1024 * 1024;
  const events = [];
  await new sdk.Client({ baseUrl: origin, waits: false }).upload(photo(size), { onProgress: (sent, total) => events.push([sent, total]) });
  const put = received.findLast((r) => r.method === "PUT");
  assert.equal(put.headers["content-length"], String(size));
  assert.equal(put.headers["transfer-encoding"], undefined);
  assert.equal(put.bytes, size);
  checkSteps(events, size);
});

test("in a browser, XMLHttpRequest sends the file and its upload.onprogress counts (jsdom)", async () => {
  const dom = new JSDOM("", { url: `${origin}/` });
  const size = 5 * 1024 * 1024;
  const events = [];
  const client = new sdk.Client({ baseUrl: origin, waits: false, XMLHttpRequest: dom.window.XMLHttpRequest });
  assert.equal(client.transfer, "xhr");
  await client.upload(photo(size), { onProgress: (sent, total) => events.push([sent, total]) });
  const put = received.findLast((r) => r.method === "PUT");
  assert.equal(put.bytes, size);
  assert.deepEqual(events[0], [0, size]);
  assert.deepEqual(events.at(-1), [size, size]);
  dom.window.close();
});

test("a plain fetch (transfer: 'fetch') still reports the start and the end", async () => {
  const events = [];
  await new sdk.Client({ baseUrl: origin, waits: false, transfer: "fetch" }).upload(photo(1000), { onProgress: (sent, total) => events.push([sent, total]) });
  assert.deepEqual(events, [[0, 1000], [1000, 1000]]);
});
