// Everything the package throws: one class per stable problem code of the contract, and a few
// more. The same names as the Python SDK's image_jobs.errors.
import type { Job } from "./job.js";

export class ImageJobsError extends Error {
  override name = "ImageJobsError";
}

export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  instance?: string;
  [key: string]: unknown;
}

/** The API answered with an error: RFC 9457 problem details with a stable `code`. */
export class ApiError extends ImageJobsError {
  static code = "unknown";
  override name = "ApiError";
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  /** The correlation id of an internal_error. */
  readonly instance: string | null;
  /** Seconds, from the answer's Retry-After. */
  readonly retryAfter: number | null;
  readonly body: Problem;

  constructor(status: number, body: Problem = {}, retryAfter: number | null = null) {
    const code = typeof body.code === "string" ? body.code : (new.target as typeof ApiError).code;
    const detail = String(body.detail ?? "");
    const title = String(body.title ?? "");
    super(`${status} ${code}: ${detail || title || "no detail"}`);
    this.status = status;
    // A known class keeps its own code; an unknown code keeps its own name on the base class.
    this.code = new.target === ApiError ? code : (new.target as typeof ApiError).code;
    this.title = title;
    this.detail = detail;
    this.instance = typeof body.instance === "string" ? body.instance : null;
    this.retryAfter = retryAfter;
    this.body = body;
    this.name = new.target.name;
  }
}

// One class per stable code (docs/contract.md "Stable error codes"), plus `forbidden`, which a
// gateway answers without one.
export class Unauthorized extends ApiError { static override code = "unauthorized"; }
export class Forbidden extends ApiError { static override code = "forbidden"; }
export class JobNotFound extends ApiError { static override code = "job_not_found"; }
export class WebhookNotFound extends ApiError { static override code = "webhook_not_found"; }
export class JobExpired extends ApiError { static override code = "job_expired"; }
export class JobFinished extends ApiError { static override code = "job_finished"; }
export class IdempotencyKeyReused extends ApiError { static override code = "idempotency_key_reused"; }
export class InvalidRequest extends ApiError { static override code = "invalid_request"; }
export class FileTooLarge extends ApiError { static override code = "file_too_large"; }
export class UnsupportedFormat extends ApiError { static override code = "unsupported_format"; }
export class InvalidImage extends ApiError { static override code = "invalid_image"; }
export class ImageTooLarge extends ApiError { static override code = "image_too_large"; }
export class ImageTooComplex extends ApiError { static override code = "image_too_complex"; }
export class UploadMissing extends ApiError { static override code = "upload_missing"; }
export class StorageUnavailable extends ApiError { static override code = "storage_unavailable"; }
export class RateLimited extends ApiError { static override code = "rate_limited"; }
export class Overloaded extends ApiError { static override code = "overloaded"; }
export class ProcessingFailed extends ApiError { static override code = "processing_failed"; }
export class MethodNotAllowed extends ApiError { static override code = "method_not_allowed"; }
export class InternalError extends ApiError { static override code = "internal_error"; }

export const ERRORS_BY_CODE: Readonly<Record<string, typeof ApiError>> = Object.freeze(Object.fromEntries(
  [Unauthorized, Forbidden, JobNotFound, WebhookNotFound, JobExpired, JobFinished, IdempotencyKeyReused,
    InvalidRequest, FileTooLarge, UnsupportedFormat, InvalidImage, ImageTooLarge, ImageTooComplex,
    UploadMissing, StorageUnavailable, RateLimited, Overloaded, ProcessingFailed, MethodNotAllowed,
    InternalError].map((cls) => [cls.code, cls])));

// A body without a code we know (a gateway's own page): only these statuses mean one thing
// whoever sends them; a bare 404 may just be a wrong base URL, so it stays an ApiError.
const BY_STATUS: Record<number, typeof ApiError> = { 401: Unauthorized, 403: Forbidden, 429: RateLimited };

/** The typed error of an error answer; `body` is its parsed JSON or null. */
export function errorFor(status: number, body: unknown, retryAfter: number | null = null): ApiError {
  const problem = (body && typeof body === "object" && !Array.isArray(body) ? body : {}) as Problem;
  const code = typeof problem.code === "string" ? problem.code : "";
  const cls = (Object.hasOwn(ERRORS_BY_CODE, code) ? ERRORS_BY_CODE[code] : undefined) ?? BY_STATUS[status] ?? ApiError;
  return new cls(status, problem, retryAfter);
}

/** The API or storage could not be reached, after the allowed retries. */
export class ConnectionFailed extends ImageJobsError { override name = "ConnectionFailed"; }

/** No push here (the stage has none, or the socket would not open after the allowed tries). */
export class PushUnavailable extends ImageJobsError { override name = "PushUnavailable"; }

/** A success status with a body that is not what the contract promises. */
export class UnexpectedResponse extends ImageJobsError { override name = "UnexpectedResponse"; }

/** Storage refused a presigned upload or download (expired, or the form's policy broken). */
export class StorageError extends ImageJobsError {
  override name = "StorageError";
  constructor(readonly status: number, readonly code: string, readonly storageMessage: string) {
    super(`storage answered ${status} ${code}: ${storageMessage}`);
  }
}

/** wait() ended before the job finished; `job` holds the last status seen. */
export class WaitStopped extends ImageJobsError {
  override name = "WaitStopped";
  constructor(readonly job: Job, why: string) {
    super(`job ${job.jobId} is still ${job.status ?? "unread"}: ${why}`);
  }
}

/** The caller's timeout came before the job finished. */
export class WaitTimeout extends WaitStopped { override name = "WaitTimeout"; }

/** The caller's AbortSignal fired. */
export class WaitCancelled extends WaitStopped { override name = "WaitCancelled"; }

/** upload() or resume() ended because the caller's signal fired; `job` (still
 * `awaiting_upload`, or null before it existed) is what resume() takes. */
export class UploadStopped extends ImageJobsError {
  override name = "UploadStopped";
  job: Job | null = null;
}

/** PreparedUpload.complete(): storage lacks some of the file. `missing`: the parts to send
 * again (their requests renewed in the prepared upload), or [] for a single PUT not arrived. */
export class UploadIncomplete extends ImageJobsError {
  override name = "UploadIncomplete";
  constructor(readonly job: Job, readonly missing: number[], why: string) {
    super(`job ${job.jobId}'s file is not all in storage: ${why}`);
  }
}
