// The contract's waits as pure functions ("How a client polls"): start after Retry-After, then
// wait 3, 5, 8 and at most 15 s between polls, each ±20 % jitter, never sooner than a
// Retry-After the server sent. A poll the server held may be followed by the next at once.

export const STEPS = [3, 5, 8, 15] as const;
export const JITTER = 0.2;
/** A held poll (Prefer: wait) asks for at most this long; the server caps it lower as it likes. */
export const MAX_HOLD_SECONDS = 20;
/** A held answer quicker than this, with nothing new, is followed by the schedule. */
export const MIN_HELD_SECONDS = 1;
/** After a direct upload's last byte is stored, its job leaves awaiting_upload when storage's
 * notification arrives (seconds): the upload waits for that, held, at most this long. */
export const ARRIVAL_SECONDS = 30;
/** Retries of one request when the server sent no Retry-After. */
export const RETRY_STEPS = [1, 2, 4, 8, 15] as const;

export type Random = () => number;

/** The push socket's reconnect waits: doubling from the first, capped, each between half and
 * all of it, so that clients dropped together do not all come back in the same instant. */
export const BACKOFF_FIRST = 0.5;
export const BACKOFF_MAX = 30;

/** Seconds before the next connect after `failures` failed ones in a row (0: after a drop). */
export function reconnectWait(failures: number, random: Random): number {
  return Math.min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** Math.max(0, failures - 1)) * (0.5 + 0.5 * random());
}

/** seconds × a factor in [0.8, 1.2). */
export function jittered(seconds: number, random: Random): number {
  return seconds * (1 + JITTER * (2 * random() - 1));
}

/** Seconds to wait after the `pollsDone`-th poll (1 = after the first) before the next one. */
export function pollWait(pollsDone: number, retryAfter: number | null, random: Random): number {
  const base = STEPS[Math.min(Math.max(pollsDone, 1), STEPS.length) - 1]!;
  return Math.max(jittered(base, random), retryAfter ?? 0);
}

/** Seconds before retrying a request: the server's Retry-After, else a jittered backoff. */
export function retryWait(attemptsDone: number, retryAfter: number | null, random: Random): number {
  if (retryAfter !== null) return retryAfter;
  return jittered(RETRY_STEPS[Math.min(Math.max(attemptsDone, 1), RETRY_STEPS.length) - 1]!, random);
}

/** Retry-After in seconds (delta-seconds or an HTTP-date, measured against the answer's own
 * Date when it has one), or null when absent or garbled. */
export function retryAfter(headers: { get(name: string): string | null }, now: number = Date.now()): number | null {
  const value = (headers.get("retry-after") ?? "").trim();
  if (!value) return null;
  if (/^\d+$/.test(value)) return Number(value);
  const until = Date.parse(value);
  if (Number.isNaN(until)) return null;
  const date = Date.parse(headers.get("date") ?? "");
  return Math.max(0, (until - (Number.isNaN(date) ? now : date)) / 1000);
}
