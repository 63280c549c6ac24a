// @image-jobs/client/react: hooks for React and React Native (React is an optional peer
// dependency: only this entry imports it). `useUpload()` sends a file and tells its bytes;
// `useJob(job)` follows a job to its end (held polls, or the push socket), with its upload's
// progress, its placeholder, the variant to show and cancel(). The client comes from
// <ImageJobsProvider client={client}> or the hooks' `client` option.
import { createContext, createElement, useCallback, useContext, useEffect, useMemo, useRef, useState,
  useSyncExternalStore, type ReactNode } from "react";
import type { Client, UploadOptions } from "./client.js";
import { UploadStopped, WaitCancelled } from "./errors.js";
import type { Job } from "./job.js";
import { decodePlaceholder, type Decoded } from "./placeholder.js";
import type { Source } from "./source.js";
import { pickVariant, type Picked } from "./variants.js";

const ClientContext = createContext<Client | null>(null);

/** Makes `client` the one the hooks below use. */
export function ImageJobsProvider(props: { client: Client; children?: ReactNode }) {
  return createElement(ClientContext.Provider, { value: props.client }, props.children);
}

function useClient(given?: Client | null): Client | null {
  const provided = useContext(ClientContext);
  return given ?? provided;
}

export interface Bytes { sent: number; total: number }

// The uploads under way by job, so that useJob() of a job shows its upload's bytes wherever
// useUpload() sends them (a card, and the picker that started it).
const sending = new Map<string, Bytes>();
const listeners = new Set<() => void>();
function setSending(location: string, bytes: Bytes | null) {
  if (bytes) sending.set(location, bytes);
  else sending.delete(location);
  for (const listener of listeners) listener();
}
function subscribe(listener: () => void) {
  listeners.add(listener);
  return () => { listeners.delete(listener); };
}

export type UploadPhase = "idle" | "uploading" | "uploaded" | "stopped" | "failed";

export interface UseUpload {
  /** Send `source`; answers the job (also in `job`) or throws what upload() throws. */
  upload(source: Source, options?: UploadOptions): Promise<Job>;
  phase: UploadPhase;
  /** The job, once it exists (before its bytes are all sent on the routes straight to storage). */
  job: Job | null;
  /** Bytes sent of the file, by the byte (onProgress). */
  progress: Bytes | null;
  error: unknown;
  /** Stop the upload under way (its job is cancelled unless `keepStopped`). */
  cancel(): void;
}

/** One upload at a time: `const { upload, progress, job } = useUpload()`. */
export function useUpload(options: { client?: Client } = {}): UseUpload {
  const client = useClient(options.client);
  const [phase, setPhase] = useState<UploadPhase>("idle");
  const [job, setJob] = useState<Job | null>(null);
  const [progress, setProgress] = useState<Bytes | null>(null);
  const [error, setError] = useState<unknown>(null);
  const controller = useRef<AbortController | null>(null);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => { mounted.current = false; };
  }, []);

  const upload = useCallback(async (source: Source, given: UploadOptions = {}): Promise<Job> => {
    if (!client) throw new TypeError("useUpload() needs a client: <ImageJobsProvider client={client}> or useUpload({ client })");
    controller.current?.abort();
    const stop = new AbortController();
    controller.current = stop;
    const live = () => mounted.current && controller.current === stop;
    let created: Job | null = null;
    setPhase("uploading");
    setJob(null);
    setProgress(null);
    setError(null);
    try {
      const done = await client.upload(source, {
        ...given,
        signal: given.signal ?? stop.signal,
        onCreated: (made) => {
          created = made;
          if (live()) setJob(made);
          given.onCreated?.(made);
        },
        onProgress: (sent, total) => {
          if (live()) setProgress({ sent, total });
          if (created) setSending(created.location, { sent, total });
          given.onProgress?.(sent, total);
        },
      });
      if (live()) {
        setJob(done);
        setPhase("uploaded");
      }
      return done;
    } catch (failure) {
      if (live()) {
        setError(failure);
        setPhase(failure instanceof UploadStopped ? "stopped" : "failed");
      }
      throw failure;
    } finally {
      if (created) setSending((created as Job).location, null);
    }
  }, [client]);

  const cancel = useCallback(() => controller.current?.abort(), []);
  useEffect(() => () => controller.current?.abort(), []);
  return { upload, phase, job, progress, error, cancel };
}

export interface UseJobOptions {
  client?: Client;
  /** The rendition to show (default "display"). */
  rendition?: string;
  /** Formats the app shows, best first ("avif", "webp"): the variant picked; else the JPEG. */
  formats?: readonly string[];
  /** Follow it over the client's push socket (polls where there is none). */
  push?: boolean;
  /** The placeholder's size along its longer side (default 32). */
  placeholderSize?: number;
}

export interface UseJob {
  job: Job | null;
  status: string | null;
  finished: boolean;
  /** Its upload's bytes while useUpload() sends them, else null. */
  progress: Bytes | null;
  /** The decoded BlurHash and average colour of a ready job. */
  placeholder: Decoded | null;
  /** The file of `rendition` to show, in the best format the app named. */
  variant: Picked | null;
  error: unknown;
  /** Cancel the job (JobFinished when it has already ended). */
  cancel(): Promise<void>;
}

/** Follows `job` (a Job, or its id with a client) until it is ready, failed or cancelled. */
export function useJob(job: Job | string | null | undefined, options: UseJobOptions = {}): UseJob {
  const client = useClient(options.client);
  const followed = useMemo(() => (typeof job === "string" ? client?.job(job) ?? null : job ?? null), [job, client]);
  const [, setVersion] = useState(0);
  const [error, setError] = useState<unknown>(null);
  const changed = useCallback(() => setVersion((v) => v + 1), []);

  useEffect(() => {
    if (!followed) return;
    const stop = new AbortController();
    setError(null);
    (async () => {
      try {
        if (followed.status === null) await followed.refresh({ signal: stop.signal });
        changed();
        await followed.wait({ signal: stop.signal, push: options.push, onStatus: changed });
        changed();
      } catch (failure) {
        if (!stop.signal.aborted && !(failure instanceof WaitCancelled)) setError(failure);
      }
    })();
    return () => stop.abort();
  }, [followed, options.push, changed]);

  const location = followed?.location ?? null;
  const progress = useSyncExternalStore(subscribe, () => (location ? sending.get(location) ?? null : null),
    () => null);
  const blurhash = followed?.placeholder?.blurhash ?? null;
  const size = options.placeholderSize ?? 32;
  const placeholder = useMemo(() => (followed && blurhash ? decodePlaceholder(followed, size) : null), [followed, blurhash, size]);
  const name = options.rendition ?? "display";
  const rendition = followed?.ready ? followed.renditions[name] : undefined;
  const variant = rendition ? pickVariant(rendition, options.formats ?? []) : null;
  const cancel = useCallback(async () => {
    if (!followed) return;
    try {
      await followed.cancel();
    } finally {
      changed();
    }
  }, [followed, changed]);

  return { job: followed, status: followed?.status ?? null, finished: followed?.finished ?? false, progress,
    placeholder, variant, error, cancel };
}
