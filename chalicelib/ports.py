"""What the service needs from the outside world, and the errors it speaks in.

The service imports only this module's Protocols; adapters implement them and fakes
implement them for unit tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterator, Optional, Protocol

from chalicelib.jobs import Job, JobStatus


class DomainError(Exception):
    """An error with a stable machine code that may be shown to a client.

    `detail` must be safe to show: no keys, bucket or table names, library messages.
    """

    code = "invalid_request"

    def __init__(self, detail: str = "", retry_after: Optional[int] = None):
        super().__init__(detail or self.code)
        self.detail = detail
        self.retry_after = retry_after


class Unauthorized(DomainError):
    code = "unauthorized"


class InvalidRequest(DomainError):
    code = "invalid_request"


class JobNotFound(DomainError):
    code = "job_not_found"


class JobExpired(DomainError):
    code = "job_expired"


class FileTooLarge(DomainError):
    code = "file_too_large"


class UnsupportedFormat(DomainError):
    code = "unsupported_format"


class InvalidImage(DomainError):
    code = "invalid_image"


class ImageTooLarge(DomainError):
    code = "image_too_large"


class StorageUnavailable(DomainError):
    code = "storage_unavailable"


class IdempotencyKeyReused(DomainError):
    code = "idempotency_key_reused"


class JobFinished(DomainError):
    code = "job_finished"


class Overloaded(DomainError):
    code = "overloaded"


class TransientError(Exception):
    """Storage or table unavailable: the work may succeed if tried again later."""

    def __init__(self, message: str = "", retry_in: Optional[float] = None):
        super().__init__(message)
        self.retry_in = retry_in  # seconds until a retry makes sense, when known


class ConditionFailed(Exception):
    """A conditional write lost: the item was not in the state the write required."""


class KeyTaken(Exception):
    """A live idempotency record already holds this key."""


@dataclass(frozen=True)
class IdempotencyRecord:
    scope: str          # a hash of owner + operation + key
    fingerprint: str    # SHA-256 of the file bytes and the options
    job_id: str
    expires_at: datetime


class ObjectStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str) -> None: ...

    def get(self, key: str, max_bytes: int) -> bytes:
        """The object's bytes; raises FileTooLarge past max_bytes, KeyError if absent."""
        ...

    def delete(self, key: str) -> None:
        """Idempotent: deleting a missing key is not an error."""
        ...

    def presign_get(self, key: str, expires_in: int) -> str: ...

    def presign_post(self, key: str, content_type: str, max_size: int, expires_in: int) -> dict:
        """{"url", "fields"} of a form upload pinned to key, content type and size range."""
        ...

    def list_keys(self, prefix: str, older_than: datetime) -> Iterator[str]:
        """Keys under prefix last modified before older_than."""
        ...


class BacklogGauge(Protocol):
    def depth(self) -> int:
        """Events waiting in the queue (approximately)."""
        ...


class EventPublisher(Protocol):
    def publish_object_created(self, bucket: str, key: str, size: int) -> None:
        """Send the storage's object-created event again (the sweeper's re-drive)."""
        ...


class JobStore(Protocol):
    def create(self, job: Job, idempotency: Optional[IdempotencyRecord] = None,
               now: Optional[datetime] = None) -> None:
        """Insert a new job, and its idempotency record in the same transaction.

        Raises KeyTaken when a record that has not expired by `now` holds the key,
        ConditionFailed when the job id exists.
        """
        ...

    def get_idempotency(self, scope: str) -> Optional[IdempotencyRecord]: ...

    def release_idempotency(self, scope: str, job_id: str) -> None:
        """Delete the record if it still points at job_id; a missing one is fine."""
        ...

    def due(self, status: JobStatus, now: datetime, limit: int) -> list[Job]:
        """Jobs in `status` whose sweep_at has come."""
        ...

    def get(self, job_id: str) -> Optional[Job]: ...

    def claim(self, job_id: str, now: datetime, lease_seconds: int, max_attempts: int) -> Job:
        """queued, or processing with an expired lease -> processing, attempt + 1.

        Raises ConditionFailed when the job is in any other state or out of attempts.
        """
        ...

    def release(self, job: Job, now: datetime) -> None:
        """Give the lease back early (transient failure) so a redelivery may claim."""
        ...

    def transition(self, job: Job, from_status: JobStatus, attempt: Optional[int] = None,
                   updated_at: Optional[datetime] = None) -> None:
        """Write `job` whole if the stored status is `from_status` and, for a worker, the
        stored attempt is still `attempt` (and, for the sweeper, nothing changed since
        `updated_at`); else raise ConditionFailed."""
        ...

    def delete(self, job_id: str) -> None: ...


@dataclass(frozen=True)
class ObjectCreated:
    bucket: str
    key: str
    size: int
    etag: str
