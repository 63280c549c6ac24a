// Client: the API's HTTP calls, their bounded retries, and the three upload routes.
import * as errors from "./errors.js";
import { Job, Status, jsonObject } from "./job.js";
import { ARRIVAL_SECONDS, MAX_HOLD_SECONDS, retryAfter, retryWait, type Random } from "./polling.js";
import { Hub, Watch, type WatchOptions, type WebSocketLike } from "./push.js";
import { contentTypeOf, describeSource, readSource, sha256Base64, type Body, type Source } from "./source.js";
import { loadRecord, memoryStorage, type UploadStorage } from "./storage.js";
import { deadlineSignal, sleep } from "./timing.js";
import { Meter, defaultMode, sendCounted, type Sent, type TransferMode, type XMLHttpRequestConstructor } from "./transfer.js";
import { PreparedUpload, type UploadDescription } from "./prepared.js";

export const API_ROOT = "/api/v1";
/** The app's backend (docs/contract.md "The service principal"): a token with this OAuth scope
 * reads, lists and deletes any owner's jobs, on the /service/ routes only. */
export const SERVICE_SCOPE = "image-jobs/service";
/** The server's default MAX_UPLOAD_BYTES, its limit on POST /images; larger files go straight to storage. */
export const DEFAULT_MAX_UPLOAD_BYTES = 4 * 1024 * 1024;
/** @deprecated Its name in 0.1.0: use DEFAULT_MAX_UPLOAD_BYTES (read for one release). */
export const DEFAULT_DIRECT_THRESHOLD = DEFAULT_MAX_UPLOAD_BYTES;
/** The server's default MULTIPART_MIN_BYTES: from here on, in parts. */
export const DEFAULT_MULTIPART_THRESHOLD = 16 * 1024 * 1024;
/** Parts sent at once. */
export const PART_CONCURRENCY = 4;
/** docs/contract.md, "Which answers a client retries": 429 and 503 say the service did not
 * act, so any request is tried again; 502/504 (gateways in front of it) and a lost connection
 * leave it unknown, so only a request that is safe to repeat is. */
export const RETRY_ALWAYS: ReadonlySet<number> = new Set([429, 503]);
export const RETRY_IF_REPEATABLE: ReadonlySet<number> = new Set([502, 504]);
const REPEATABLE_METHODS = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);
/** Headers fetch sets itself from the body, and browsers refuse to be told. */
const FORBIDDEN = new Set(["content-length", "host"]);

export type Progress = (sent: number, total: number) => void;
export type PartProgress = (partNumber: number, sent: number, size: number) => void;
export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike;

export interface ClientOptions {
  /** The service's origin, e.g. "https://api.example.com" (the API is under /api/v1). */
  baseUrl: string;
  /** A bearer token, or a function answering one (asked before each request, again after a 401). */
  token?: string | (() => string | Promise<string>);
  /** Where there is no global WebSocket (Node 20): the `ws` package's, say. */
  WebSocket?: WebSocketConstructor;
  fetch?: typeof fetch;
  /** How file bytes are sent, counted for onProgress as they go: "xhr" (XMLHttpRequest's
   * upload.onprogress; the default where XMLHttpRequest exists and `fetch` is not given),
   * "stream" (fetch with a streamed body, counted as fetch pulls it; the default in Node) or
   * "fetch" (counted when each request is answered). */
  transfer?: TransferMode;
  /** The XMLHttpRequest the "xhr" transfer uses (the global one by default). */
  XMLHttpRequest?: XMLHttpRequestConstructor;
  /** Where unfinished uploads' state is kept (memory by default; localStorage, AsyncStorage...). */
  storage?: UploadStorage;
  /** The server's limit on POST /images (its MAX_UPLOAD_BYTES); larger files go straight to storage. */
  maxUploadBytes?: number;
  /** @deprecated Its name in 0.1.0: use maxUploadBytes (read for one release). */
  directThreshold?: number;
  multipartThreshold?: number;
  /** Tries of one request, and failed polls in a row, before giving up. */
  maxAttempts?: number;
  /** A Retry-After longer than this (seconds) is not waited out but thrown. */
  maxRetryWait?: number;
  /** Seconds a request may take; a held poll holds for less (and is given the hold on top). */
  timeout?: number;
  /** Ask the server to hold polls (Prefer: wait); false polls on the schedule only. */
  waits?: boolean;
  /** Held polls of this client in flight at once (unlimited by default); a poll past it goes
   * unheld, on the schedule. A browser opens at most six HTTP/1.1 connections to one origin:
   * four held polls leave two for uploads and other calls. */
  maxHeld?: number;
  clock?: () => number;
  random?: Random;
  /** The token is the service principal's (the app's backend): jobs are read, listed and
   * deleted on the /service/ routes. By default read from the token: a JWT whose `scope` claim
   * names `image-jobs/service` (read, not verified: the server checks the token). */
  service?: boolean;
}

export interface UploadOptions {
  contentType?: string;
  /** One key covers the whole upload and each of its retries; stored for a resume. */
  idempotencyKey?: string;
  /** What a later run recognises this file by (default: name, size and date of a File, a
   * React Native uri and size, or the SHA-256 of bytes). */
  fingerprint?: string;
  filename?: string;
  /** Extra formats of every rendition besides its JPEG ("avif", "webp"). */
  formats?: readonly string[];
  /** The sizes to make besides `display` and `thumb`, by rendition name ("thumb_512"); the
   * server's default set when not given (docs/contract.md "Sizes for every screen"). */
  renditions?: readonly string[];
  /** The app's own strings, kept with the job and shown as `job.metadata` (docs/contract.md
   * "Metadata": at most 16 keys, 512 characters a value, 2048 bytes in all). */
  metadata?: Readonly<Record<string, string>>;
  /** Where the subject is, fractions 0..1 of the upright image from its top left: the square
   * renditions are placed around it (without it the server finds one); `job.focus` shows the
   * one used. Anything else is refused (InvalidRequest). */
  focus?: Readonly<{ x: number; y: number }>;
  /** Seconds the job may be waited for after the upload (Prefer: wait): a fast job comes back finished. */
  wait?: number;
  /** (bytes sent, total), by the byte on every route: at the start (a resume: what storage
   * already holds), whenever another 1 % or 256 KiB has gone, and at the end. Counted by
   * XMLHttpRequest's upload.onprogress in browsers and React Native, as the stream is pulled in
   * Node; by a plain fetch (`transfer: "fetch"`) only as each request is answered. */
  onProgress?: Progress;
  onPartProgress?: PartProgress;
  /** Aborting it stops the upload with UploadStopped, and no request starts after it: POST
   * /images, POST /uploads, a single PUT or form at once; parts in flight are finished. The
   * stopped upload's job is cancelled (an unfinished job counts against its owner's limit
   * until its upload's deadline) unless `keepStopped`: one try of at most 5 s, so a stop never
   * waits on a slow answer. */
  signal?: AbortSignal;
  /** Keep a stopped upload's job `awaiting_upload`, with its record in `storage`, for a resume. */
  keepStopped?: boolean;
  /** Called as soon as the job exists (before its file is sent). */
  onCreated?: (job: Job) => void;
}

/** A 2xx answer: status, headers, parsed JSON body (or null). */
export interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
  retryAfter: number | null;
}

export interface RequestOptions {
  retry?: boolean;
  /** Safe to repeat after a lost answer (default: GET, PUT, DELETE, or with an Idempotency-Key). */
  repeatable?: boolean;
  json?: unknown;
  body?: BodyInit | Uint8Array;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Seconds the server may hold it: added to the request's timeout. */
  hold?: number;
  /** Seconds each try may take at most, below the client's own timeout. */
  timeout?: number;
  /** With a Blob or bytes `body`: called with the bytes of it sent so far, as they go. */
  sent?: Sent;
}

/** One try's body of a request to storage; `skip`: bytes of envelope before the file's. */
interface StorageBody { headers?: Record<string, string>; body: Blob | Uint8Array | FormData; size: number; skip?: number; }

export interface JobsOptions {
  /** One status or several. */
  status?: string | readonly string[];
  /** With the service principal's token: that owner's jobs (GET /service/image-jobs). */
  owner?: string;
  /** RFC 3339 times, exclusive. */
  createdAfter?: string;
  createdBefore?: string;
  pageSize?: number;
  signal?: AbortSignal;
}

/** What prepareUpload() takes: upload()'s choices of the job (its sending is the caller's). */
export type PrepareOptions = Pick<UploadOptions, "contentType" | "idempotencyKey" | "fingerprint" | "formats"
  | "renditions" | "focus" | "metadata" | "signal" | "onCreated">;

export class Client {
  readonly baseUrl: string;
  readonly maxUploadBytes: number;
  readonly multipartThreshold: number;
  readonly maxAttempts: number;
  readonly maxRetryWait: number;
  readonly timeout: number;
  readonly waits: boolean;
  /** Seconds a held poll asks for: under the request timeout, with time to spare. */
  readonly holdSeconds: number;
  readonly storage: UploadStorage;
  readonly clock: () => number;
  readonly random: Random;
  readonly WebSocket: WebSocketConstructor | undefined;
  readonly maxHeld: number;
  /** Held polls in flight now. */
  held = 0;
  /** Bytes of files and parts sent to storage: what a resume saves. */
  bytesToStorage = 0;
  /** How counted bodies go (ClientOptions.transfer). */
  readonly transfer: TransferMode;
  private readonly fetchImpl: typeof fetch;
  private readonly Xhr: XMLHttpRequestConstructor | undefined;
  private readonly token: ClientOptions["token"];
  private hub: Hub | null = null;
  private serviceFlag: boolean | undefined;
  // The uploads under way in this client, by record: a second upload of the same file at
  // the same time is a second job (as two picks of one photo are), not a resume of the first.
  private readonly uploading = new Set<string>();

  constructor(options: ClientOptions) {
    if (!options?.baseUrl) throw new TypeError("new Client({ baseUrl }) needs the service's URL");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.Xhr = options.XMLHttpRequest ?? (globalThis as { XMLHttpRequest?: XMLHttpRequestConstructor }).XMLHttpRequest;
    this.transfer = options.transfer ?? (options.XMLHttpRequest ? "xhr" : defaultMode(options.fetch !== undefined));
    this.WebSocket = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    this.storage = options.storage ?? memoryStorage();
    this.maxUploadBytes = options.maxUploadBytes ?? options.directThreshold ?? DEFAULT_MAX_UPLOAD_BYTES;
    this.multipartThreshold = options.multipartThreshold ?? DEFAULT_MULTIPART_THRESHOLD;
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 5);
    this.maxRetryWait = options.maxRetryWait ?? 120;
    this.timeout = options.timeout ?? 30;
    this.waits = options.waits ?? true;
    this.maxHeld = Math.max(0, options.maxHeld ?? Infinity);
    this.holdSeconds = Math.max(0, Math.min(MAX_HOLD_SECONDS, Math.floor(this.timeout) - 2));
    this.clock = options.clock ?? (() => Date.now());
    this.random = options.random ?? Math.random;
    this.serviceFlag = options.service;
  }

  /** Whether this client is the service principal's (given, or read from its token once). */
  async isService(): Promise<boolean> {
    return this.serviceFlag ?? this.serviceOf(await this.bearer());
  }

  private serviceOf(token: string | null): boolean {
    this.serviceFlag ??= isServiceToken(token);
    return this.serviceFlag;
  }

  /** Closes the push socket, if one is open. */
  close(): void {
    this.hub?.close();
    this.hub = null;
  }

  /** An absolute URL for a path such as a Location header, or the URL itself. */
  url(target: string): string {
    return new URL(target, `${this.baseUrl}/`).toString();
  }

  /** The job named by its id, its Location path or its full URL; nothing is fetched yet. A
   * service client reads and deletes it on the service's route, whichever route it names. */
  job(ref: string): Job {
    if (ref.includes("://") || ref.startsWith("/")) return new Job(this, this.url(ref));
    return new Job(this, this.url(`${API_ROOT}/image-jobs/${encodeURIComponent(ref)}`));
  }

  /** Every job of the caller, newest first, page after page (GET /api/v1/image-jobs), each as
   * GET shows it: `for await (const job of client.jobs({ status: "ready" }))`. A service
   * client must name an `owner` (TypeError without: the service lists one owner at a time). */
  async *jobs(options: JobsOptions = {}): AsyncGenerator<Job> {
    if (options.owner === undefined && await this.isService()) {
      throw new TypeError("a service client lists one owner's jobs: jobs({ owner }); the service webhook tells of every owner's jobs");
    }
    const query = new URLSearchParams();
    const statuses = typeof options.status === "string" ? [options.status] : [...(options.status ?? [])];
    for (const status of statuses) query.append("status", status);
    for (const [name, value] of [["owner", options.owner], ["created_after", options.createdAfter],
      ["created_before", options.createdBefore], ["page_size", options.pageSize]] as const) {
      if (value !== undefined) query.append(name, String(value));
    }
    const path = `${API_ROOT}/${options.owner === undefined ? "" : "service/"}image-jobs`;
    let token: string | null = null;
    for (;;) {
      const page = new URLSearchParams(query);
      if (token) page.set("page_token", token);
      const text = page.toString();
      const answer = await this.request("GET", text ? `${path}?${text}` : path, { signal: options.signal });
      const body = jsonObject(answer);
      for (const data of Array.isArray(body.jobs) ? body.jobs : []) {
        if (!data || typeof data.job_id !== "string") continue;
        // The service's jobs are read again (refresh, wait) on its own route.
        yield new Job(this, this.url(`${path}/${encodeURIComponent(data.job_id)}`), data);
      }
      token = typeof body.next_page_token === "string" && body.next_page_token ? body.next_page_token : null;
      if (!token) return;
    }
  }

  /** The owner's webhook (docs/contract.md "Notifications"): registered or changed. `secret`
   * (`whsec_...`, what verifyWebhook takes) is in the answer only when it is new. */
  async setWebhook(url: string): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("PUT", `${API_ROOT}/webhook`, { json: { url } }));
  }

  /** The owner's webhook: `url`, `breaker` and the last 20 delivery attempts (`deliveries`,
   * newest first; null when they cannot be read just now); `{url: null}` when there is none. */
  async webhook(): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("GET", `${API_ROOT}/webhook`));
  }

  /** Send a signed `webhook.test` event to the owner's webhook now: the attempt, with the
   * receiver's `status_code` or the `reason` it never answered. 3 in a row, then one per 20 s
   * (RateLimited, never retried here); WebhookNotFound when none is registered. */
  async testWebhook(): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("POST", `${API_ROOT}/webhook/test`, { retry: false }));
  }

  async deleteWebhook(): Promise<void> {
    await this.request("DELETE", `${API_ROOT}/webhook`);
  }

  /** A new secret for the owner's webhook (the old one still signs for 24 hours), in the
   * answer. Never retried after a lost answer, as rotateServiceWebhookSecret. */
  async rotateWebhookSecret(): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("POST", `${API_ROOT}/webhook/rotate-secret`));
  }

  /** The service principal's one webhook for every owner's jobs: registered (or changed), with
   * `events` the statuses sent (default the terminal ones). `secret` is in the answer only
   * when it is new. */
  async setServiceWebhook(url: string, events?: readonly string[]): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("PUT", `${API_ROOT}/service/webhook`, { json: { url, ...(events ? { events: [...events] } : {}) } }));
  }

  /** The service webhook's `url`, `events`, `breaker` and last 20 delivery attempts
   * (`deliveries`, newest first); `{url: null}` when there is none. */
  async serviceWebhook(): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("GET", `${API_ROOT}/service/webhook`));
  }

  /** Send a signed `webhook.test` event to the service webhook now: the attempt, with the
   * receiver's `status_code` or the `reason` it never answered. 3 in a row, then one per 20 s
   * (RateLimited, never retried here); WebhookNotFound when none is registered. */
  async testServiceWebhook(): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("POST", `${API_ROOT}/service/webhook/test`, { retry: false }));
  }

  async deleteServiceWebhook(): Promise<void> {
    await this.request("DELETE", `${API_ROOT}/service/webhook`);
  }

  /** A new secret (the old one still signs for 24 hours), in the answer. Never retried after a
   * lost answer: a second rotation would end the first new secret's overlap at once. */
  async rotateServiceWebhookSecret(): Promise<Record<string, unknown>> {
    return jsonObject(await this.request("POST", `${API_ROOT}/service/webhook/rotate-secret`));
  }

  /** The updates of `jobs` (Job objects or ids; none: every job of the owner) over one
   * WebSocket: `for await (const job of client.watch(jobs))`. */
  watch(jobs?: Iterable<Job | string> | null, options: WatchOptions = {}): Watch {
    return new Watch(this, jobs ?? null, options);
  }

  /** @internal A held poll's slot: its release, or null when `maxHeld` are in flight. */
  _takeHold(): (() => void) | null {
    if (this.held >= this.maxHeld) return null;
    this.held += 1;
    let released = false;
    return () => { if (!released) { released = true; this.held -= 1; } };
  }

  /** @internal The client's one push socket for job.wait({push: true}); null where none opens. */
  async _pushHub(end: number | null): Promise<Hub | null> {
    // The service principal has no push socket (its token is refused at connect): it polls.
    if (!this.WebSocket || await this.isService()) return null;
    this.hub ??= new Hub(this);
    const timeout = end === null ? 10_000 * this.maxAttempts : Math.max(0, end - this.clock());
    return (await this.hub.ready(timeout)) ? this.hub : null;
  }

  /**
   * Upload one image and answer its job. Up to `maxUploadBytes` bytes through POST /images;
   * larger ones straight to storage by one presigned PUT (with its SHA-256), and from
   * `multipartThreshold` in parts, PART_CONCURRENCY at a time. The Idempotency-Key and then
   * the job's Location are kept in `storage` under the file's fingerprint, so the same call
   * after a crash resumes: it sends only the parts storage does not hold, or answers the job
   * when its file had arrived; a job gone, cancelled or failed upload_missing is left, and the
   * file uploaded anew with a new key (tests/sdk_rules.json, the Python SDK's rules too). The
   * job answered has its file: `queued` or further along (a multipart job is queued by its
   * completion; after a single PUT the upload waits, held, at most ARRIVAL_SECONDS for
   * storage's event to move it).
   */
  async upload(source: Source, options: UploadOptions = {}): Promise<Job> {
    const body = await readSource(source, this.fetchImpl);
    const ctype = await contentTypeOf(body, options.contentType);
    const direct = body.size > this.maxUploadBytes;
    const multipart = body.size >= this.multipartThreshold;
    const sha256 = direct && !multipart ? await sha256Base64(body) : null;
    let recordKey = await this.recordKey(body, options, sha256);
    if (recordKey && this.uploading.has(recordKey)) recordKey = null;
    if (recordKey) this.uploading.add(recordKey);
    try {
      return await this.uploadAs(body, ctype, direct, multipart, sha256, recordKey, options);
    } catch (error) {
      const failure = await this.stopped(error, options);
      // A stopped upload whose job was cancelled has nothing left to resume.
      if (recordKey && failure instanceof errors.UploadStopped && failure.job?.finished) await this.storage.removeItem(recordKey);
      throw failure;
    } finally {
      if (recordKey) this.uploading.delete(recordKey);
    }
  }

  /**
   * Make the job of an upload that something else sends: the platform's background uploader
   * (iOS's URLSession, Android's WorkManager, Expo's FileSystem.uploadAsync), another process,
   * curl. The job is made as upload() makes it (the same Idempotency-Key kept in `storage`
   * under the file's fingerprint, formats, sizes, focus, metadata), always straight to storage:
   * one presigned PUT (with the file's SHA-256 where it can be read here), or from
   * `multipartThreshold` in parts. Answers `{ job, requests, complete() }`: `requests` are plain
   * HTTP requests, each sending bytes `offset` to `offset + length` of the file; `complete()`
   * after them. `renew()` signs the requests storage still lacks anew; `JSON.stringify()` keeps
   * it, and `PreparedUpload.from(saved, client)` finishes it in another process. A React Native
   * `{uri, type, size}` giving both is not read at all. The same file prepared again (or
   * upload()ed) while its job awaits its file answers that job, with what storage lacks.
   */
  async prepareUpload(source: Source, options: PrepareOptions = {}): Promise<PreparedUpload> {
    const body = await describeSource(source, this.fetchImpl);
    const ctype = await contentTypeOf(body, options.contentType);
    const multipart = body.size >= this.multipartThreshold;
    const sha256 = multipart ? null : await sha256Base64(body);
    const recordKey = await this.recordKey(body, options, sha256);
    let record = recordKey ? await loadRecord(this.storage, recordKey) : null;
    if (record?.location) {
      const again = await this.preparedAgain(this.job(record.location), body.size, ctype, recordKey, options);
      if (again) return again;
      record = null; // a new upload, with a new key: the saved one would answer the dead job
    }
    const key = options.idempotencyKey ?? record?.idempotencyKey ?? randomKey();
    if (recordKey) await this.storage.setItem(recordKey, JSON.stringify({ idempotencyKey: key }));
    const request = { ...this.uploadRequest(ctype, body.size, options), method: multipart ? "multipart" : "PUT",
      ...(sha256 ? { sha256 } : {}) };
    this.stopIfAborted(options.signal);
    const answer = await this.request("POST", `${API_ROOT}/uploads`, { json: request, headers: { "Idempotency-Key": key }, signal: options.signal });
    const job = this.accepted(answer);
    if (recordKey) await this.storage.setItem(recordKey, JSON.stringify({ idempotencyKey: key, location: job.location }));
    options.onCreated?.(job);
    const upload = job.raw.upload as UploadDescription | undefined;
    if (job.status === Status.AWAITING_UPLOAD && upload?.method) {
      return PreparedUpload.described(this, job, upload, body.size, ctype, recordKey);
    }
    return this.nothingToSend(job, multipart, body.size, ctype, recordKey); // a replay: the file had arrived
  }

  /** A prepared upload from a file's saved job: what storage lacks; null when the job ended without its file. */
  private async preparedAgain(job: Job, size: number, ctype: string, recordKey: string | null, options: PrepareOptions): Promise<PreparedUpload | null> {
    try {
      await job.refresh({ signal: options.signal });
    } catch (error) {
      if (error instanceof errors.JobNotFound || error instanceof errors.JobExpired) return null;
      throw error;
    }
    if (withoutItsFile(job)) return null;
    let upload: UploadDescription | null = null;
    if (job.status === Status.AWAITING_UPLOAD) {
      try {
        upload = await this.describe(job, options.signal);
      } catch (error) {
        if (error instanceof errors.InvalidRequest) return null; // its upload was aborted
        throw error;
      }
    }
    options.onCreated?.(job);
    if (upload?.method === "PUT" || upload?.method === "multipart") return PreparedUpload.described(this, job, upload, size, ctype, recordKey);
    if (upload) return null; // a presigned form: not something to hand over
    return this.nothingToSend(job, size >= this.multipartThreshold, size, ctype, recordKey);
  }

  private nothingToSend(job: Job, multipart: boolean, size: number, ctype: string, record: string | null): PreparedUpload {
    return new PreparedUpload(this, job, { method: multipart ? "multipart" : "PUT", size, contentType: ctype,
      partSize: null, expiresAt: null, requests: [], record });
  }

  /** Where an upload's state is kept: the file's fingerprint with what else makes the job. The
   * same file with other formats, sizes, focus or metadata is another upload, never a resume
   * of it (a plain upload keeps the key earlier releases stored, so their records still resume). */
  private async recordKey(body: Body, options: UploadOptions, sha256: string | null): Promise<string | null> {
    const fingerprint = options.fingerprint ?? body.identity ?? (sha256 ?? await sha256Base64(body));
    if (!fingerprint) return null;
    const formats = options.formats ?? [];
    const metadata = Object.entries(options.metadata ?? {}).sort();
    const others = [...(options.renditions ? [["renditions", [...options.renditions].sort()]] : []),
      ...(options.focus ? [["focus", options.focus.x, options.focus.y]] : [])];
    const asked = formats.length || metadata.length || others.length
      ? `:${JSON.stringify(others.length ? [formats, metadata, ...others] : [formats, metadata])}` : "";
    return `image-jobs:upload:${this.baseUrl}:${fingerprint}${asked}`;
  }

  /** POST /uploads's body: the file's type and size and the job's options. */
  private uploadRequest(ctype: string, size: number, options: UploadOptions): Record<string, unknown> {
    const request: Record<string, unknown> = { content_type: ctype, size };
    if (options.formats?.length) request.formats = [...options.formats];
    if (options.renditions) request.renditions = [...options.renditions];
    if (options.focus) request.focus = { x: options.focus.x, y: options.focus.y };
    if (options.metadata && Object.keys(options.metadata).length) request.metadata = { ...options.metadata };
    return request;
  }

  private async uploadAs(body: Body, ctype: string, direct: boolean, multipart: boolean, sha256: string | null,
                         recordKey: string | null, options: UploadOptions): Promise<Job> {
    let record = recordKey ? await loadRecord(this.storage, recordKey) : null;
    if (record?.location) {
      const resumed = await this.resumeSaved(this.job(record.location), body, options);
      await this.storage.removeItem(recordKey!);
      if (resumed) return this.heldPoll(resumed, options.wait ?? 0);
      record = null; // a new upload, with a new key: the saved one would answer the dead job
    }
    const key = options.idempotencyKey ?? record?.idempotencyKey ?? randomKey();
    if (recordKey) await this.storage.setItem(recordKey, JSON.stringify({ idempotencyKey: key }));
    let job: Job;
    if (!direct) {
      try {
        job = await this.uploadThroughApi(body, ctype, key, options);
        if (recordKey) await this.storage.removeItem(recordKey);
        return job;
      } catch (error) {
        // This server's /images limit is lower than our maxUploadBytes: the direct route has its own.
        if (!(error instanceof errors.FileTooLarge)) throw error;
      }
    }
    const request = this.uploadRequest(ctype, body.size, options);
    if (multipart) request.method = "multipart";
    else {
      request.method = "PUT";
      const digest = sha256 ?? await sha256Base64(body);
      if (digest) request.sha256 = digest;
    }
    this.stopIfAborted(options.signal);
    const answer = await this.request("POST", `${API_ROOT}/uploads`, { json: request, headers: { "Idempotency-Key": key }, signal: options.signal });
    job = this.accepted(answer);
    if (recordKey) await this.storage.setItem(recordKey, JSON.stringify({ idempotencyKey: key, location: job.location }));
    options.onCreated?.(job);
    const upload = job.raw.upload as UploadDescription | undefined;
    if (job.status === Status.AWAITING_UPLOAD && upload?.method) {
      await this.sendAs(job, upload, body, ctype, options);
      job._retryAt = this.clock() + (answer.retryAfter ?? 0) * 1000;
    } else {
      new Meter(body.size, options.onProgress, body.size).start(); // a replay: the file had already arrived
    }
    if (recordKey) await this.storage.removeItem(recordKey);
    return this.heldPoll(job, options.wait ?? 0);
  }

  /** Finish the upload of `job` (still `awaiting_upload`) from `source`, the same file: only
   * what storage lacks is sent. An upload whose file had already arrived sends nothing and
   * answers the job as the server shows it. */
  async resume(job: Job, source: Source, options: UploadOptions = {}): Promise<Job> {
    try {
      const upload = await this.describe(job, options.signal);
      if (upload) await this.sendRest(job, upload, await readSource(source, this.fetchImpl), options);
      return job;
    } catch (error) {
      throw await this.stopped(error, options, job);
    }
  }

  /** An upload's error: once the caller's signal fired, UploadStopped, its job cancelled
   * unless the caller keeps it to resume. */
  private async stopped(error: unknown, options: UploadOptions, job: Job | null = null): Promise<unknown> {
    const failure = stoppedBy(error, options.signal, job);
    if (failure instanceof errors.UploadStopped && failure.job && !options.keepStopped) await cancelStopped(failure.job);
    return failure;
  }

  /** The job of an upload an earlier call saved and did not finish, read, and its upload
   * finished; a job whose file had arrived is answered as it is. Null when there is nothing
   * to go on with: the job is gone (404, 410) or ended without its file (cancelled, failed
   * upload_missing, or its upload aborted). */
  private async resumeSaved(job: Job, body: Body, options: UploadOptions): Promise<Job | null> {
    try {
      await job.refresh({ signal: options.signal });
    } catch (error) {
      if (error instanceof errors.JobNotFound || error instanceof errors.JobExpired) return null;
      throw error;
    }
    if (withoutItsFile(job)) return null;
    if (job.status !== Status.AWAITING_UPLOAD) { // its file had arrived: only the job is left to follow
      options.onCreated?.(job);
      return job;
    }
    let upload: UploadDescription | null;
    try {
      upload = await this.describe(job, options.signal);
    } catch (error) {
      if (error instanceof errors.InvalidRequest) return null; // its upload ended since the read: aborted, or with its job
      throw error;
    }
    options.onCreated?.(job);
    if (upload) {
      await this.sendRest(job, upload, body, options);
      await job.refresh({ signal: options.signal });
    }
    return job;
  }

  /** What is left to send of the job's upload (GET .../upload); null when its file had
   * arrived: the answer is then the job itself (no `method`), read into `job`. */
  private async describe(job: Job, signal?: AbortSignal): Promise<UploadDescription | null> {
    const answer = await this.request("GET", `${job.location}/upload`, { signal });
    const upload = jsonObject(answer);
    if ("method" in upload || typeof upload.status !== "string") return upload as UploadDescription;
    job._with(upload, answer);
    return null;
  }

  /** What storage lacks of a described upload, then the completion. */
  private async sendRest(job: Job, upload: UploadDescription, body: Body, options: UploadOptions): Promise<void> {
    const ctype = upload.headers?.["Content-Type"] ?? await contentTypeOf(body, options.contentType);
    await this.sendAs(job, upload, body, ctype, options);
  }

  private async uploadThroughApi(body: Body, ctype: string, key: string, options: UploadOptions): Promise<Job> {
    const headers: Record<string, string> = { "Content-Type": ctype, "Idempotency-Key": key };
    const hold = this.waits ? Math.min(Math.floor(options.wait ?? 0), this.holdSeconds) : 0;
    if (hold >= 1) headers.Prefer = `wait=${hold}`;
    // A header carries ASCII only: JSON with \u escapes (never the query string).
    if (options.metadata && Object.keys(options.metadata).length) headers["Image-Jobs-Metadata"] = asciiJson(options.metadata);
    const params = new URLSearchParams();
    if (options.formats?.length) params.set("formats", options.formats.join(","));
    if (options.renditions) params.set("renditions", options.renditions.join(","));
    if (options.focus) params.set("focus", `${plainDecimal(options.focus.x)},${plainDecimal(options.focus.y)}`);
    const query = params.size ? `?${params.toString().replace(/%2C/g, ",")}` : "";
    this.stopIfAborted(options.signal);
    const meter = new Meter(body.size, options.onProgress);
    meter.start();
    const answer = await this.request("POST", `${API_ROOT}/images${query}`, {
      body: body.slice(0, body.size), headers, hold, signal: options.signal, sent: (bytes) => meter.sending(0, bytes) });
    meter.finished(0, body.size);
    const job = this.accepted(answer);
    options.onCreated?.(job);
    if (hold >= 1 && !job.finished && !job._held) return this.heldPoll(job, options.wait ?? 0);
    return job;
  }

  private async heldPoll(job: Job, wait: number): Promise<Job> {
    if (wait < 1 || !this.waits || job.finished) return job;
    try {
      return await job.wait({ timeout: wait });
    } catch (error) {
      if (error instanceof errors.WaitTimeout) return job;
      throw error;
    }
  }

  /** The job of an upload's answer: 202, or 200 with the finished job after a wait. */
  private accepted(answer: Answer): Job {
    const body = jsonObject(answer);
    const location = answer.headers.get("location");
    if (location) return new Job(this, this.url(location))._with(body, answer);
    if (typeof body.job_id !== "string") throw new errors.UnexpectedResponse(`${answer.status} without Location or job_id`);
    return this.job(body.job_id)._with(body, answer);
  }

  private async sendAs(job: Job, upload: UploadDescription, body: Body, ctype: string, options: UploadOptions): Promise<void> {
    try {
      if (upload.method === "PUT" || upload.method === "POST") {
        this.stopIfAborted(options.signal);
        const meter = new Meter(body.size, options.onProgress);
        meter.start();
        const make = upload.method === "PUT"
          ? () => ({ headers: allowed(upload.headers), body: body.slice(0, body.size), size: body.size })
          : () => this.form(upload, body, ctype);
        await this.toStorage(upload.method, upload.url!, make, body.size, (bytes) => meter.sending(0, bytes), options.signal);
        meter.finished(0, body.size);
      } else if (upload.method === "multipart") {
        const etags = await this.putParts(job, upload, body, options);
        // With every part's ETag (storage's CORS may hide them from a page) the parts named;
        // else no body, and the server lists the parts storage holds.
        const named = etags.size === upload.parts!.length && [...etags.values()].every(Boolean);
        const parts = [...etags].sort(([a], [b]) => a - b).map(([part_number, etag]) => ({ part_number, etag }));
        this.stopIfAborted(options.signal); // the parts are stored: a resume completes it
        job._withAnswer(await this.request("POST", `${job.location}/upload`, { repeatable: true, signal: options.signal, ...(named ? { json: { parts } } : {}) }));
      } else {
        throw new errors.ImageJobsError(`unknown upload method ${JSON.stringify(upload.method)}`);
      }
    } catch (error) {
      throw stoppedBy(error, options.signal, job);
    }
    // A multipart job is queued by its completion; a single PUT's, by storage's event.
    await job._awaitArrival(ARRIVAL_SECONDS, options.signal);
  }

  /** The presigned POST's form: a FormData, or where bodies are streamed (Node) the same
   * multipart/form-data as one Blob, so that its file's bytes are counted as they go. */
  private form(upload: UploadDescription, body: Body, ctype: string): StorageBody {
    if (this.transfer !== "stream") return { body: form(upload, body, ctype), size: body.size };
    const boundary = `----image-jobs-${randomKey()}`;
    const text = new TextEncoder();
    let head = "";
    for (const [name, value] of Object.entries(upload.fields ?? {})) {
      head += `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    }
    head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${body.name.replace(/["\r\n]/g, "_")}"\r\n`
      + `Content-Type: ${ctype}\r\n\r\n`;
    const start = text.encode(head);
    const blob = new Blob([start, body.slice(0, body.size) as BlobPart, text.encode(`\r\n--${boundary}--\r\n`)]);
    return { headers: { "Content-Type": `multipart/form-data; boundary=${boundary}` }, body: blob, size: blob.size, skip: start.byteLength };
  }

  private stopIfAborted(signal?: AbortSignal) {
    if (signal?.aborted) throw new errors.UploadStopped("the caller stopped the upload");
  }

  /** The parts not stored yet, PART_CONCURRENCY at a time. Once the signal fires no part
   * starts, and those in flight are finished: stored, they need not be sent again. A part URL
   * storage refuses (403: expired) is renewed once from GET .../upload. Answers every part's
   * ETag by number ("" where storage did not let it be read). */
  private async putParts(job: Job, upload: UploadDescription, body: Body, options: UploadOptions): Promise<Map<number, string>> {
    const size = upload.part_size!;
    const parts = upload.parts ?? [];
    const etags = new Map<number, string>();
    for (const part of parts.filter((p) => p.stored)) etags.set(part.part_number, part.etag ?? "");
    const meter = new Meter(body.size, options.onProgress, parts.filter((part) => part.stored).reduce((sum, part) => sum + part.size, 0));
    meter.start();
    let todo = parts.filter((part) => !part.stored);
    for (let round = 0; todo.length; round++) {
      const refused: number[] = [];
      let next = 0;
      let failure: unknown = null;
      const worker = async () => {
        while (next < todo.length && failure === null) {
          if (options.signal?.aborted) {
            failure = new errors.UploadStopped(`stopped before part ${todo[next]!.part_number}`);
            return;
          }
          const part = todo[next++]!;
          const start = (part.part_number - 1) * size;
          let response: Response;
          let reported = 0;
          const sending = (bytes: number) => {
            meter.sending(part.part_number, bytes);
            if (bytes > reported && bytes < part.size) options.onPartProgress?.(part.part_number, (reported = bytes), part.size);
          };
          try {
            options.onPartProgress?.(part.part_number, 0, part.size);
            response = await this.toStorage("PUT", part.url!, () => ({ body: body.slice(start, start + part.size), size: part.size }), part.size, sending);
          } catch (error) {
            meter.finished(part.part_number, 0);
            if (round === 0 && error instanceof errors.StorageError && error.status === 403) refused.push(part.part_number);
            else failure ??= error;
            continue;
          }
          etags.set(part.part_number, response.headers.get("etag") ?? "");
          meter.finished(part.part_number, part.size);
          options.onPartProgress?.(part.part_number, part.size, part.size);
        }
      };
      await Promise.all(Array.from({ length: Math.min(PART_CONCURRENCY, todo.length) }, worker));
      if (failure !== null) throw failure;
      if (!refused.length) break;
      const fresh = jsonObject(await this.request("GET", `${job.location}/upload`)) as UploadDescription;
      todo = (fresh.parts ?? []).filter((part) => !part.stored && refused.includes(part.part_number));
    }
    return etags;
  }

  /** A request to storage (its body made afresh for each try): connection errors and 5xx
   * retried within the client's bounds; no Authorization (the URL carries its signature). */
  private async toStorage(method: string, url: string, make: () => StorageBody, bytes: number, sent: Sent, signal?: AbortSignal): Promise<Response> {
    for (let attempts = 1; ; attempts++) {
      const timer = deadlineSignal(Math.max(this.timeout * 1000, bytes / 100), signal); // at least 100 kB/s
      let response: Response;
      const out = make();
      const skip = out.skip ?? 0;
      sent(0); // a try again starts from nothing
      try {
        response = await sendCounted(this.transfer, this.fetchImpl, this.Xhr, url,
          { method, headers: out.headers, body: out.body, size: out.size, signal: timer.signal },
          (n) => sent(Math.max(0, Math.min(bytes, n - skip))));
      } catch (error) {
        timer.done();
        if (signal?.aborted) throw new errors.UploadStopped("the caller stopped the upload");
        await this.retryOrThrow(attempts, null, new errors.ConnectionFailed(`storage: ${describe(error)}`));
        continue;
      }
      timer.done();
      if (response.ok) {
        this.bytesToStorage += bytes;
        await response.arrayBuffer().catch(() => null);
        return response;
      }
      const failure = await storageError(response);
      if (response.status < 500) throw failure;
      await this.retryOrThrow(attempts, retryAfter(response.headers), failure);
    }
  }

  /**
   * One API call with the bearer token: a 2xx answer, or the typed error of the last try.
   * With `retry`, 429 and 503 are retried up to `maxAttempts` in all, after the server's
   * Retry-After or a jittered backoff; connection errors, 502 and 504 too when the request is
   * `repeatable`.
   */
  async request(method: string, target: string, options: RequestOptions = {}): Promise<Answer> {
    const asked = this.url(target);
    const repeatable = options.repeatable
      ?? (REPEATABLE_METHODS.has(method.toUpperCase()) || "Idempotency-Key" in (options.headers ?? {}));
    let refreshed = false;
    for (let attempts = 1; ; attempts++) {
      const token = await this.bearer();
      const url = this.routed(asked, token);
      const headers: Record<string, string> = { ...(options.headers ?? {}) };
      if (token) headers.Authorization = `Bearer ${token}`;
      let body = options.body as BodyInit | undefined;
      if (options.json !== undefined) {
        headers["Content-Type"] = "application/json";
        body = JSON.stringify(options.json);
      }
      const timer = deadlineSignal((Math.min(this.timeout, options.timeout ?? Infinity) + (options.hold ?? 0)) * 1000, options.signal);
      let response: Response;
      let text: string;
      try {
        const counted = options.sent && (body instanceof Uint8Array || (typeof Blob !== "undefined" && body instanceof Blob));
        options.sent?.(0);
        response = counted
          ? await sendCounted(this.transfer, this.fetchImpl, this.Xhr, url, { method, headers, body: body as Blob | Uint8Array,
            size: (body as Blob).size ?? (body as Uint8Array).byteLength, signal: timer.signal, cache: "no-store" }, options.sent!)
          : await this.fetchImpl(url, { method, headers, body, signal: timer.signal, cache: "no-store" });
        text = await response.text();
      } catch (error) {
        timer.done();
        if (options.signal?.aborted) throw options.signal.reason ?? error;
        const failure = new errors.ConnectionFailed(`${method} ${url}: ${timer.timedOut() ? "timed out" : describe(error)}`);
        if (options.retry === false || !repeatable) throw failure;
        await this.retryOrThrow(attempts, null, failure, options.signal);
        continue;
      }
      timer.done();
      let parsed: unknown = null;
      try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
      const seconds = retryAfter(response.headers);
      if (response.ok) return { status: response.status, headers: response.headers, body: parsed, retryAfter: seconds };
      if (response.status === 401 && typeof this.token === "function" && !refreshed && (await this.bearer()) !== token) {
        refreshed = true; // the provider had a newer token: one more try with it
        attempts -= 1;
        continue;
      }
      const failure = errors.errorFor(response.status, parsed, seconds);
      const retried = RETRY_ALWAYS.has(response.status) || (repeatable && RETRY_IF_REPEATABLE.has(response.status));
      if (options.retry === false || !retried) throw failure;
      await this.retryOrThrow(attempts, seconds, failure, options.signal);
    }
  }

  private async retryOrThrow(attempts: number, seconds: number | null, failure: Error, signal?: AbortSignal): Promise<void> {
    if (attempts >= this.maxAttempts || (seconds ?? 0) > this.maxRetryWait) throw failure;
    await sleep(retryWait(attempts, seconds, this.random) * 1000, signal);
  }

  /** A job's own URL on the owners' route, for a service client (known from `token`) on the service's. */
  private routed(url: string, token: string | null): string {
    const owners = new URL(`${API_ROOT}/image-jobs/`, `${this.baseUrl}/`).toString();
    const rest = url.startsWith(owners) ? url.slice(owners.length) : "";
    if (!rest || /[/?#]/.test(rest) || !this.serviceOf(token)) return url;
    return this.url(`${API_ROOT}/service/image-jobs/${rest}`);
  }

  /** @internal */
  async bearer(): Promise<string | null> {
    if (typeof this.token === "function") return await this.token();
    return this.token ?? null;
  }
}

/** Whether a bearer token is the service principal's: a JWT whose `scope` claim (OAuth's: names
 * separated by spaces) names SERVICE_SCOPE. Read, never verified: it only picks the routes, and
 * the server checks every token. Anything else (no token, an opaque one, no atob) is an owner's. */
export function isServiceToken(token: string | null): boolean {
  const parts = (token ?? "").split(".");
  if (parts.length !== 3 || typeof globalThis.atob !== "function") return false;
  try {
    const base64 = parts[1]!.replace(/-/g, "+").replace(/_/g, "/");
    const claims: unknown = JSON.parse(globalThis.atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4)));
    const scope = claims && typeof claims === "object" ? (claims as { scope?: unknown }).scope : undefined;
    return typeof scope === "string" && scope.split(" ").includes(SERVICE_SCOPE);
  } catch {
    return false;
  }
}

/** A stopped upload's cancel is one try of at most this long: the caller who stopped is not
 * kept waiting on a slow or lost answer (a lost cancel's job ends upload_missing at its deadline). */
const STOPPED_CANCEL_SECONDS = 5;

/** A stopped upload's job, cancelled: it no longer counts against its owner's unfinished jobs.
 * Best effort: one whose cancel is lost ends `upload_missing` at its deadline. */
async function cancelStopped(job: Job): Promise<void> {
  try {
    await job._cancel({ retry: false, timeout: STOPPED_CANCEL_SECONDS });
  } catch (error) {
    if (!(error instanceof errors.ImageJobsError)) throw error;
  }
}

/** An upload's error once the caller's signal fired: UploadStopped (carrying `job`, the one
 * resume() takes), whatever fetch or a retry's sleep rejected with (the signal's reason). */
function stoppedBy(error: unknown, signal: AbortSignal | undefined, job: Job | null = null): unknown {
  if (!(error instanceof errors.UploadStopped)) {
    if (!signal?.aborted || error instanceof errors.ImageJobsError) return error;
    error = new errors.UploadStopped("the caller stopped the upload");
  }
  const stopped = error as errors.UploadStopped;
  stopped.job ??= job;
  return stopped;
}

/** A saved upload's job that ended with no file: resuming it cannot help, a new upload can. */
function withoutItsFile(job: Job): boolean {
  return job.status === Status.CANCELLED || (job.status === Status.FAILED && job.error?.code === errors.UploadMissing.code);
}

function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function randomKey(): string {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID();
  const bytes = new Uint8Array(16);
  if (c?.getRandomValues) c.getRandomValues(bytes);
  else for (let i = 0; i < 16; i++) bytes[i] = Math.floor(Math.random() * 256);
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function allowed(headers: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !FORBIDDEN.has(name.toLowerCase())));
}

/** The presigned POST: the form's fields, then the file last, as S3 requires. */
function form(upload: UploadDescription, body: Body, ctype: string): FormData {
  const data = new FormData();
  for (const [name, value] of Object.entries(upload.fields ?? {})) data.append(name, String(value));
  if (body.uri) {
    // React Native's FormData sends a local file given as {uri, type, name}.
    data.append("file", { uri: body.uri, type: ctype, name: body.name } as unknown as Blob);
  } else {
    const part = body.slice(0, body.size);
    data.append("file", part instanceof Uint8Array ? new Blob([part as BlobPart], { type: ctype }) : part, body.name);
  }
  return data;
}

/** S3's XML error: <Error><Code>AccessDenied</Code><Message>...</Message></Error>. */
async function storageError(response: Response): Promise<errors.StorageError> {
  const text = await response.text().catch(() => "");
  const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1] ?? "unknown";
  const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1] ?? response.statusText;
  return new errors.StorageError(response.status, code, message);
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}

/** A number in plain decimals, as the query's focus takes it (0.0000001, never 1e-7); the
 * server judges the value. */
function plainDecimal(value: number): string {
  const text = String(value);
  if (!Number.isFinite(value) || !/e/i.test(text)) return text;
  return value.toFixed(20).replace(/\.?0+$/, "");
}
