"""Every error the program speaks in, in one place.

DomainError and its kinds carry a stable ErrorCode and may be shown to a client; the rest
are signals between the use cases, the stores and the message loops.
"""
from __future__ import annotations

from typing import Optional

from chalicelib.domain.vocabulary import ErrorCode


class DomainError(Exception):
    """An error with a stable machine code that may be shown to a client.

    `detail` must be safe to show: no keys, bucket or table names, library messages.
    """

    code: ErrorCode = ErrorCode.INVALID_REQUEST

    def __init__(self, detail: str = "", retry_after: Optional[int] = None):
        super().__init__(detail or self.code.value)
        self.detail = detail
        self.retry_after = retry_after


class Unauthorized(DomainError):
    code = ErrorCode.UNAUTHORIZED


class Forbidden(DomainError):
    """A good token of the wrong kind: a user's on a service route, or the service's on an
    owner's route (an upload, say)."""

    code = ErrorCode.FORBIDDEN


class InvalidRequest(DomainError):
    code = ErrorCode.INVALID_REQUEST


class JobNotFound(DomainError):
    code = ErrorCode.JOB_NOT_FOUND


class WebhookNotFound(DomainError):
    code = ErrorCode.WEBHOOK_NOT_FOUND


class JobExpired(DomainError):
    code = ErrorCode.JOB_EXPIRED


class JobFinished(DomainError):
    code = ErrorCode.JOB_FINISHED


class IdempotencyKeyReused(DomainError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED


class FileTooLarge(DomainError):
    code = ErrorCode.FILE_TOO_LARGE


class UnsupportedFormat(DomainError):
    code = ErrorCode.UNSUPPORTED_FORMAT


class InvalidImage(DomainError):
    code = ErrorCode.INVALID_IMAGE


class ImageTooLarge(DomainError):
    code = ErrorCode.IMAGE_TOO_LARGE


class ImageTooComplex(DomainError):
    code = ErrorCode.IMAGE_TOO_COMPLEX


class StorageUnavailable(DomainError):
    code = ErrorCode.STORAGE_UNAVAILABLE


class RateLimited(DomainError):
    code = ErrorCode.RATE_LIMITED


class Overloaded(DomainError):
    code = ErrorCode.OVERLOADED


class MethodNotAllowed(DomainError):
    code = ErrorCode.METHOD_NOT_ALLOWED


class TransientError(Exception):
    """Storage, table or queue unavailable: the work may succeed if tried again later."""

    def __init__(self, message: str = "", retry_in: Optional[float] = None):
        super().__init__(message)
        self.retry_in = retry_in  # seconds until a retry makes sense, when known


class JobBusy(TransientError):
    """Another worker holds a live lease on the job: the message should come back later."""


class ConditionFailed(Exception):
    """A conditional write lost: the item was not in the state the write required."""


class BucketMoved(ConditionFailed):
    """A rate bucket's write lost (RateStore): `full_at` is what the bucket held then (None:
    full), read by the refusal itself, so the caller need not read it again."""

    def __init__(self, full_at):
        super().__init__(full_at)
        self.full_at = full_at


class IdempotencyKeyTaken(Exception):
    """A live idempotency record already holds this key."""


class QuotaFull(Exception):
    """The owner already has its quota of unfinished jobs."""


class PoisonMessage(ValueError):
    """A message that no retry can make sense of: drop or dead-letter it."""


class IllegalTransition(Exception):
    """A move the status diagram does not have: a bug, never a client's error."""

    def __init__(self, source, target):
        super().__init__(f"{source.value} -> {target.value}")
        self.source = source
        self.target = target


class DeliveryFailed(Exception):
    """A webhook attempt got no HTTP answer. `reason` is a short word for logs and metrics."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RetryLater(TransientError):
    """The webhook delivery should be tried again in `retry_in` seconds; its message has
    already been set to come back then."""



class ConnectionGone(Exception):
    """A push connection that has closed (API Gateway's GoneException): forget it."""


class PushConnectionsFull(Exception):
    """The owner already has as many push connections open as it may: refuse another."""
