// What a platform's background uploader does with a prepared upload, with no SDK: each saved
// request's bytes of the file (offset, length) PUT with its headers, over node:http only.
// `node plain-sender.mjs saved.json file [stall]`: one JSON line per request answered; with
// "stall" the second request sends half its bytes, prints {"stalled"} and never ends (the
// test kills the process there).
import fs from "node:fs";
import http from "node:http";
import https from "node:https";

const [savedPath, file, mode] = process.argv.slice(2);
const saved = JSON.parse(fs.readFileSync(savedPath, "utf8"));

function send(request, stall) {
  return new Promise((resolve, reject) => {
    const url = new URL(request.url);
    const req = (url.protocol === "https:" ? https : http).request(url, { method: request.method, headers: request.headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("error", reject);
    const half = request.offset + Math.floor(request.length / 2);
    const end = stall ? half : request.offset + request.length;
    const stream = fs.createReadStream(file, { start: request.offset, end: end - 1 });
    stream.pipe(req, { end: !stall });
    if (stall) stream.on("end", () => console.log(JSON.stringify({ stalled: request.partNumber })));
  });
}

for (const [index, request] of saved.requests.entries()) {
  const status = await send(request, mode === "stall" && index === 1);
  console.log(JSON.stringify({ part: request.partNumber, status }));
  if (status !== 200) process.exit(1);
}
