// When to ask again, as CONTRACT.md "How a client polls" says: start after Retry-After, then
// wait 3, 5, 8 and at most 15 s between polls, each with ±20 % jitter, and never sooner than
// a Retry-After the server sent.

export const STEPS = [3, 5, 8, 15];
export const JITTER = 0.2;

// Seconds from a Retry-After header (delta-seconds or an HTTP date), or null.
export function retryAfterSeconds(value, now = Date.now()) {
  if (value == null || value === "") return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

// Milliseconds to wait before poll number `poll` (0 = the first, right after the upload).
export function pollDelay(poll, retryAfter, random = Math.random) {
  const base = poll === 0 ? (retryAfter ?? STEPS[0]) : STEPS[Math.min(poll - 1, STEPS.length - 1)];
  const jittered = base * (1 - JITTER + 2 * JITTER * random());
  return Math.round(Math.max(jittered, retryAfter ?? 0) * 1000);
}

// Resolves after ms, or rejects with an AbortError when the signal fires first.
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    function onAbort() { clearTimeout(timer); reject(signal.reason); }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export const TERMINAL = new Set(["ready", "failed", "cancelled"]);
// Answers after which polling the job again can never help.
export const STOP_HTTP = new Set([401, 403, 404, 410]);

// Held polls (Prefer: wait): how long one may be held, and how many the page keeps open at
// once. A browser opens at most six connections to one origin over HTTP/1.1: four held ones
// leave two for uploads, cancels and fresh polls.
export const HOLD_SECONDS = 20;
export const MAX_HELD = 4;
// A held answer quicker than this, with nothing new, is followed by the schedule.
export const MIN_HELD_MS = 1000;

// Counts held polls in flight; take() gives a release function, or null when all are taken.
export class HoldGate {
  constructor(limit = MAX_HELD) { this.limit = limit; this.inFlight = 0; }
  take() {
    if (this.inFlight >= this.limit) return null;
    this.inFlight += 1;
    let released = false;
    return () => { if (!released) { released = true; this.inFlight -= 1; } };
  }
}
export const holds = new HoldGate();
