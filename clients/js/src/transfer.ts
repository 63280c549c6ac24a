// Bytes on their way, counted as they go: a file (or part) to storage, or a photo to POST
// /images. fetch reports no upload progress, so where XMLHttpRequest exists (browsers, React
// Native) the request goes by XHR and its `upload.onprogress` counts; where fetch takes a
// stream as a request body (Node 20: undici) the body is a stream of CHUNK_BYTES slices,
// counted as fetch pulls them; anywhere else the bytes are counted when the answer arrives.

/** What a streamed body is cut into: fetch pulls the next one when the socket has taken the last. */
export const CHUNK_BYTES = 64 * 1024;
/** onProgress is called whenever another 1 % of the file or this many bytes, whichever is
 * less, has been sent (and at the start and the end). */
export const PROGRESS_STEP_BYTES = 256 * 1024;

export type XMLHttpRequestConstructor = new () => XMLHttpRequest;
/** Bytes of this request's body sent so far. */
export type Sent = (bytes: number) => void;

export interface Outgoing {
  method: string;
  headers?: Record<string, string>;
  /** A Blob or bytes (counted), or a FormData (counted by XHR only). */
  body: Blob | Uint8Array | FormData;
  /** The body's length: what a streamed body declares as Content-Length. */
  size: number;
  signal?: AbortSignal;
  /** Fetch-only options (`cache`): passed through where fetch sends it. */
  cache?: RequestCache;
}

/** How a client sends counted bodies: "xhr", "stream" (fetch with a streamed body) or "fetch"
 * (counted once the answer arrives). */
export type TransferMode = "xhr" | "stream" | "fetch";

/** The mode where nothing is said: XHR where it exists and fetch is the platform's own;
 * streams in Node; else plain fetch. */
export function defaultMode(customFetch: boolean): TransferMode {
  const g = globalThis as { XMLHttpRequest?: unknown; process?: { versions?: { node?: string } } };
  if (!customFetch && typeof g.XMLHttpRequest === "function") return "xhr";
  // Browsers take stream bodies over HTTP/2 only (Chrome), so streams are for Node's fetch.
  if (typeof g.process?.versions?.node === "string" && typeof ReadableStream === "function") return "stream";
  return "fetch";
}

/** Send `out` and answer storage's (or the API's) response as fetch would, calling `sent`
 * with the bytes of the body sent so far, as often as the platform tells. */
export async function sendCounted(mode: TransferMode, fetchImpl: typeof fetch, Xhr: XMLHttpRequestConstructor | undefined,
                                  url: string, out: Outgoing, sent: Sent): Promise<Response> {
  if (mode === "xhr" && Xhr) return viaXhr(Xhr, url, out, sent);
  if (mode === "stream" && !(out.body instanceof FormData)) {
    const headers = { ...(out.headers ?? {}), "Content-Length": String(out.size) };
    const init = { method: out.method, headers, body: countingStream(out.body, sent), signal: out.signal,
      duplex: "half", ...(out.cache ? { cache: out.cache } : {}) };
    return fetchImpl(url, init as RequestInit);
  }
  const response = await fetchImpl(url, { method: out.method, headers: out.headers, body: out.body as BodyInit,
    signal: out.signal, ...(out.cache ? { cache: out.cache } : {}) });
  if (response.ok) sent(out.size);
  return response;
}

/** The body as a stream of CHUNK_BYTES pieces, each counted when fetch pulls it. */
export function countingStream(body: Blob | Uint8Array, sent: Sent): ReadableStream<Uint8Array> {
  let offset = 0;
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let pending: Uint8Array | null = null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: Uint8Array | null;
      if (body instanceof Uint8Array) {
        chunk = offset < body.byteLength ? body.subarray(offset, offset + CHUNK_BYTES) : null;
      } else {
        // A Blob's own stream (a file's on disk is read as it goes), re-cut into CHUNK_BYTES.
        reader ??= (body.stream() as ReadableStream<Uint8Array>).getReader();
        chunk = pending;
        pending = null;
        if (!chunk) {
          const next = await reader.read();
          chunk = next.done ? null : next.value;
        }
        if (chunk && chunk.byteLength > CHUNK_BYTES) {
          pending = chunk.subarray(CHUNK_BYTES);
          chunk = chunk.subarray(0, CHUNK_BYTES);
        }
      }
      if (!chunk) {
        controller.close();
        return;
      }
      offset += chunk.byteLength;
      controller.enqueue(chunk);
      sent(offset);
    },
    cancel(reason) {
      return reader?.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

function viaXhr(Xhr: XMLHttpRequestConstructor, url: string, out: Outgoing, sent: Sent): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    const xhr = new Xhr();
    const signal = out.signal;
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => xhr.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const settle = () => signal?.removeEventListener("abort", onAbort);
    xhr.open(out.method, url);
    for (const [name, value] of Object.entries(out.headers ?? {})) xhr.setRequestHeader(name, value);
    xhr.responseType = "arraybuffer";
    // A form's envelope is counted too: its share of the file's bytes is what is reported.
    xhr.upload.onprogress = (event) => {
      const loaded = event.lengthComputable && event.total > out.size ? (event.loaded * out.size) / event.total : event.loaded;
      sent(Math.min(out.size, Math.floor(loaded)));
    };
    xhr.onload = () => {
      settle();
      const status = xhr.status;
      if (status < 200 || status > 599) return reject(new TypeError(`network error (status ${status})`));
      const empty = status === 204 || status === 205 || status === 304;
      if (status < 300) sent(out.size);
      resolve(new Response(empty ? null : (xhr.response as ArrayBuffer | null), { status, headers: responseHeaders(xhr) }));
    };
    xhr.onerror = () => { settle(); reject(new TypeError("network error")); };
    xhr.ontimeout = () => { settle(); reject(new TypeError("timed out")); };
    xhr.onabort = () => { settle(); reject(signal?.reason ?? new TypeError("aborted")); };
    xhr.send(out.body as XMLHttpRequestBodyInit);
  });
}

function responseHeaders(xhr: XMLHttpRequest): Headers {
  const headers = new Headers();
  for (const line of xhr.getAllResponseHeaders().split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    try { headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim()); } catch { /* a header Headers refuses */ }
  }
  return headers;
}

/** One upload's progress: bytes stored plus those of the requests in flight, reported to
 * `onProgress` whenever it has grown by a step (1 % of the total or PROGRESS_STEP_BYTES,
 * whichever is less), and at the start and the end. Never goes back: a request tried again
 * counts from 0, and the figure waits until it passes what was reported. */
export class Meter {
  private stored: number;
  private readonly inFlight = new Map<number, number>();
  private reported = -1;
  readonly step: number;
  /** Calls of onProgress so far. */
  events = 0;

  constructor(readonly total: number, private readonly onProgress?: (sent: number, total: number) => void, stored = 0) {
    this.stored = stored;
    this.step = Math.max(1, Math.min(PROGRESS_STEP_BYTES, Math.ceil(total / 100)));
  }

  /** Where it stands now, reported at once (the start, or a resume's stored bytes). */
  start(): void { this.report(true); }

  /** Request `id` has sent `bytes` of its body. */
  sending(id: number, bytes: number): void {
    this.inFlight.set(id, bytes);
    this.report(false);
  }

  /** Request `id` ended: its `bytes` are stored (0 when it failed). */
  finished(id: number, bytes: number): void {
    this.inFlight.delete(id);
    this.stored += bytes;
    this.report(false);
  }

  /** Everything is there (a replay whose file had arrived, or a completion). */
  all(): void {
    this.inFlight.clear();
    this.stored = this.total;
    this.report(false);
  }

  get sent(): number {
    let sum = this.stored;
    for (const bytes of this.inFlight.values()) sum += bytes;
    return Math.min(sum, this.total);
  }

  private report(force: boolean): void {
    const sent = this.sent;
    if (sent <= this.reported) return;
    if (!force && sent < this.total && sent - this.reported < this.step) return;
    this.reported = sent;
    this.events += 1;
    this.onProgress?.(sent, this.total);
  }
}
