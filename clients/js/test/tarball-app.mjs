// A user's program with only the packed tarball (and ws, Node 20's WebSocket): upload 20 MB
// by multipart; "kill-half-way" dies (SIGKILL) once half the bytes are stored; "resume" runs
// the same call, which sends only the missing parts, then watches the job over the socket
// and takes the variant it supports.
import fs from "node:fs";
import WebSocket from "ws";
import { Client, pickVariant } from "@image-jobs/client";

const [mode] = process.argv.slice(2);
const file = process.env.BIG_FILE;
const statePath = `${process.env.WORK_DIR}/tarball-app-state.json`;
const load = () => { try { return JSON.parse(fs.readFileSync(statePath, "utf8")); } catch { return {}; } };
const storage = {
  getItem: (key) => load()[key] ?? null,
  setItem: (key, value) => fs.writeFileSync(statePath, JSON.stringify({ ...load(), [key]: value })),
  removeItem: (key) => { const all = load(); delete all[key]; fs.writeFileSync(statePath, JSON.stringify(all)); },
};
// Killing mode: the last part stalls (a slow link), so the process dies with the first two
// stored and the last not, whatever the loopback's speed.
const stalled = (url, init) => (/partNumber=3\b/.test(String(url)) ? new Promise(() => {}) : fetch(url, init));
const client = new Client({ baseUrl: process.env.IMAGE_JOBS_URL, token: process.env.IMAGE_JOBS_TOKEN, WebSocket, storage,
  ...(mode === "kill-half-way" ? { fetch: stalled } : {}) });
const data = new Uint8Array(fs.readFileSync(file));
const total = data.byteLength;
let stored = 0;
const job = await client.upload(data, {
  fingerprint: `path:${file}`,
  formats: ["webp"],
  onCreated: (created) => {
    if (created.raw.upload) fs.writeFileSync(`${statePath}.method`, created.raw.upload.method);
  },
  // onProgress counts bytes sent; a part is stored when onPartProgress tells all its bytes.
  onPartProgress: (part, sent, size) => {
    if (sent === size && (stored += size) >= total / 2 && stored < total && mode === "kill-half-way") process.kill(process.pid, "SIGKILL");
  },
});
const watch = client.watch([job], { timeout: 120 });
for await (const seen of watch) void seen;
const variant = pickVariant(job.renditions.display, ["webp"]);
const method = fs.readFileSync(`${statePath}.method`, "utf8");
const fetched = (await fetch(variant.url)).status;
console.log(JSON.stringify({ status: job.status, method, resent: client.bytesToStorage, variant: variant.contentType, fetched, connects: watch.connects }));
