// React Native's globals only: fetch, WebSocket, Blob, FormData; no window, no File, no
// crypto.subtle (RN has none without a polyfill). Buffer stays: Node's own fetch needs it; the package's type check (no Node types) keeps it out of the package. A photo is a {uri, type, size}
// read by fetch(uri).blob(), as RN reads file:// and content:// URIs (here over http).
import fs from "node:fs";
import http from "node:http";
import WebSocket from "ws";
import { env } from "./helpers.mjs";

const photo = fs.readFileSync(env("PUT_FILE"));
const server = http.createServer((req, res) => { res.writeHead(200, { "Content-Type": "image/jpeg" }); res.end(photo); });
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const uri = `http://127.0.0.1:${server.address().port}/DCIM/photo.jpg`;

for (const name of ["window", "document", "File", "crypto", "navigator"]) {
  Object.defineProperty(globalThis, name, { value: undefined, configurable: true, writable: true });
}
globalThis.WebSocket = WebSocket; // RN has one built in
const { Client } = await import("../../dist/index.js");
if (typeof File !== "undefined" || typeof window !== "undefined" || globalThis.crypto) throw new Error("not RN-like");

const client = new Client({ baseUrl: env("IMAGE_JOBS_URL"), token: env("IMAGE_JOBS_TOKEN") });
const job = await client.upload({ uri, type: "image/jpeg", size: photo.length });
for await (const seen of client.watch([job], { timeout: 90 })) void seen;
server.close();
if (job.status !== "ready") throw new Error(`job is ${job.status}`);
console.log("rn-like ok", job.jobId);
process.exit(0);
