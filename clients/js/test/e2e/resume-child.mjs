// One run of a multipart upload with its state in a file. "kill-after-one-part": the process
// kills itself (SIGKILL, nothing flushed) once a part is stored; "resume": the same call again.
import fs from "node:fs";
import { client, fileStorage } from "./helpers.mjs";

const [mode, file, statePath] = process.argv.slice(2);
const data = new Uint8Array(fs.readFileSync(file));
// Killing mode: parts 2 and on never get through (a link that stalled), so the process dies
// with part 1 stored and the others not, whatever the loopback's speed.
const stalled = (url, init) => (/partNumber=(?!1\b)\d+/.test(String(url)) ? new Promise(() => {}) : fetch(url, init));
const c = client({ storage: fileStorage(statePath), ...(mode === "kill-after-one-part" ? { fetch: stalled } : {}) });
const job = await c.upload(data, {
  fingerprint: `file:${file}`,
  onPartProgress: (number, sent, size) => {
    if (mode === "kill-after-one-part" && sent === size) process.kill(process.pid, "SIGKILL");
  },
});
await job.wait({ timeout: 120 });
console.log(JSON.stringify({ status: job.status, bytesToStorage: c.bytesToStorage }));
