// An upload whose bytes someone else sends: the phone's background uploader (iOS's URLSession,
// Android's WorkManager, Expo's FileSystem.uploadAsync), another process, curl. The job is
// made here; what is handed over is plain HTTP requests (a URL, headers, which bytes of the
// file); complete() finishes it afterwards, from this object or from its JSON in another
// process or launch.
import type { Client } from "./client.js";
import * as errors from "./errors.js";
import { Job, Status, jsonObject } from "./job.js";
import { ARRIVAL_SECONDS } from "./polling.js";

export interface UploadPart { part_number: number; size: number; stored?: boolean; etag?: string; url?: string; }
/** `upload` of POST /uploads and GET .../upload (docs/contract.md). */
export interface UploadDescription {
  method?: string;
  url?: string;
  headers?: Record<string, string>;
  fields?: Record<string, string>;
  part_size?: number;
  parts?: UploadPart[];
  expires_at?: string;
}

/** One request that sends bytes `offset` to `offset + length` of the file as its body, with
 * exactly these headers (Content-Length is `length`: storage refuses any other). */
export interface StorageRequest {
  method: "PUT";
  url: string;
  headers: Record<string, string>;
  offset: number;
  length: number;
  /** The part's number in a multipart upload; null for the single PUT. */
  partNumber: number | null;
}

/** What toJSON() keeps, and PreparedUpload.from() takes: no token, no secret. */
export interface SavedUpload {
  version: 1;
  /** The job's URL. */
  job: string;
  method: "PUT" | "multipart";
  size: number;
  contentType: string;
  partSize: number | null;
  /** When the URLs of `requests` stop being accepted (RFC 3339); renew() signs new ones. */
  expiresAt: string | null;
  requests: StorageRequest[];
  /** Where `client.storage` keeps this file's upload, forgotten once it is complete. */
  record: string | null;
}

export interface CompleteOptions {
  /** Seconds to wait for storage's event after a single PUT (default polling.ARRIVAL_SECONDS). */
  timeout?: number;
  signal?: AbortSignal;
  /** The parts' ETags, where the uploader could read them; without, the server lists the parts. */
  parts?: readonly { partNumber: number; etag: string }[];
}

export class PreparedUpload {
  readonly job: Job;
  readonly method: "PUT" | "multipart";
  readonly size: number;
  readonly contentType: string;
  readonly partSize: number | null;
  /** The requests still to send: every part storage lacks (all of them at first), or the PUT. */
  requests: StorageRequest[];
  expiresAt: string | null;
  /** @internal */ readonly record: string | null;

  /** @internal prepareUpload() and from() make these. */
  constructor(private readonly client: Client, job: Job, saved: Omit<SavedUpload, "version" | "job">) {
    this.job = job;
    this.method = saved.method;
    this.size = saved.size;
    this.contentType = saved.contentType;
    this.partSize = saved.partSize;
    this.requests = saved.requests.map((request) => ({ ...request, headers: { ...request.headers } }));
    this.expiresAt = saved.expiresAt;
    this.record = saved.record;
  }

  /** @internal From an upload description (POST /uploads's or GET .../upload's). */
  static described(client: Client, job: Job, upload: UploadDescription, size: number, contentType: string, record: string | null): PreparedUpload {
    const method = upload.method === "multipart" ? "multipart" : "PUT";
    return new PreparedUpload(client, job, {
      method, size, contentType, partSize: upload.part_size ?? null, expiresAt: upload.expires_at ?? null,
      requests: requestsOf(upload, size), record,
    });
  }

  /** A prepared upload saved by toJSON() (the object or its JSON text), on `client` (whose token
   * finishes it: the same owner's). */
  static from(saved: SavedUpload | string, client: Client): PreparedUpload {
    const data = (typeof saved === "string" ? JSON.parse(saved) : saved) as SavedUpload;
    if (!data || data.version !== 1 || typeof data.job !== "string" || !Array.isArray(data.requests)) {
      throw new TypeError("not a prepared upload saved by toJSON()");
    }
    return new PreparedUpload(client, client.job(data.job), data);
  }

  /** JSON.stringify(prepared) keeps this: store it (AsyncStorage, a file) and finish the upload
   * from another process or launch with PreparedUpload.from(saved, client). */
  toJSON(): SavedUpload {
    return { version: 1, job: this.job.location, method: this.method, size: this.size, contentType: this.contentType,
      partSize: this.partSize, expiresAt: this.expiresAt, requests: this.requests, record: this.record };
  }

  /** Fresh URLs for what storage lacks (GET .../upload), in `requests` and answered: the parts
   * not stored yet, or the PUT signed anew. [] once the file has arrived. For part URLs that
   * expired (storage answers 403), or a transfer moved to another network. */
  async renew(options: { signal?: AbortSignal } = {}): Promise<StorageRequest[]> {
    const upload = await this.described(options.signal);
    this.requests = upload ? requestsOf(upload, this.size) : [];
    if (upload?.expires_at) this.expiresAt = upload.expires_at;
    return this.requests;
  }

  /** After the requests were sent: the job with its file, `queued` or further along. Multipart:
   * the completion (POST .../upload; the server lists the parts unless `parts` names them). A
   * single PUT has nothing to complete: this waits, held, until storage's event moves the job
   * from `awaiting_upload`. UploadIncomplete (with the parts still missing, and `requests`
   * renewed for them) when storage lacks some of the file. */
  async complete(options: CompleteOptions = {}): Promise<Job> {
    const job = this.job;
    if (this.method === "multipart") {
      const body = options.parts?.length
        ? { json: { parts: options.parts.map((part) => ({ part_number: part.partNumber, etag: part.etag })) } } : {};
      try {
        job._withAnswer(await this.client.request("POST", `${job.location}/upload`, { repeatable: true, signal: options.signal, ...body }));
      } catch (error) {
        if (!(error instanceof errors.InvalidRequest)) throw error;
        // A part missing (or the upload ended): which, from the server, with fresh URLs for them.
        const upload = await this.described(options.signal);
        if (upload) {
          this.requests = requestsOf(upload, this.size);
          throw new errors.UploadIncomplete(job, this.requests.map((request) => request.partNumber ?? 0), error.detail);
        }
      }
    } else {
      await job.refresh({ signal: options.signal });
      const timeout = options.timeout ?? ARRIVAL_SECONDS;
      try {
        await job._pollUntil(() => job.status !== Status.AWAITING_UPLOAD, this.client.clock() + timeout * 1000, options.signal);
      } catch (error) {
        if (!(error instanceof errors.WaitTimeout)) throw error;
        throw new errors.UploadIncomplete(job, [], `storage has not told of the file in ${timeout} s: send the PUT (renew() signs it anew), then complete()`);
      }
    }
    if (this.record) await this.client.storage.removeItem(this.record);
    this.requests = [];
    return job;
  }

  /** GET .../upload: the upload still to send, or null once the file has arrived (the job read). */
  private async described(signal?: AbortSignal): Promise<UploadDescription | null> {
    const answer = await this.client.request("GET", `${this.job.location}/upload`, { signal });
    const upload = jsonObject(answer);
    if ("method" in upload || typeof upload.status !== "string") return upload as UploadDescription;
    this.job._with(upload, answer);
    return null;
  }
}

/** The requests of an upload description: the PUT, or one for each part not stored. */
export function requestsOf(upload: UploadDescription, size: number): StorageRequest[] {
  if (upload.method === "multipart") {
    const partSize = upload.part_size ?? 0;
    return (upload.parts ?? []).filter((part) => !part.stored && part.url).map((part) => ({
      // The type named so that no uploader adds a default of its own (the Python SDK's alike).
      method: "PUT", url: part.url!, headers: { "Content-Length": String(part.size), "Content-Type": "application/octet-stream" },
      offset: (part.part_number - 1) * partSize, length: part.size, partNumber: part.part_number,
    }));
  }
  if (upload.method === "PUT" && upload.url) {
    return [{ method: "PUT", url: upload.url, headers: { ...(upload.headers ?? {}), "Content-Length": String(size) },
      offset: 0, length: size, partNumber: null }];
  }
  throw new errors.UnexpectedResponse(`an upload by ${JSON.stringify(upload.method)} cannot be handed over`);
}
