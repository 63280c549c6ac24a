// A fresh process and a fresh SDK instance with a prepared upload's saved JSON: "renew" writes
// the requests storage still lacks (fresh URLs) back into it; "complete" completes it and
// waits for the job. Prints one JSON line.
import fs from "node:fs";
import { PreparedUpload } from "../../dist/node.js";
import { client } from "./helpers.mjs";

const [mode, savedPath] = process.argv.slice(2);
const prepared = PreparedUpload.from(fs.readFileSync(savedPath, "utf8"), client());
if (mode === "renew") {
  const requests = await prepared.renew();
  fs.writeFileSync(savedPath, JSON.stringify(prepared));
  console.log(JSON.stringify({ parts: requests.map((request) => request.partNumber) }));
} else {
  const job = await prepared.complete();
  await job.wait({ timeout: 120 });
  console.log(JSON.stringify({ status: job.status, jobId: job.jobId }));
}
