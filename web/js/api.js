// The image-jobs API as CONTRACT.md describes it, for a browser on another origin.
import { retryAfterSeconds, sleep } from "./poll.js";
import { directRequest, toStorage } from "./upload.js";

// An error answer, with the problem's title (RFC 9457) ready to show.
export class ProblemError extends Error {
  constructor(status, problem = {}, retryAfter = null) {
    const title = problem.title || (status ? `HTTP ${status}` : "The service could not be reached");
    super(title);
    this.status = status;
    this.title = title;
    this.code = problem.code || null;
    this.detail = problem.detail && problem.detail !== title ? problem.detail : "";
    this.retryAfter = retryAfter;
  }
}

const UPLOAD_TRIES = 4;
// What the page shows in <picture> (card.js), unless config.json names the stage's formats.
const DEFAULT_FORMATS = ["avif", "webp"];
// Answers after which the same request, with the same Idempotency-Key, may succeed.
const RETRYABLE = new Set([0, 429, 503]);
// What /uploads accepts as content_type, by file extension, for files the browser gave no type.
const TYPES_BY_EXTENSION = {
  jpg: "image/jpeg", jpeg: "image/jpeg", png: "image/png", webp: "image/webp", gif: "image/gif",
  heic: "image/heic", heif: "image/heif", avif: "image/avif", tif: "image/tiff", tiff: "image/tiff",
};

export function declaredType(file) {
  if (file.type === "image/jpg") return "image/jpeg";
  if (file.type) return file.type;
  const extension = file.name.split(".").pop().toLowerCase();
  return TYPES_BY_EXTENSION[extension] || "application/octet-stream";
}

export class Api {
  // base: the API root, e.g. http://127.0.0.1:8000/api/v1; auth: {token(), refresh()}.
  // Files over maxUploadBytes go straight to storage: by one PUT, and from multipartMinBytes
  // (the server's MULTIPART_MIN_BYTES) in parts. formats: the extra formats every upload asks
  // for (the stage's RENDITION_FORMATS).
  constructor(base, auth, { maxUploadBytes = 4 * 1024 * 1024, multipartMinBytes = 16 * 1024 * 1024,
                            formats = DEFAULT_FORMATS } = {}) {
    this.base = base.replace(/\/+$/, "");
    this.auth = auth;
    this.maxUploadBytes = maxUploadBytes;
    this.multipartMinBytes = multipartMinBytes;
    this.formats = formats;
  }

  jobUrl(jobId) {
    return `${this.base}/image-jobs/${encodeURIComponent(jobId)}`;
  }

  // With waitSeconds, the server may hold the answer until the job differs from `etag`
  // (Prefer: wait); `held` in the answer says it did.
  getJob(jobId, signal, { waitSeconds = 0, etag = null } = {}) {
    const headers = {};
    if (waitSeconds > 0) headers.Prefer = `wait=${waitSeconds}`;
    if (waitSeconds > 0 && etag) headers["If-None-Match"] = etag;
    return this.call("GET", this.jobUrl(jobId), { signal, headers });
  }

  cancel(jobId) {
    return this.call("POST", `${this.jobUrl(jobId)}/cancel`);
  }

  remove(jobId) {
    return this.call("DELETE", this.jobUrl(jobId));
  }

  // Uploads one file through the API, or straight to storage when it is over the API's limit
  // (by PUT or in parts, upload.js), or by the presigned form when the API says a file under
  // it is too large. onCreated(accepted) fires as soon as the job exists.
  async upload(file, { onProgress, onCreated, signal } = {}) {
    const key = crypto.randomUUID(); // one key for every retry of this file's upload
    let json = { content_type: declaredType(file), size: file.size };
    if (file.size <= this.maxUploadBytes) {
      try {
        const accepted = await retrying(() => this.postImage(file, key, onProgress, signal), signal);
        onCreated?.(accepted);
        return accepted;
      } catch (error) {
        if (error.code !== "file_too_large") throw error;
      }
    } else {
      json = await directRequest(file, json.content_type, this.multipartMinBytes);
    }
    const accepted = await retrying(() => this.call("POST", `${this.base}/uploads`, {
      json: { ...json, formats: this.formats }, headers: { "Idempotency-Key": key }, signal,
    }), signal);
    onCreated?.(accepted);
    await toStorage(this, accepted.body.job_id, accepted.body.upload, file, { onProgress, signal });
    return accepted;
  }

  async postImage(file, key, onProgress, signal) {
    const form = new FormData();
    form.append("file", file, file.name);
    const query = this.formats.length ? `?formats=${this.formats.join(",")}` : "";
    return this.authorized((token) => send("POST", `${this.base}/images${query}`, {
      headers: { Authorization: `Bearer ${token}`, "Idempotency-Key": key },
      body: form, onProgress, signal,
    }));
  }

  // A JSON request with the bearer token.
  call(method, url, { json, headers = {}, signal } = {}) {
    return this.authorized(async (token) => {
      let response;
      try {
        response = await fetch(url, {
          method, signal, cache: "no-store",
          headers: { Authorization: `Bearer ${token}`, ...(json ? { "Content-Type": "application/json" } : {}), ...headers },
          body: json ? JSON.stringify(json) : undefined,
        });
      } catch (error) {
        if (error.name === "AbortError") throw error;
        throw new ProblemError(0); // offline, refused, or blocked by CORS: the browser does not say which
      }
      return answer(response.status, await response.text(), (name) => response.headers.get(name));
    });
  }

  // Runs request(token); on 401 asks auth for a fresh token once and runs it again.
  async authorized(request) {
    try {
      return await request(await this.auth.token());
    } catch (error) {
      if (error.status === 401 && await this.auth.refresh()) return request(await this.auth.token());
      throw error;
    }
  }
}

// {status, body, retryAfter, location, etag, held} of a 2xx answer; a ProblemError for any other.
function answer(status, text, header) {
  const retryAfter = retryAfterSeconds(header("Retry-After"));
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (status < 200 || status > 299) throw new ProblemError(status, body || {}, retryAfter);
  return { status, body, retryAfter, location: header("Location"), etag: header("ETag"),
           held: header("Preference-Applied") !== null };
}

// XMLHttpRequest rather than fetch: only it reports upload progress.
// storage: headers are read from those CORS exposes (the bucket's ETag, for parts): asking
// for any other only logs a CORS error.
export function send(method, url, { headers = {}, body, onProgress, signal, storage = false }) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(method, url);
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    if (onProgress) xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onload = () => {
      try {
        const exposed = storage ? exposedHeaders(xhr) : null;
        resolve(answer(xhr.status, xhr.responseText,
          (name) => (storage ? exposed.get(name.toLowerCase()) ?? null : xhr.getResponseHeader(name))));
      } catch (error) {
        if (!error.detail && xhr.responseText.startsWith("<")) error.detail = s3Message(xhr.responseText);
        reject(error);
      }
    };
    xhr.onerror = () => reject(new ProblemError(0));
    xhr.onabort = () => reject(signal?.reason ?? new DOMException("Aborted", "AbortError"));
    if (signal?.aborted) return reject(signal.reason);
    signal?.addEventListener("abort", () => xhr.abort(), { once: true });
    xhr.send(body);
  });
}

function exposedHeaders(xhr) {
  const headers = new Map();
  for (const line of xhr.getAllResponseHeaders().trim().split(/[\r\n]+/)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

function s3Message(xml) {
  const doc = new DOMParser().parseFromString(xml, "application/xml");
  return doc.querySelector("Message")?.textContent || "";
}

// Runs request until it succeeds, fails for good, or UPLOAD_TRIES are spent; waits the
// server's Retry-After (or 1, 2, 4 s) between tries. Retries keep the same Idempotency-Key.
export async function retrying(request, signal) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (error) {
      if (!RETRYABLE.has(error.status) || attempt >= UPLOAD_TRIES) throw error;
      await sleep((error.retryAfter ?? 2 ** (attempt - 1)) * 1000, signal);
    }
  }
}
