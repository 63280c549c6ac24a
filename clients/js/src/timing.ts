// Timers that an AbortSignal ends early, and a signal that fires on either of two (AbortSignal.any
// is not in every React Native release).

/** Resolves after `ms`, or rejects with the signal's reason once it fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    function onAbort() { clearTimeout(timer); reject(signal!.reason); }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A signal that fires after `ms` or when `outer` fires; `done()` releases its timer. */
export function deadlineSignal(ms: number, outer?: AbortSignal): { signal: AbortSignal; done: () => void; timedOut: () => boolean } {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; controller.abort(new Error("timed out")); }, ms);
  const onAbort = () => controller.abort(outer!.reason);
  if (outer?.aborted) controller.abort(outer.reason);
  else outer?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    done: () => { clearTimeout(timer); outer?.removeEventListener("abort", onAbort); },
    timedOut: () => timedOut,
  };
}
