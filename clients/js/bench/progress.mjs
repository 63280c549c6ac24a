// Progress events per upload and what counting them costs: this process's CPU (user + system)
// for one upload, with onProgress, without it, and with the bytes sent as one body (fetch's
// own, counted only when answered: the package before progress by the byte), side by side in
// rounds, against a loopback API and storage in another process (bench/storage-server.mjs).
// `npm run build && node bench/progress.mjs [rounds]`.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { Client } from "../dist/node.js";

const rounds = Number(process.argv[2] ?? 7);
const server = spawn(process.execPath, [fileURLToPath(new URL("./storage-server.mjs", import.meta.url))], { stdio: ["ignore", "pipe", "inherit"] });
const [port] = await once(server.stdout, "data");
const baseUrl = `http://127.0.0.1:${String(port).trim()}`;

const photo = (size) => { const data = new Uint8Array(size); data.set([0xff, 0xd8, 0xff, 0xe0]); return data; };
const files = { "3 MiB, POST /images": photo(3 * 1024 * 1024), "12 MiB, one PUT": photo(12 * 1024 * 1024), "40 MiB, 5 parts": photo(40 * 1024 * 1024) };
const ways = {
  "stream, onProgress": { transfer: "stream", progress: true },
  "stream, no onProgress": { transfer: "stream", progress: false },
  "fetch (one body)": { transfer: "fetch", progress: true },
};

async function once_(data, way) {
  let events = 0;
  const client = new Client({ baseUrl, transfer: way.transfer, waits: false });
  const before = process.cpuUsage();
  const start = performance.now();
  await client.upload(data, way.progress ? { onProgress: () => { events += 1; } } : {});
  const cpu = process.cpuUsage(before);
  return { cpu: (cpu.user + cpu.system) / 1000, wall: performance.now() - start, events };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
console.log(`rounds: ${rounds}; medians; node ${process.version}; a shared machine`);
console.log("| file | how | progress events | CPU ms | wall ms |\n| --- | --- | --- | --- | --- |");
for (const [name, data] of Object.entries(files)) {
  const results = Object.fromEntries(Object.keys(ways).map((way) => [way, []]));
  await once_(data, ways["stream, onProgress"]); // warm
  for (let round = 0; round < rounds; round++) {
    for (const [way, options] of Object.entries(ways)) results[way].push(await once_(data, options));
  }
  for (const [way, list] of Object.entries(results)) {
    console.log(`| ${name} | ${way} | ${median(list.map((r) => r.events))} | ${median(list.map((r) => r.cpu)).toFixed(1)} | ${median(list.map((r) => r.wall)).toFixed(1)} |`);
  }
}
server.kill();
