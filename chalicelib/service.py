"""The use cases. Stores and clock come in as parameters; no SDK is imported here."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional

from chalicelib import imaging
from chalicelib.config import Settings
from chalicelib.jobs import Job, JobStatus, Rendition
from chalicelib.logs import get_logger
from chalicelib.ports import (
    ConditionFailed,
    DomainError,
    FileTooLarge,
    JobExpired,
    JobNotFound,
    JobStore,
    ObjectCreated,
    ObjectStore,
    StorageUnavailable,
    TransientError,
)

log = get_logger("service")

_JOB_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_job_id() -> str:
    return str(uuid.uuid4())  # 122 random bits


class JobBusy(TransientError):
    """Another worker holds a live lease on the job: the message should come back later."""


@dataclass(frozen=True)
class Urls:
    display: str
    thumb: str
    expires_at: datetime


@dataclass
class Service:
    settings: Settings
    jobs: JobStore
    objects: ObjectStore
    clock: Callable[[], datetime] = utcnow
    new_id: Callable[[], str] = new_job_id
    _retention: timedelta = field(init=False)

    def __post_init__(self) -> None:
        self._retention = timedelta(seconds=self.settings.retention_seconds)

    # -- keys: derived from the job id only, never from anything the client named ------------
    def original_key(self, job_id: str) -> str:
        return f"{self.settings.originals_prefix}{job_id}"

    def rendition_key(self, job_id: str, name: str) -> str:
        return f"{self.settings.renditions_prefix}{job_id}/{name}.jpg"

    def job_id_of(self, key: str) -> Optional[str]:
        prefix = self.settings.originals_prefix
        if not key.startswith(prefix):
            return None
        job_id = key[len(prefix):]
        return job_id if _JOB_ID.match(job_id) else None

    # -- POST /images --------------------------------------------------------------------------
    def accept_upload(self, owner: str, data: bytes) -> Job:
        s = self.settings
        if len(data) > s.max_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_upload_bytes} bytes")
        info = imaging.inspect(data, s.max_pixels)
        now = self.clock()
        job_id = self.new_id()
        job = Job(
            job_id=job_id, owner=owner, status=JobStatus.QUEUED, created_at=now, updated_at=now,
            expires_at=now + self._retention, original_key=self.original_key(job_id),
        )
        self.jobs.create(job)
        try:
            self.objects.put(job.original_key, data, info.content_type)
        except TransientError:
            log.warning("original_store_failed", job_id=job_id)
            self._fail(job, "storage_unavailable", attempt=None)
            raise StorageUnavailable(retry_after=s.retry_after_seconds) from None
        log.info("upload_accepted", job_id=job_id, content_type=info.content_type,
                 width=info.width, height=info.height, bytes=len(data))
        return job

    # -- GET /image-jobs/{id} ----------------------------------------------------------------
    def get_job(self, owner: str, job_id: str) -> Job:
        job = self.jobs.get(job_id) if _JOB_ID.match(job_id) else None
        if job is None or job.owner != owner:
            raise JobNotFound()
        if job.is_expired(self.clock()):
            raise JobExpired()
        return job

    def urls(self, job: Job) -> Optional[Urls]:
        """Presigned now from the stored keys: a stored URL would expire while the job stays ready."""
        if job.status is not JobStatus.READY or job.display is None or job.thumb is None:
            return None
        ttl = self.settings.url_ttl_seconds
        return Urls(
            display=self.objects.presign_get(job.display.key, ttl),
            thumb=self.objects.presign_get(job.thumb.key, ttl),
            expires_at=self.clock() + timedelta(seconds=ttl),
        )

    # -- the worker --------------------------------------------------------------------------
    def handle_object_created(self, event: ObjectCreated) -> str:
        """Process one object-created event; returns what happened, for logs and tests.

        Returns normally when nothing is left to do for this event (done, duplicate, not
        ours); raises TransientError when the same event should be delivered again.
        """
        if event.bucket != self.settings.bucket:
            log.warning("event_ignored", reason="unknown_bucket")
            return "ignored"
        job_id = self.job_id_of(event.key)
        if job_id is None:
            log.warning("event_ignored", reason="not_an_original")
            return "ignored"
        job = self.jobs.get(job_id)
        if job is None:
            log.warning("event_ignored", reason="no_job", job_id=job_id)
            return "ignored"
        if job.status.terminal:
            log.info("event_duplicate", job_id=job_id, status=job.status.value)
            return "duplicate"
        job = self._claim(job)
        if job.status is not JobStatus.PROCESSING:
            return job.status.value
        return self._process(job)

    def _claim(self, job: Job) -> Job:
        s = self.settings
        now = self.clock()
        try:
            return self.jobs.claim(job.job_id, now, s.lease_seconds, s.max_attempts)
        except ConditionFailed:
            pass
        current = self.jobs.get(job.job_id)
        if current is None or current.status.terminal:
            return current or job
        if current.lease_active(now):
            raise JobBusy(f"job {job.job_id} is leased by another worker")
        if current.attempt >= s.max_attempts:
            log.warning("attempts_exhausted", job_id=job.job_id, attempt=current.attempt)
            failed = self._fail(current, "processing_failed", attempt=current.attempt)
            return failed or self.jobs.get(job.job_id) or current
        raise JobBusy(f"job {job.job_id} could not be claimed")

    def _process(self, job: Job) -> str:
        s = self.settings
        log.info("job_claimed", job_id=job.job_id, attempt=job.attempt)
        try:
            data = self.objects.get(job.original_key, s.max_direct_upload_bytes)
            display, thumb = imaging.make_renditions(
                data, s.max_pixels, display_box=s.display_box, thumb_size=s.thumb_size,
                quality=s.jpeg_quality,
            )
            stored = {}
            for out in (display, thumb):
                key = self.rendition_key(job.job_id, out.name)
                self.objects.put(key, out.data, out.content_type)
                stored[out.name] = Rendition(key, out.width, out.height, out.content_type)
        except KeyError:
            return self._fail_outcome(job, "upload_missing")
        except DomainError as error:  # permanent: the bytes are what they are
            return self._fail_outcome(job, error.code)
        except Exception:
            # Transient or unexpected: give the lease back so a redelivery can try again;
            # the attempt count bounds how often.
            log.exception("job_attempt_failed", job_id=job.job_id, attempt=job.attempt)
            self._release(job)
            raise
        done = job.ready(self.clock(), stored["display"], stored["thumb"], self._retention)
        try:
            self.jobs.transition(done, JobStatus.PROCESSING, attempt=job.attempt)
        except ConditionFailed:
            log.warning("job_finish_lost", job_id=job.job_id, attempt=job.attempt)
            return "lost"
        log.info("job_ready", job_id=job.job_id, attempt=job.attempt,
                 width=display.width, height=display.height)
        return "ready"

    def _fail_outcome(self, job: Job, code: str) -> str:
        self._fail(job, code, attempt=job.attempt)
        return f"failed:{code}"

    def _fail(self, job: Job, code: str, attempt: Optional[int]) -> Optional[Job]:
        failed = job.failed(self.clock(), code, self._retention)
        try:
            self.jobs.transition(failed, job.status, attempt=attempt)
        except ConditionFailed:
            log.warning("job_fail_lost", job_id=job.job_id, code=code)
            return None
        log.info("job_failed", job_id=job.job_id, code=code)
        return failed

    def _release(self, job: Job) -> None:
        try:
            self.jobs.release(job, self.clock())
        except (ConditionFailed, TransientError):
            pass  # the lease runs out by itself
