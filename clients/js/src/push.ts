// Push: one WebSocket for every status change of the owner's jobs (docs/contract.md "Push").
// A Watch finds the URL at GET /api/v1/push, connects with the token as the `bearer.<token>`
// subprotocol beside `image-jobs.v1`, reconnects after a drop (doubling, capped, jittered),
// and after every connect re-reads by GET the unfinished jobs it knows, since messages sent
// while it was away are lost. It drops a state older than one it holds. A Hub runs one Watch
// of all the owner's jobs for every job.wait({push: true}) of a client.
import type { Client } from "./client.js";
import * as errors from "./errors.js";
import { Job, TERMINAL } from "./job.js";
import { reconnectWait } from "./polling.js";
import { sleep } from "./timing.js";

export const PUSH_PROTOCOL = "image-jobs.v1";
export const BEARER_PREFIX = "bearer.";
const OPEN_TIMEOUT_MS = 10_000;
/** An unfinished job with no news for this long is read by GET: a message may be lost without
 * the socket dropping, and a push client should never learn later than a polling one. */
export const QUIET_MS = 15_000;
const TICK_MS = 1_000;
/** A status never moves back along this order (a re-claim stays `processing`). */
const STEP: Record<string, number> = { awaiting_upload: 0, queued: 1, processing: 2, ready: 3, failed: 3, cancelled: 3 };

/** What the package needs of a WebSocket: the browser's, React Native's, or the `ws` package's. */
export interface WebSocketLike {
  onopen: ((event: any) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: any) => void) | null;
  onerror: ((event: any) => void) | null;
  close(code?: number, reason?: string): void;
  readonly protocol?: string;
}

export interface WatchOptions {
  /** Seconds from now after which the iteration ends. */
  timeout?: number;
  /** Seconds without news after which an unfinished job is read by GET (default 15). */
  quiet?: number;
  signal?: AbortSignal;
  /** The socket opened (first or again): from now on changes come over it, after the re-read. */
  onOpen?: () => void;
  /** The socket closed: until it opens again nothing comes over it (poll meanwhile). */
  onClose?: () => void;
}

type Event = { kind: "message"; data: unknown } | { kind: "closed" } | { kind: "tick" } | { kind: "stop" };

/**
 * Updates of `jobs`, or of all the owner's jobs when null, as Job objects updated in place:
 * `for await (const job of watch)`. With jobs named, it ends once all are finished.
 * PushUnavailable when the service has no push, or `maxAttempts` connects in a row fail.
 */
export class Watch implements AsyncIterable<Job> {
  connects = 0;
  received = 0;
  dropped = 0;
  private readonly all: boolean;
  private readonly jobs = new Map<string, Job>();
  // More objects of a job already watched (two uploads that replayed one key, a second
  // wait): each follows the one in `jobs`.
  private readonly copies = new Map<string, Set<Job>>();
  private readonly sequence = new Map<string, number>();
  private readonly news = new Map<string, number>();
  private readonly end: number | null;
  private stopped = false;
  private socket: WebSocketLike | null = null;
  private events: Event[] = [];
  private wake: (() => void) | null = null;

  constructor(private readonly client: Client, jobs: Iterable<Job | string> | null, private readonly options: WatchOptions = {}) {
    this.all = jobs === null;
    this.end = options.timeout === undefined ? null : client.clock() + options.timeout * 1000;
    for (const job of jobs ?? []) this.add(job);
    options.signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** True while the socket is open. */
  get connected(): boolean { return this.socket !== null; }

  /** Watch one more job: this object is updated from now on (given the newer state held),
   * and so is every other object of the same job given before. */
  add(ref: Job | string): Job {
    const job = typeof ref === "string" ? this.client.job(ref) : ref;
    const known = this.jobs.get(job.jobId);
    if (!known) {
      this.jobs.set(job.jobId, job);
    } else if (known !== job) {
      if (job.status !== null && (known.status === null || this.newer(known, null, job.status, job._etag))) {
        known._fromPush(job.raw, job._etag);
      }
      const copies = this.copies.get(job.jobId) ?? new Set<Job>();
      copies.add(job);
      this.copies.set(job.jobId, copies);
      this.follow(known);
    }
    return job;
  }

  /** The other objects of `job`'s job take its state. */
  private follow(job: Job): Job {
    for (const copy of this.copies.get(job.jobId) ?? []) {
      // A copy may hold a newer state than this one (its own GET): never backwards.
      if (job.status !== null && this.newer(copy, null, job.status, job._etag)) copy._fromPush(job.raw, job._etag);
    }
    return job;
  }

  close(): void {
    this.stopped = true;
    this.push({ kind: "stop" });
    this.socket?.close();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Job> {
    let failures = 0;
    try {
      while (!this.over()) {
        let socket: WebSocketLike;
        try {
          socket = await this.open();
        } catch (error) {
          if (!(error instanceof errors.ConnectionFailed)) throw error;
          failures += 1;
          if (failures >= this.client.maxAttempts) throw new errors.PushUnavailable(`the push socket did not open: ${error.message}`);
          await this.pause(reconnectWait(failures, this.client.random) * 1000);
          continue;
        }
        failures = 0;
        this.connects += 1;
        this.options.onOpen?.();
        try {
          yield* this.reread(null);
          yield* this.receive();
        } finally {
          socket.close();
          this.socket = null;
          this.options.onClose?.();
        }
        if (!this.over()) await this.pause(reconnectWait(0, this.client.random) * 1000);
      }
    } finally {
      this.socket?.close();
      this.socket = null;
    }
  }

  private push(event: Event) {
    this.events.push(event);
    this.wake?.();
  }

  private next(ms: number): Promise<Event> {
    const ready = this.events.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.wake = null; resolve({ kind: "tick" }); }, ms);
      this.wake = () => { clearTimeout(timer); this.wake = null; resolve(this.events.shift()!); };
    });
  }

  private async open(): Promise<WebSocketLike> {
    const c = this.client;
    let found: unknown;
    try {
      found = (await c.request("GET", "/api/v1/push", { retry: false })).body; // our loop retries
    } catch (error) {
      if (error instanceof errors.ApiError) {
        if (error.status === 401 || error.status === 403) throw error;
        if (error.status >= 500 || error.status === 429) throw new errors.ConnectionFailed(`GET /push: ${error.message}`);
        throw new errors.PushUnavailable(`GET /push answered ${error.status}`);
      }
      throw error;
    }
    const url = (found as { url?: unknown } | null)?.url;
    if (typeof url !== "string" || !url) throw new errors.PushUnavailable("the service has no push on this stage");
    if (!c.WebSocket) throw new errors.PushUnavailable("no WebSocket here: pass one, new Client({ WebSocket })");
    const token = (await c.bearer()) ?? "";
    this.events = [];
    return new Promise((resolve, reject) => {
      let socket: WebSocketLike;
      try {
        socket = new c.WebSocket!(url, [PUSH_PROTOCOL, BEARER_PREFIX + token]);
      } catch (error) {
        reject(new errors.PushUnavailable(`push URL ${url}: ${String(error)}`));
        return;
      }
      let opened = false;
      const timer = setTimeout(() => { socket.close(); reject(new errors.ConnectionFailed("push connect timed out")); }, OPEN_TIMEOUT_MS);
      socket.onopen = () => { opened = true; clearTimeout(timer); this.socket = socket; resolve(socket); };
      socket.onmessage = (event) => this.push({ kind: "message", data: event.data });
      socket.onerror = () => {};
      socket.onclose = () => {
        clearTimeout(timer);
        // A browser does not say why a connect failed (a bad token is refused there, with a
        // 401 that GET /push would have answered first).
        if (!opened) reject(new errors.ConnectionFailed("push connect refused"));
        else this.push({ kind: "closed" });
      };
    });
  }

  private async *reread(quietMs: number | null): AsyncGenerator<Job> {
    const now = this.client.clock();
    const todo = [...this.jobs.values()].filter((job) => {
      if (job.finished) return false;
      if (quietMs === null) return true;
      if (!this.news.has(job.jobId)) this.news.set(job.jobId, now);
      return now - this.news.get(job.jobId)! >= quietMs;
    });
    for (const job of todo) {
      this.news.set(job.jobId, now);
      const before = job._etag;
      try {
        await job.refresh();
      } catch (error) {
        if (error instanceof errors.JobNotFound || error instanceof errors.JobExpired) {
          this.jobs.delete(job.jobId); // deleted: nothing more will come
          this.copies.delete(job.jobId);
          continue;
        }
        throw error;
      }
      if (job._etag !== before) yield this.follow(job);
    }
  }

  private async *receive(): AsyncGenerator<Job> {
    while (!this.over()) {
      const event = await this.next(TICK_MS);
      if (event.kind === "closed" || event.kind === "stop") return;
      if (event.kind === "tick") {
        yield* this.reread(this.options.quiet === undefined ? QUIET_MS : this.options.quiet * 1000);
        continue;
      }
      const job = this.take(event.data);
      if (job) yield job;
    }
  }

  /** The job a message updates, or null (not watched, unknown type, or older). */
  private take(data: unknown): Job | null {
    let message: any;
    try {
      message = JSON.parse(typeof data === "string" ? data : String(data));
    } catch {
      return null;
    }
    if (!message || typeof message !== "object" || message.type !== "job") return null; // unknown types: ignored
    const { job: body, sequence, etag } = message;
    if (!body || typeof body !== "object" || typeof body.job_id !== "string") return null;
    let job = this.jobs.get(body.job_id);
    if (!job) {
      if (!this.all) return null;
      job = this.client.job(body.job_id);
      this.jobs.set(body.job_id, job);
    }
    this.received += 1;
    if (!this.newer(job, sequence, body.status, etag)) {
      this.dropped += 1;
      return null;
    }
    if (Number.isInteger(sequence)) this.sequence.set(body.job_id, sequence);
    this.news.set(body.job_id, this.client.clock());
    return this.follow(job._fromPush(body, typeof etag === "string" ? etag : null));
  }

  private newer(job: Job, sequence: unknown, status: unknown, etag: unknown): boolean {
    if (etag != null && etag === job._etag) return false; // the state held (a GET may have read it first)
    if (Number.isInteger(sequence) && (sequence as number) <= (this.sequence.get(job.jobId) ?? -1)) return false;
    const next = typeof status === "string" ? STEP[status] : undefined;
    const held = job.status === null ? undefined : STEP[job.status];
    return next === undefined || held === undefined || (next >= held && !job.finished);
  }

  private over(): boolean {
    if (this.stopped) return true;
    if (this.end !== null && this.client.clock() >= this.end) return true;
    if (this.all) return false;
    return [...this.jobs.values()].every((job) => job.status !== null && TERMINAL.has(job.status));
  }

  private async pause(ms: number): Promise<void> {
    await Promise.race([sleep(ms), new Promise<void>((resolve) => { if (this.stopped) resolve(); else this.wake = resolve; })]);
    this.wake = null;
  }
}

/** One Watch of all the owner's jobs, shared by many waits. */
export class Hub {
  failure: unknown = null;
  readonly watch: Watch;
  private connected = false;
  private listeners = new Set<() => void>();

  constructor(client: Client) {
    this.watch = new Watch(client, null, { onOpen: () => { this.connected = true; this.notify(); } });
    void this.run();
  }

  private async run() {
    try {
      for await (const _ of this.watch) this.notify();
    } catch (error) {
      this.failure = error;
    } finally {
      this.failure ??= new errors.PushUnavailable("the push socket was closed");
      this.notify();
    }
  }

  private notify() {
    for (const listener of [...this.listeners]) listener();
  }

  /** True once the socket is open; false when it failed or did not open within `ms`. */
  async ready(ms: number): Promise<boolean> {
    if (!this.connected && this.failure === null) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        const listener = () => { if (this.connected || this.failure !== null) done(); };
        function done() { clearTimeout(timer); hub.listeners.delete(listener); resolve(); }
        const hub = this;
        this.listeners.add(listener);
      });
    }
    return this.connected && this.failure === null;
  }

  close() { this.watch.close(); }

  /** Until `job` is finished; PushUnavailable when the socket is gone for good (then poll). */
  async wait(job: Job, end: number | null, signal: AbortSignal | undefined, onStatus?: (job: Job) => void): Promise<Job> {
    this.watch.add(job);
    await job.refresh(); // after subscribing: a change before the socket knew of the job is not missed
    this.watch.add(job); // what the GET read, for every other object of the job too
    let seen: string | null = null;
    for (;;) {
      if (job.status !== seen) { seen = job.status; onStatus?.(job); }
      if (job.finished) return job;
      if (signal?.aborted) throw new errors.WaitCancelled(job, "the caller stopped waiting");
      const now = Date.now();
      if (end !== null && now >= end) throw new errors.WaitTimeout(job, "the timeout came first");
      if (this.failure !== null) throw new errors.PushUnavailable(String(this.failure));
      await new Promise<void>((resolve) => {
        const listener = () => done();
        const timer = setTimeout(done, end === null ? 1000 : Math.min(1000, Math.max(0, end - now)));
        const onAbort = () => done();
        signal?.addEventListener("abort", onAbort, { once: true });
        const listeners = this.listeners;
        function done() { clearTimeout(timer); listeners.delete(listener); signal?.removeEventListener("abort", onAbort); resolve(); }
        this.listeners.add(listener);
      });
    }
  }
}
