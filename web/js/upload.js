// A file straight to storage, the way POST /uploads answered: the presigned form, one
// presigned PUT with exactly its signed headers, or the parts of a multipart upload, a few at
// a time, then the completion (CONTRACT.md, "Uploads a phone can make in the background").
// api.js imports this module and this one api.js's helpers: only functions cross, so the cycle
// is safe.
import { ProblemError, retrying, send } from "./api.js";

const PART_CONCURRENCY = 4;
// The browser sets these itself from the body and refuses (with a console error) to be told.
const FORBIDDEN = new Set(["content-length", "host"]);

// The method the page asks for a file over the API's limit: one PUT, or parts from the
// server's MULTIPART_MIN_BYTES. The SHA-256 pins a PUT's bytes (storage refuses others).
export async function directRequest(file, contentType, multipartMinBytes) {
  const body = { content_type: contentType, size: file.size };
  if (file.size >= multipartMinBytes) return { ...body, method: "multipart" };
  return { ...body, method: "PUT", ...(await sha256(file)) };
}

// Sends `file` as `upload` (POST /uploads' answer) says; for multipart, completes through the api.
export async function toStorage(api, jobId, upload, file, { onProgress, signal } = {}) {
  try {
    if (upload.method === "multipart") return await putParts(api, jobId, upload, file, onProgress, signal);
    if (upload.method === "PUT") {
      return await retrying(() => send("PUT", upload.url, {
        headers: allowed(upload.headers), body: file, onProgress, signal, storage: true }), signal);
    }
    return await retrying(() => postForm(upload, file, onProgress, signal), signal);
  } catch (error) {
    if (error instanceof ProblemError && error.status) {
      error.title = "Storage refused the upload";
      error.message = error.title;
    }
    throw error;
  }
}

// The presigned POST form, fields first and the file last, as S3 wants.
function postForm(upload, file, onProgress, signal) {
  const form = new FormData();
  for (const [name, value] of Object.entries(upload.fields)) form.append(name, value);
  form.append("file", file, file.name);
  return send("POST", upload.url, { body: form, onProgress, signal, storage: true });
}

// The parts storage does not hold, PART_CONCURRENCY at a time; a part whose URL storage
// refuses (expired: 403) gets a fresh one from GET .../upload, once. Then the completion:
// with every part's ETag when storage let the page read them (CORS exposes ETag), else an
// empty body, and the server lists the parts itself.
async function putParts(api, jobId, upload, file, onProgress, signal) {
  const sent = new Map(); // part number -> bytes sent
  const report = () => {
    let done = 0;
    for (const bytes of sent.values()) done += bytes;
    onProgress?.(done / file.size);
  };
  const etags = new Map();
  for (const part of upload.parts) {
    if (part.stored) { sent.set(part.part_number, part.size); etags.set(part.part_number, part.etag); }
  }
  report();
  let todo = upload.parts.filter((part) => !part.stored);
  for (let round = 0; todo.length; round++) {
    const refused = await pool(todo, PART_CONCURRENCY, async (part) => {
      const start = (part.part_number - 1) * upload.part_size;
      try {
        const answer = await retrying(() => send("PUT", part.url, {
          body: file.slice(start, start + part.size), signal, storage: true,
          onProgress: (fraction) => { sent.set(part.part_number, fraction * part.size); report(); },
        }), signal);
        etags.set(part.part_number, answer.etag);
        sent.set(part.part_number, part.size);
        report();
        return null;
      } catch (error) {
        if (error.status !== 403 || round > 0) throw error;
        return part.part_number;
      }
    });
    const again = new Set(refused.filter((number) => number !== null));
    if (!again.size) break;
    const fresh = (await api.call("GET", `${api.jobUrl(jobId)}/upload`, { signal })).body;
    todo = fresh.parts.filter((part) => !part.stored && again.has(part.part_number));
  }
  const parts = [...etags].map(([number, etag]) => ({ part_number: number, etag }));
  const every = parts.length === upload.parts.length && parts.every((part) => part.etag);
  return retrying(() => api.call("POST", `${api.jobUrl(jobId)}/upload`, {
    signal, ...(every ? { json: { parts: parts.sort((a, b) => a.part_number - b.part_number) } } : {}),
  }), signal);
}

// run(item) for every item, at most `limit` at once; their results in order. The first
// failure rejects, and no item starts after it (those in flight end on their own).
async function pool(items, limit, run) {
  const results = new Array(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < items.length && !failed) {
      const index = next++;
      try {
        results[index] = await run(items[index]);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

function allowed(headers = {}) {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !FORBIDDEN.has(name.toLowerCase())));
}

// {sha256} for the request, or {} where the page cannot hash (no Web Crypto off https).
async function sha256(file) {
  if (!crypto.subtle) return {};
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", await file.arrayBuffer()));
  return { sha256: btoa(String.fromCharCode(...digest)) };
}
