"""Everything the SDK raises: one class per stable problem code of the contract, and a few more."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Type


class _Job(Protocol):
    """What these errors show of a job.Job (which raises them, so this module sits below it)."""

    @property
    def job_id(self) -> str: ...

    @property
    def status(self) -> Optional[str]: ...


class ImageJobsError(Exception):
    """Base of every error this package raises."""


class WebhookVerificationError(ImageJobsError):
    """verify_webhook: a webhook whose signature matches no secret, whose timestamp is out of
    tolerance, or that lacks the Standard Webhooks headers. Answer it 4xx and drop it."""


class ApiError(ImageJobsError):
    """The API answered with an error: RFC 9457 problem details with a stable `code`."""

    code = "unknown"

    def __init__(self, status: int, code: Optional[str] = None, title: str = "", detail: str = "",
                 instance: Optional[str] = None, retry_after: Optional[float] = None,
                 body: Optional[Dict[str, Any]] = None):
        self.status = status
        if code is not None:
            self.code = code  # an unknown code keeps its own name on the base class
        self.title = title
        self.detail = detail
        self.instance = instance  # the correlation id of an internal_error
        self.retry_after = retry_after
        self.body = body or {}
        super().__init__(f"{status} {self.code}: {detail or title or 'no detail'}")


class Unauthorized(ApiError):
    code = "unauthorized"


class Forbidden(ApiError):
    """403: a good token of the wrong kind (a user's on a service route, the service's on an
    upload), or a gateway that refused the token."""

    code = "forbidden"


class JobNotFound(ApiError):
    code = "job_not_found"


class WebhookNotFound(ApiError):
    """404 from the webhook routes that need one registered first (rotating the secret)."""

    code = "webhook_not_found"


class JobExpired(ApiError):
    code = "job_expired"


class JobFinished(ApiError):
    code = "job_finished"


class IdempotencyKeyReused(ApiError):
    code = "idempotency_key_reused"


class InvalidRequest(ApiError):
    code = "invalid_request"


class FileTooLarge(ApiError):
    code = "file_too_large"


class UnsupportedFormat(ApiError):
    code = "unsupported_format"


class InvalidImage(ApiError):
    code = "invalid_image"


class ImageTooLarge(ApiError):
    code = "image_too_large"


class ImageTooComplex(ApiError):
    code = "image_too_complex"


class UploadMissing(ApiError):
    code = "upload_missing"


class StorageUnavailable(ApiError):
    code = "storage_unavailable"


class RateLimited(ApiError):
    code = "rate_limited"


class Overloaded(ApiError):
    code = "overloaded"


class ProcessingFailed(ApiError):
    code = "processing_failed"


class MethodNotAllowed(ApiError):
    code = "method_not_allowed"


class InternalError(ApiError):
    code = "internal_error"


ERRORS_BY_CODE: Dict[str, Type[ApiError]] = {
    cls.code: cls for cls in (
        Unauthorized, Forbidden, JobNotFound, WebhookNotFound, JobExpired, JobFinished, IdempotencyKeyReused,
        InvalidRequest, FileTooLarge, UnsupportedFormat, InvalidImage, ImageTooLarge,
        ImageTooComplex, UploadMissing, StorageUnavailable, RateLimited, Overloaded,
        ProcessingFailed, MethodNotAllowed, InternalError,
    )
}
# A body without a code we know (a gateway's or proxy's own page): only these statuses mean one
# thing whoever sends them; a bare 404 may just be a wrong base URL, so it stays an ApiError.
_BY_STATUS: Dict[int, Type[ApiError]] = {401: Unauthorized, 403: Forbidden, 429: RateLimited}


def error_for(status: int, body: Any, retry_after: Optional[float] = None) -> ApiError:
    """The typed error for an error answer; `body` is its parsed JSON or None."""
    body = body if isinstance(body, dict) else {}
    code = body.get("code") if isinstance(body.get("code"), str) else None
    cls = ERRORS_BY_CODE.get(code or "") or _BY_STATUS.get(status, ApiError)
    return cls(status, code if cls is ApiError else None, title=str(body.get("title") or ""),
               detail=str(body.get("detail") or ""), instance=body.get("instance"),
               retry_after=retry_after, body=body)


class ConnectionFailed(ImageJobsError):
    """The API or storage could not be reached, after the allowed retries."""


class PushUnavailable(ImageJobsError):
    """No push here (the stage has none, or its socket would not open after the allowed
    tries): follow jobs by polling, as Job.wait(push=True) then does by itself."""


class UnexpectedResponse(ImageJobsError):
    """A success status with a body that is not what the contract promises."""


class StorageError(ImageJobsError):
    """Storage refused a presigned upload or download (expired, or the form's policy broken)."""

    def __init__(self, status: int, code: str, message: str):
        self.status, self.code, self.message = status, code, message
        super().__init__(f"storage answered {status} {code}: {message}")


class JobNotReady(ImageJobsError):
    """download() on a job that is not `ready`."""

    def __init__(self, job: _Job):
        self.job = job
        super().__init__(f"job {job.job_id} is {job.status}, not ready")


class WaitStopped(ImageJobsError):
    """wait() ended before the job finished; `job` holds the last status seen, to resume from."""

    def __init__(self, job: _Job, why: str):
        self.job = job
        super().__init__(f"job {job.job_id} is still {job.status}: {why}")


class WaitTimeout(WaitStopped, TimeoutError):
    """The caller's deadline came before the job finished."""


class WaitCancelled(WaitStopped):
    """The caller's stop event was set."""


class UploadStopped(ImageJobsError):
    """upload() or resume() ended because the caller's stop event was set; `job` (still
    `awaiting_upload`) is what resume() takes."""


class UploadIncomplete(ImageJobsError):
    """PreparedUpload.complete(): storage lacks some of the file. `missing`: the parts to send
    again (their requests renewed in the prepared upload), or [] for a single PUT whose file
    storage has not told of; `job` as last read."""

    def __init__(self, job: Any, missing: List[int], why: str):
        super().__init__(f"job {job.job_id}'s file is not all in storage: {why}")
        self.job = job
        self.missing = missing
