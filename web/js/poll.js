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
