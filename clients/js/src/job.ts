// Job: one image job as the API shows it, and what can be done with it.
import type { Client, Answer, RequestOptions } from "./client.js";
import * as errors from "./errors.js";
import { MIN_HELD_SECONDS, pollWait, retryWait } from "./polling.js";
import { sleep } from "./timing.js";

/** The statuses the contract names. A job may show others later: they mean "not finished". */
export const Status = Object.freeze({
  AWAITING_UPLOAD: "awaiting_upload", QUEUED: "queued", PROCESSING: "processing",
  READY: "ready", FAILED: "failed", CANCELLED: "cancelled",
} as const);
export type KnownStatus = (typeof Status)[keyof typeof Status];
/** Open: any other string is a status of a later version, "not finished". */
export type JobStatus = KnownStatus | (string & {});

export const TERMINAL: ReadonlySet<string> = new Set([Status.READY, Status.FAILED, Status.CANCELLED]);

/** The job's JSON as GET answers it (and a push message carries). Unknown fields are kept. */
export interface JobBody {
  job_id: string;
  status: JobStatus;
  created_at?: string;
  finished_at?: string;
  expires_at?: string;
  urls_expire_at?: string;
  image_url?: string;
  thumb_url?: string;
  renditions?: Record<string, RenditionBody>;
  placeholder?: { blurhash?: string; average_color?: string };
  source?: SourceFacts;
  phash?: string;
  duplicate_of?: string;
  focus?: Focus;
  error?: { code?: string; message?: string };
  upload?: Record<string, unknown>;
  [field: string]: unknown;
}

/** The original's own facts (`source`; docs/contract.md "The photo's facts"). */
export interface SourceFacts {
  /** Upright, after the EXIF orientation. */
  width: number;
  height: number;
  format: "jpeg" | "png" | "webp" | "gif" | "tiff" | "heic" | "heif" | "avif" | (string & {});
  bytes: number;
  /** RFC 3339; the camera's local date-time without an offset when the file gave none. */
  captured_at: string | null;
  color_space: "srgb" | "display-p3" | "adobe-rgb" | "other" | (string & {});
  has_alpha: boolean;
  /** More than one frame (animated GIF, WebP, APNG); absent on jobs read before animations. */
  animated?: boolean;
  frames?: number;
  /** One play, as browsers play it; null for a still. */
  duration_ms?: number | null;
}

/** The point a ready job's squares are placed around (`focus`; docs/contract.md "The focus"):
 * fractions 0..1 of the upright image from its top left. */
export interface Focus {
  x: number;
  y: number;
  source: "client" | "faces" | "saliency" | "centre" | (string & {});
}

export interface RenditionBody {
  url: string;
  cache_key?: string;
  width?: number;
  height?: number;
  content_type?: string;
  variants?: Record<string, { url: string; cache_key?: string; bytes?: number; width?: number; height?: number }>;
  animation?: AnimationBody;
}

export interface AnimationBody {
  url: string;
  cache_key: string;
  content_type: string;
  width: number;
  height: number;
  frames: number;
  duration_ms: number;
  bytes: number;
}

/** An animated source's rendition as an animated WebP (docs/contract.md "Animations"): every
 * frame, sized and cropped as the rendition's still, which is its first frame. */
export interface Animation {
  url: string;
  /** Names these bytes, whatever the URL: key an image cache by it. */
  cacheKey: string | null;
  contentType: string;
  width: number | null;
  height: number | null;
  frames: number | null;
  durationMs: number | null;
  bytes: number | null;
}

/** One rendition in an extra format (asked with upload(..., { formats })). */
export interface Variant {
  contentType: string;
  url: string;
  bytes: number | null;
  /** Names these bytes, whatever the URL: key an image cache by it (null: an older server). */
  cacheKey: string | null;
  /** The JPEG's. */
  width: number | null;
  height: number | null;
}
export interface Rendition {
  name: string;
  url: string;
  width: number | null;
  height: number | null;
  contentType: string | null;
  /** Names the JPEG's bytes, whatever the URL: key an image cache by it (null: an older server). */
  cacheKey: string | null;
  /** By media type ("image/avif"). */
  variants: Record<string, Variant>;
  /** An animated source's animation; null for a still (and when the job says `animationSkipped`). */
  animation: Animation | null;
}

export interface WaitOptions {
  /** Seconds from now; WaitTimeout when the job is not finished by then. */
  timeout?: number;
  /** Aborting it ends the wait (a held poll in flight too) with WaitCancelled. */
  signal?: AbortSignal;
  /** Called whenever a read shows a status other than the previous one. */
  onStatus?: (job: Job) => void;
  /** Learn changes from the client's one push socket; polls where there is none. */
  push?: boolean;
}

const int = (value: unknown) => (typeof value === "number" && Number.isInteger(value) ? value : null);
const str = (value: unknown) => (typeof value === "string" ? value : null);

export class Job {
  readonly location: string;
  /** @internal */ _data: JobBody | Record<string, unknown>;
  /** @internal on the client's clock (ms): no poll before this */ _retryAt: number | null = null;
  /** @internal the state the last answer showed */ _etag: string | null = null;
  /** @internal the last answer was a held one (Preference-Applied) */ _held = false;

  constructor(private readonly client: Client, location: string, data: Record<string, unknown> = {}) {
    this.location = location;
    this._data = { ...data };
  }

  /** The last body as the API sent it (GET's shape after refresh() or wait()). */
  get raw(): Record<string, unknown> { return { ...this._data }; }
  get jobId(): string {
    const id = this._data.job_id;
    return typeof id === "string" ? id : decodeURIComponent(this.location.replace(/\/+$/, "").split("/").pop() ?? "");
  }
  /** The status string (compare with `Status`), or null before the first read. */
  get status(): JobStatus | null {
    return typeof this._data.status === "string" ? this._data.status : null;
  }
  get etag(): string | null { return this._etag; }
  get finished(): boolean { return this.status !== null && TERMINAL.has(this.status); }
  get ready(): boolean { return this.status === Status.READY; }
  get error(): { code: string; message: string } | null {
    const value = this._data.error as JobBody["error"];
    if (!value || typeof value !== "object") return null;
    return { code: String(value.code ?? "unknown"), message: String(value.message ?? "") };
  }
  get placeholder(): { blurhash?: string; average_color?: string } | null {
    const value = this._data.placeholder;
    return value && typeof value === "object" ? { ...(value as object) } : null;
  }
  /** A ready job's perceptual hash (16 hex characters; phashDistance compares two), or null. */
  get phash(): string | null {
    return typeof this._data.phash === "string" ? this._data.phash : null;
  }
  /** The earlier job (the same owner's same bytes) whose renditions this one's copy, or null. */
  get duplicateOf(): string | null {
    return typeof this._data.duplicate_of === "string" ? this._data.duplicate_of : null;
  }
  /** The point a ready job's squares are placed around; null before ready, and on jobs made
   * before the focus (their squares are centred). Place your own crops of `display` by it:
   * CSS `object-position: ${x * 100}% ${y * 100}%` (docs/api-guide.md). */
  get focus(): Focus | null {
    const value = this._data.focus;
    return value && typeof value === "object" ? { ...(value as Focus) } : null;
  }
  /** Why an animated source's renditions have no animation (`animation_too_many_frames`,
   * `animation_too_many_pixels`, `animation_too_complex`), or null. */
  get animationSkipped(): { code: string; message: string } | null {
    const value = this._data.animation_skipped as { code?: string; message?: string } | undefined;
    if (!value || typeof value !== "object") return null;
    return { code: String(value.code ?? "unknown"), message: String(value.message ?? "") };
  }
  /** The original's facts once it has been read; null before (and on older jobs). */
  get source(): SourceFacts | null {
    const value = this._data.source;
    return value && typeof value === "object" ? { ...(value as SourceFacts) } : null;
  }
  /** The app's own strings given at upload (`metadata`), or {} when it gave none. */
  get metadata(): Record<string, string> {
    const value = this._data.metadata;
    return value && typeof value === "object" && !Array.isArray(value) ? { ...(value as Record<string, string>) } : {};
  }
  /** The job's owner: only in what the service principal reads. */
  get owner(): string | null { return typeof this._data.owner === "string" ? this._data.owner : null; }
  get imageUrl(): string | null { return typeof this._data.image_url === "string" ? this._data.image_url : null; }
  get thumbUrl(): string | null { return typeof this._data.thumb_url === "string" ? this._data.thumb_url : null; }
  get createdAt(): Date | null { return time(this._data.created_at); }
  get finishedAt(): Date | null { return time(this._data.finished_at); }
  get expiresAt(): Date | null { return time(this._data.expires_at); }
  get urlsExpireAt(): Date | null { return time(this._data.urls_expire_at); }

  get renditions(): Record<string, Rendition> {
    const found: Record<string, Rendition> = {};
    const value = this._data.renditions;
    if (value && typeof value === "object") {
      for (const [name, item] of Object.entries(value as Record<string, RenditionBody>)) {
        if (!item || typeof item !== "object" || typeof item.url !== "string") continue;
        const variants: Record<string, Variant> = {};
        for (const [kind, v] of Object.entries(item.variants ?? {})) {
          if (v && typeof v === "object" && typeof v.url === "string") {
            variants[kind] = { contentType: kind, url: v.url, bytes: int(v.bytes), cacheKey: str(v.cache_key),
              width: int(v.width), height: int(v.height) };
          }
        }
        const a = item.animation;
        const animation: Animation | null = a && typeof a === "object" && typeof a.url === "string"
          ? { url: a.url, cacheKey: str(a.cache_key), contentType: str(a.content_type) ?? "image/webp",
              width: int(a.width), height: int(a.height), frames: int(a.frames), durationMs: int(a.duration_ms),
              bytes: int(a.bytes) }
          : null;
        found[name] = { name, url: item.url, width: int(item.width), height: int(item.height),
          contentType: str(item.content_type), cacheKey: str(item.cache_key), variants, animation };
      }
    }
    for (const [name, field] of [["display", "image_url"], ["thumb", "thumb_url"]] as const) {
      const url = this._data[field];
      if (!found[name] && typeof url === "string") {
        found[name] = { name, url, width: null, height: null, contentType: null, cacheKey: null, variants: {},
          animation: null };
      }
    }
    return found;
  }

  toString(): string { return `<Job ${this.jobId} ${this.status ?? "unread"}>`; }

  /** GET the job once (retrying connection errors, 429 and 5xx within the client's bounds). */
  async refresh(options: { signal?: AbortSignal } = {}): Promise<Job> {
    return this._withAnswer(await this.client.request("GET", this.location, { signal: options.signal }));
  }

  /** Cancel it; JobFinished if it is already ready or failed. */
  async cancel(): Promise<Job> {
    return this._cancel({ repeatable: true });
  }

  /** @internal The cancel request, sent as `options` say (a stopped upload's: one short try). */
  async _cancel(options: RequestOptions): Promise<Job> {
    return this._withAnswer(await this.client.request("POST", `${this.location}/cancel`, options));
  }

  /** Delete the job, its original and its renditions; it then shows no status. */
  async delete(): Promise<void> {
    try {
      await this.client.request("DELETE", this.location, { retry: false });
    } catch (first) {
      if (!transient(first)) throw first;
      // The lost answer may have been the 204: then the retry finds nothing, which is done.
      await sleep(retryWait(1, (first as errors.ApiError).retryAfter ?? null, this.client.random) * 1000);
      try {
        await this.client.request("DELETE", this.location);
      } catch (error) {
        if (!(error instanceof errors.JobNotFound)) throw error;
      }
    }
    // Gone: none of its state is shown any more, so a wait() asks the server (404).
    this._data = { job_id: this.jobId };
    this._etag = null;
    this._retryAt = null;
    this._held = false;
  }

  /**
   * Until the job is ready, failed or cancelled. Every poll asks the server to hold it until
   * the job changes (Prefer: wait, naming the last state in If-None-Match); while the server
   * holds, the next poll goes at once, otherwise the contract's schedule (3, 5, 8, 15 s,
   * ±20 %, never sooner than Retry-After). 401, 403, 404 and 410 throw their typed error;
   * connection errors, 429 and 5xx count as "not finished" until `maxAttempts` in a row.
   */
  async wait(options: WaitOptions = {}): Promise<Job> {
    if (this.finished) return this;
    const c = this.client;
    const { signal, onStatus } = options;
    const end = options.timeout === undefined ? null : c.clock() + options.timeout * 1000;
    if (options.push && (end === null || end > c.clock())) {
      const hub = await c._pushHub(end);
      if (hub) {
        try {
          return await hub.wait(this, end, signal, onStatus);
        } catch (error) {
          if (!(error instanceof errors.PushUnavailable)) throw error;
        }
      }
    }
    return this._pollUntil(() => this.finished, end, signal, onStatus);
  }

  /** @internal After the last byte of a single PUT (or form) is stored: polls, held, until
   * storage's notification has moved the job past `awaiting_upload`, for at most `seconds`
   * (or until `signal` fires); the job as it is then. The file is stored whatever a poll
   * answers, so no error of these polls is thrown: the upload is done. */
  async _awaitArrival(seconds: number, signal?: AbortSignal): Promise<Job> {
    if (this.status !== Status.AWAITING_UPLOAD) return this;
    try {
      await this._pollUntil(() => this.status !== Status.AWAITING_UPLOAD, this.client.clock() + seconds * 1000, signal);
    } catch (error) {
      if (!(error instanceof errors.ImageJobsError)) throw error;
    }
    return this;
  }

  /** @internal wait()'s polls, until `done()` holds after one: held where the server holds
   * them, else on the contract's schedule; `end` on the client's clock (ms). */
  async _pollUntil(done: () => boolean, end: number | null, signal?: AbortSignal, onStatus?: (job: Job) => void): Promise<Job> {
    const c = this.client;
    let delay = c.waits ? 0 : Math.max(0, (this._retryAt ?? 0) - c.clock());
    let polls = 0;
    let failures = 0;
    let seen: string | null = null;
    for (;;) {
      if (signal?.aborted) throw new errors.WaitCancelled(this, "the caller stopped waiting");
      if (end !== null && c.clock() + delay > end) throw new errors.WaitTimeout(this, "the timeout comes before the next poll");
      if (delay > 0) {
        try { await sleep(delay, signal); } catch { throw new errors.WaitCancelled(this, "the caller stopped waiting"); }
      }
      polls += 1;
      let serverWait: number | null = null;
      const asked = c.clock();
      const release = c.waits ? c._takeHold() : null;
      try {
        const headers = release ? this._waitHeaders(end) : {};
        this._withAnswer(await c.request("GET", this.location, {
          retry: false, headers, signal, hold: headers.Prefer ? c.holdSeconds : 0,
        }));
      } catch (error) {
        if (signal?.aborted) throw new errors.WaitCancelled(this, "the caller stopped waiting");
        if (!transient(error)) throw error;
        failures += 1;
        if (failures >= c.maxAttempts) throw error;
        serverWait = (error as errors.ApiError).retryAfter ?? null;
        delay = pollWait(polls, serverWait, c.random) * 1000;
        continue;
      } finally {
        release?.();
      }
      failures = 0;
      if (this._retryAt !== null) serverWait = Math.max(0, this._retryAt - c.clock()) / 1000;
      const changed = this.status !== seen;
      if (changed) onStatus?.(this);
      seen = this.status;
      if (done()) return this;
      // Held: ask again at once. A held answer that came back at once unchanged (the server's
      // time ran short) falls back to the schedule, never a tight loop.
      if (this._held && (changed || c.clock() - asked >= MIN_HELD_SECONDS * 1000)) {
        delay = 0;
        continue;
      }
      delay = pollWait(polls, serverWait, c.random) * 1000;
    }
  }

  /** @internal Prefer: wait for as long as the timeout and the client's request timeout allow. */
  _waitHeaders(end: number | null): Record<string, string> {
    const c = this.client;
    let seconds = c.holdSeconds;
    if (end !== null) seconds = Math.min(seconds, Math.floor((end - c.clock()) / 1000));
    if (!c.waits || seconds < 1) return {};
    return { Prefer: `wait=${seconds}`, ...(this._etag ? { "If-None-Match": this._etag } : {}) };
  }

  /** @internal */
  _with(body: Record<string, unknown>, answer: Answer): Job {
    this._data = body;
    this._retryAt = answer.retryAfter === null ? null : this.client.clock() + answer.retryAfter * 1000;
    this._etag = answer.headers.get("etag");
    this._held = answer.headers.get("preference-applied") !== null;
    return this;
  }

  /** @internal A push message's state: the body GET would answer, with its ETag. */
  _fromPush(body: Record<string, unknown>, etag: string | null): Job {
    this._data = body;
    this._etag = etag;
    this._retryAt = null;
    this._held = false;
    return this;
  }

  /** @internal */
  _withAnswer(answer: Answer): Job {
    return this._with(jsonObject(answer), answer);
  }
}

/** Worth another try: no answer, 429 or 5xx. */
export function transient(error: unknown): boolean {
  if (error instanceof errors.ConnectionFailed) return true;
  return error instanceof errors.ApiError && (error.status === 429 || error.status >= 500);
}

export function jsonObject(answer: Answer): Record<string, unknown> {
  const body = answer.body;
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new errors.UnexpectedResponse(`${answer.status} with a body that is not a JSON object`);
  }
  return body as Record<string, unknown>;
}

function time(value: unknown): Date | null {
  if (typeof value !== "string") return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}
