// The API and storage as far as an upload needs them, on loopback, for bench/progress.mjs (a
// process of its own, so that its CPU is not the client's). Prints its port.
import http from "node:http";

const PART = 8 * 1024 * 1024;
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => { if (req.method === "POST") chunks.push(chunk); });
  req.on("end", () => {
    const json = (status, body, headers = {}) => res.writeHead(status, { "Content-Type": "application/json", ...headers }).end(JSON.stringify(body));
    if (req.method === "PUT") return res.writeHead(200, { ETag: '"e"' }).end();
    const origin = `http://127.0.0.1:${server.address().port}`;
    if (req.method === "POST" && req.url === "/api/v1/uploads") {
      const { size, method } = JSON.parse(Buffer.concat(chunks).toString());
      const id = `j${Math.random().toString(16).slice(2)}`;
      const upload = method === "multipart"
        ? { method, part_size: PART, parts: Array.from({ length: Math.ceil(size / PART) }, (_, i) => ({
          part_number: i + 1, size: Math.min(PART, size - i * PART), stored: false, url: `${origin}/s/${id}?partNumber=${i + 1}` })) }
        : { method: "PUT", url: `${origin}/s/${id}`, headers: { "Content-Type": "image/jpeg" } };
      return json(202, { job_id: id, status: "awaiting_upload", upload }, { Location: `/api/v1/image-jobs/${id}` });
    }
    if (req.method === "POST" && req.url.startsWith("/api/v1/images")) return json(202, { job_id: "t", status: "queued" }, { Location: "/api/v1/image-jobs/t" });
    const id = req.url.split("/")[4];
    return json(200, { job_id: id, status: "queued" });
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
