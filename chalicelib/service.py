"""The use cases. Stores, publisher and clock come in as parameters; no SDK is imported here."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional

from chalicelib import imaging
from chalicelib.config import Settings
from chalicelib.events import PoisonMessage
from chalicelib.jobs import TERMINAL, Job, JobStatus, Rendition
from chalicelib.logs import get_logger
from chalicelib.ports import (
    ConditionFailed,
    DomainError,
    EventPublisher,
    FileTooLarge,
    IdempotencyKeyReused,
    IdempotencyRecord,
    BacklogGauge,
    InvalidRequest,
    JobExpired,
    JobFinished,
    JobNotFound,
    JobStore,
    KeyTaken,
    ObjectCreated,
    ObjectStore,
    Overloaded,
    StorageUnavailable,
    TransientError,
    UnsupportedFormat,
)

log = get_logger("service")

_JOB_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
_IDEMPOTENCY_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
RENDITION_NAMES = ("display", "thumb")


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


@dataclass(frozen=True)
class Accepted:
    job: Job
    replayed: bool = False
    upload: Optional[dict] = None  # direct uploads: the presigned POST form


@dataclass
class Service:
    settings: Settings
    jobs: JobStore
    objects: ObjectStore
    publisher: Optional[EventPublisher] = None
    backlog: Optional[BacklogGauge] = None
    clock: Callable[[], datetime] = utcnow
    new_id: Callable[[], str] = new_job_id
    _retention: timedelta = field(init=False)

    def __post_init__(self) -> None:
        self._retention = timedelta(seconds=self.settings.retention_seconds)
        self._queue_timeout = timedelta(seconds=self.settings.queue_timeout_seconds)
        self._backlog_seen: tuple[Optional[datetime], int] = (None, 0)

    # -- backpressure -----------------------------------------------------------------------
    def check_capacity(self) -> None:
        """503 overloaded while the queue's backlog is over the bound (read at most every
        few seconds: a busy API must not add a queue call to every upload)."""
        if self.backlog is None:
            return
        now = self.clock()
        seen_at, depth = self._backlog_seen
        if seen_at is None or (now - seen_at).total_seconds() >= self.settings.backlog_cache_seconds:
            try:
                depth = self.backlog.depth()
            except TransientError:
                depth = 0  # the queue's health is the worker's business, not a reason to refuse
            self._backlog_seen = (now, depth)
        if depth > self.settings.max_backlog:
            log.warning("upload_shed", backlog=depth)
            raise Overloaded("Too many images are waiting; try again later",
                             retry_after=max(self.settings.retry_after_seconds, 5))

    # -- keys: derived from the job id only, never from anything the client named ------------
    def original_key(self, job_id: str) -> str:
        return f"{self.settings.originals_prefix}{job_id}"

    def rendition_key(self, job_id: str, name: str) -> str:
        return f"{self.settings.renditions_prefix}{job_id}/{name}.jpg"

    def job_id_of(self, key: str) -> Optional[str]:
        for prefix in (self.settings.originals_prefix, self.settings.renditions_prefix):
            if key.startswith(prefix):
                job_id = key[len(prefix):].split("/", 1)[0]
                return job_id if _JOB_ID.match(job_id) else None
        return None

    def _new_job(self, owner: str, status: JobStatus, now: datetime, **fields) -> Job:
        job_id = self.new_id()
        fields.setdefault("sweep_at", now + self._queue_timeout)
        return Job(job_id=job_id, owner=owner, status=status, created_at=now, updated_at=now,
                   expires_at=now + self._retention, original_key=self.original_key(job_id), **fields)

    # -- POST /images --------------------------------------------------------------------------
    def accept_upload(self, owner: str, data: bytes, idempotency_key: Optional[str] = None) -> Accepted:
        s = self.settings
        check_idempotency_key(idempotency_key)
        self.check_capacity()
        if len(data) > s.max_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_upload_bytes} bytes")
        info = imaging.inspect(data, s.max_pixels)
        fingerprint = _fingerprint(b"images", hashlib.sha256(data).digest())
        now = self.clock()
        job = self._new_job(owner, JobStatus.QUEUED, now)
        accepted = self._create(job, "images", idempotency_key, fingerprint, now)
        if accepted.replayed:
            return accepted
        job = accepted.job
        try:
            self.objects.put(job.original_key, data, info.content_type)
        except TransientError:
            log.warning("original_store_failed", job_id=job.job_id)
            self._fail(job, "storage_unavailable", attempt=None)
            if job.idempotency_scope:
                self._quietly(self.jobs.release_idempotency, job.idempotency_scope, job.job_id)
            raise StorageUnavailable(retry_after=s.retry_after_seconds) from None
        log.info("upload_accepted", job_id=job.job_id, content_type=info.content_type,
                 width=info.width, height=info.height, bytes=len(data))
        return accepted

    # -- POST /uploads -------------------------------------------------------------------------
    def create_direct_upload(self, owner: str, content_type: object, size: object,
                             idempotency_key: Optional[str] = None) -> Accepted:
        s = self.settings
        check_idempotency_key(idempotency_key)
        self.check_capacity()
        if not isinstance(content_type, str) or not isinstance(size, int) or isinstance(size, bool):
            raise InvalidRequest('Send {"content_type": "image/...", "size": <bytes>}')
        if content_type not in imaging.ALLOWED_TYPES:
            raise UnsupportedFormat("content_type must be one of " + ", ".join(sorted(imaging.ALLOWED_TYPES)))
        if size < 1:
            raise InvalidRequest("size must be a positive number of bytes")
        if size > s.max_direct_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_direct_upload_bytes} bytes")
        now = self.clock()
        upload_expires_at = now + timedelta(seconds=s.upload_url_ttl_seconds)
        job = self._new_job(owner, JobStatus.AWAITING_UPLOAD, now, declared_type=content_type,
                            declared_size=size, upload_expires_at=upload_expires_at,
                            sweep_at=upload_expires_at)
        fingerprint = _fingerprint(b"uploads", f"{content_type}\n{size}".encode())
        accepted = self._create(job, "uploads", idempotency_key, fingerprint, now)
        job = accepted.job
        if job.status is not JobStatus.AWAITING_UPLOAD or job.upload_expires_at is None:
            return accepted
        seconds_left = int((job.upload_expires_at - now).total_seconds())
        if seconds_left <= 0:
            return accepted
        form = self.objects.presign_post(job.original_key, job.declared_type, job.declared_size,
                                         seconds_left)
        log.info("direct_upload_created", job_id=job.job_id, replayed=accepted.replayed)
        return Accepted(job, accepted.replayed, {**form, "expires_at": job.upload_expires_at})

    # -- idempotency -----------------------------------------------------------------------------
    def _create(self, job: Job, operation: str, key: Optional[str], fingerprint: str,
                now: datetime) -> Accepted:
        if key is None:
            self.jobs.create(job)
            return Accepted(job)
        scope = hashlib.sha256(f"{job.owner}\n{operation}\n{key}".encode()).hexdigest()
        held = self.jobs.get_idempotency(scope)
        if held is not None and now < held.expires_at:
            return self._replay(held, fingerprint, job.owner)
        job = dataclasses.replace(job, idempotency_scope=scope)
        record = IdempotencyRecord(scope=scope, fingerprint=fingerprint, job_id=job.job_id,
                                   expires_at=now + timedelta(seconds=self.settings.idempotency_ttl_seconds))
        try:
            self.jobs.create(job, record, now)
        except KeyTaken:
            # A concurrent identical request won the race: answer with its job.
            held = self.jobs.get_idempotency(scope)
            if held is None:
                raise TransientError("idempotency record vanished") from None
            return self._replay(held, fingerprint, job.owner)
        return Accepted(job)

    def _replay(self, held: IdempotencyRecord, fingerprint: str, owner: str) -> Accepted:
        if held.fingerprint != fingerprint:
            raise IdempotencyKeyReused("This Idempotency-Key was used for a different request")
        job = self.jobs.get(held.job_id)
        if job is None or job.owner != owner:
            raise JobNotFound()
        log.info("idempotent_replay", job_id=job.job_id)
        return Accepted(job, replayed=True)

    # -- GET /image-jobs/{id} ----------------------------------------------------------------
    def get_job(self, owner: str, job_id: str) -> Job:
        job = self._owned(owner, job_id)
        if job.is_expired(self.clock()):
            raise JobExpired()
        return job

    def _owned(self, owner: str, job_id: str) -> Job:
        job = self.jobs.get(job_id) if _JOB_ID.match(job_id) else None
        if job is None or job.owner != owner:
            raise JobNotFound()
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

    # -- POST /image-jobs/{id}/cancel ------------------------------------------------------------
    def cancel(self, owner: str, job_id: str) -> Job:
        for _ in range(5):  # each lost race means the job moved on: look again
            job = self.get_job(owner, job_id)
            if job.status is JobStatus.CANCELLED:
                return job
            if job.status.terminal:
                raise JobFinished("The job has already finished")
            cancelled = job.cancelled(self.clock(), self._retention)
            try:
                self.jobs.transition(cancelled, job.status)
            except ConditionFailed:
                continue
            # A worker that wrote renditions before it noticed also removes them; this
            # covers one that died in between.
            self._delete_renditions(job_id)
            log.info("job_cancelled", job_id=job_id, was=job.status.value)
            return cancelled
        raise TransientError("the job kept changing")

    # -- DELETE /image-jobs/{id} -----------------------------------------------------------------
    def delete(self, owner: str, job_id: str) -> None:
        job = self._owned(owner, job_id)
        if not job.status.terminal:
            # Stop a worker first, so it cannot write renditions after the objects are gone.
            try:
                self.jobs.transition(job.cancelled(self.clock(), self._retention), job.status)
            except ConditionFailed:
                job = self._owned(owner, job_id)
        self._remove(job)
        log.info("job_deleted", job_id=job_id)

    def _remove(self, job: Job) -> None:
        """Objects first, then the key, then the record: a crash half-way leaves a record
        that the next attempt (or the sweeper) finishes removing."""
        self.objects.delete(job.original_key)
        self._delete_renditions(job.job_id, quiet=False)
        if job.idempotency_scope:
            self.jobs.release_idempotency(job.idempotency_scope, job.job_id)
        self.jobs.delete(job.job_id)

    def _delete_renditions(self, job_id: str, quiet: bool = True) -> None:
        for name in RENDITION_NAMES:
            if quiet:
                self._quietly(self.objects.delete, self.rendition_key(job_id, name))
            else:
                self.objects.delete(self.rendition_key(job_id, name))

    # -- the worker --------------------------------------------------------------------------
    def handle_object_created(self, event: ObjectCreated) -> str:
        """Process one object-created event; returns what happened, for logs and tests.

        Returns normally when nothing is left to do for this event (done, duplicate, not
        ours); raises TransientError when the same event should be delivered again.
        """
        if event.bucket != self.settings.bucket:
            raise PoisonMessage("event for a bucket this service does not own")
        job_id = self.job_id_of(event.key)
        if job_id is None or not event.key.startswith(self.settings.originals_prefix):
            log.warning("event_ignored", reason="not_an_original")
            return "ignored"
        job = self.jobs.get(job_id)
        if job is None:
            log.warning("event_ignored", reason="no_job", job_id=job_id)
            return "ignored"
        if job.status.terminal:
            log.info("event_duplicate", job_id=job_id, status=job.status.value)
            return "duplicate"
        if job.status is JobStatus.AWAITING_UPLOAD:
            job = self._uploaded(job)
            if job.status.terminal:
                return job.status.value
        job = self._claim(job)
        if job.status is not JobStatus.PROCESSING:
            return job.status.value
        return self._process(job)

    def _uploaded(self, job: Job) -> Job:
        try:
            queued = job.queued(self.clock(), self._queue_timeout)
            self.jobs.transition(queued, JobStatus.AWAITING_UPLOAD)
            log.info("upload_arrived", job_id=job.job_id)
            return queued
        except ConditionFailed:
            return self.jobs.get(job.job_id) or job

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
            remaining = (current.lease_expires_at - now).total_seconds()
            raise JobBusy(f"job {job.job_id} is leased by another worker", retry_in=remaining)
        if current.attempt >= s.max_attempts:
            log.warning("attempts_exhausted", job_id=job.job_id, attempt=current.attempt)
            failed = self._fail(current, "processing_failed", attempt=current.attempt)
            return failed or self.jobs.get(job.job_id) or current
        raise JobBusy(f"job {job.job_id} could not be claimed")

    def _process(self, job: Job) -> str:
        s = self.settings
        log.info("job_claimed", job_id=job.job_id, attempt=job.attempt)
        # The declared size of a direct upload: an emulator may not enforce the POST policy.
        limit = job.declared_size if job.declared_size is not None else s.max_upload_bytes
        try:
            data = self.objects.get(job.original_key, limit)
            if not self._still_ours(job):
                return "abandoned"
            display, thumb = imaging.make_renditions(
                data, s.max_pixels, display_box=s.display_box, thumb_size=s.thumb_size,
                quality=s.jpeg_quality,
            )
            if not self._still_ours(job):
                return "abandoned"
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
            self._quietly(self.jobs.release, job, self.clock())
            raise
        done = job.ready(self.clock(), stored["display"], stored["thumb"], self._retention)
        try:
            self.jobs.transition(done, JobStatus.PROCESSING, attempt=job.attempt)
        except ConditionFailed:
            current = self.jobs.get(job.job_id)
            # Another attempt's ready result shares these keys; anything else must not keep them.
            if current is None or current.status is not JobStatus.READY:
                self._delete_renditions(job.job_id)
            log.warning("job_finish_lost", job_id=job.job_id, attempt=job.attempt)
            return "lost"
        log.info("job_ready", job_id=job.job_id, attempt=job.attempt,
                 width=display.width, height=display.height)
        return "ready"

    def _still_ours(self, job: Job) -> bool:
        """A safe step: stop if the job was cancelled, deleted or taken by a newer attempt."""
        current = self.jobs.get(job.job_id)
        if current is not None and current.status is JobStatus.PROCESSING and current.attempt == job.attempt:
            return True
        log.info("job_abandoned", job_id=job.job_id, attempt=job.attempt,
                 status=current.status.value if current else "deleted")
        return False

    def _fail_outcome(self, job: Job, code: str) -> str:
        self._fail(job, code, attempt=job.attempt)
        return f"failed:{code}"

    def _fail(self, job: Job, code: str, attempt: Optional[int],
              updated_at: Optional[datetime] = None) -> Optional[Job]:
        failed = job.failed(self.clock(), code, self._retention)
        try:
            self.jobs.transition(failed, job.status, attempt=attempt, updated_at=updated_at)
        except ConditionFailed:
            log.warning("job_fail_lost", job_id=job.job_id, code=code)
            return None
        log.info("job_failed", job_id=job.job_id, code=code)
        return failed

    @staticmethod
    def _quietly(call, *args) -> None:
        """Best effort: a later sweep or lease expiry covers what this does not."""
        try:
            call(*args)
        except (ConditionFailed, TransientError):
            pass

    # -- the sweeper -------------------------------------------------------------------------
    def sweep(self, batch: int = 100, max_batches: int = 10) -> Counter:
        """One idempotent pass; safe to run twice, concurrently, or after a crash half-way."""
        report: Counter = Counter()
        now = self.clock()
        s = self.settings
        lease = timedelta(seconds=s.lease_seconds)
        for status, act in (
            (JobStatus.PROCESSING, lambda j: self._sweep_processing(j, now, lease)),
            (JobStatus.QUEUED, lambda j: self._sweep_queued(j, now)),
            (JobStatus.AWAITING_UPLOAD, lambda j: self._sweep_awaiting(j, now)),
            *((t, lambda j: self._sweep_expired(j, now)) for t in TERMINAL),
        ):
            for _ in range(max_batches):
                jobs = self.jobs.due(status, now, batch)
                for job in jobs:
                    try:
                        report[act(job)] += 1
                    except TransientError:
                        log.exception("sweep_step_failed", job_id=job.job_id)
                        report["errors"] += 1
                if len(jobs) < batch:
                    break
        report.pop("skipped", None)
        if report:
            log.info("sweep_done", **report)
        return report

    def sweep_orphans(self) -> Counter:
        """Objects whose job is gone (deleted by TTL, say) and older than the grace period.

        Streams the listing (keys come sorted, so a job's objects are neighbours) and reads
        each job once per prefix: run it rarely (daily), since its cost grows with the
        bucket, not with the work.
        """
        s = self.settings
        report: Counter = Counter()
        grace = self.clock() - timedelta(seconds=s.orphan_grace_seconds)
        for prefix in (s.originals_prefix, s.renditions_prefix):
            for job_id, keys in itertools.groupby(self.objects.list_keys(prefix, grace), self.job_id_of):
                if job_id is not None and self.jobs.get(job_id) is not None:
                    continue
                for key in keys:
                    self.objects.delete(key)
                    report["orphans_deleted"] += 1
        if report:
            log.info("orphan_sweep_done", **report)
        return report

    def _sweep_processing(self, job: Job, now: datetime, lease: timedelta) -> str:
        if job.lease_active(now):
            return "skipped"
        if job.attempt >= self.settings.max_attempts or job.redrives >= self.settings.max_attempts:
            failed = self._fail(job, "processing_failed", attempt=job.attempt, updated_at=job.updated_at)
            return "failed" if failed else "skipped"
        return self._redrive(job, now, lease)

    def _sweep_queued(self, job: Job, now: datetime) -> str:
        if job.redrives >= 1:  # re-driven once already, and still nobody claimed it
            failed = self._fail(job, "processing_failed", attempt=job.attempt, updated_at=job.updated_at)
            return "failed" if failed else "skipped"
        return self._redrive(job, now, self._queue_timeout)

    def _sweep_awaiting(self, job: Job, now: datetime) -> str:
        if job.upload_expires_at is not None and now < job.upload_expires_at:
            return "skipped"
        failed = self._fail(job, "upload_missing", attempt=None, updated_at=job.updated_at)
        return "upload_missing" if failed else "skipped"

    def _sweep_expired(self, job: Job, now: datetime) -> str:
        if not job.is_expired(now):
            return "skipped"
        self._remove(job)
        return "expired_deleted"

    def _redrive(self, job: Job, now: datetime, look_again_after: timedelta) -> str:
        if self.publisher is None:
            return "skipped"
        try:
            # Mark first: of two sweepers racing, only the one whose write lands re-sends.
            self.jobs.transition(job.redriven(now, look_again_after), job.status,
                                 attempt=job.attempt, updated_at=job.updated_at)
        except ConditionFailed:
            return "skipped"
        self.publisher.publish_object_created(self.settings.bucket, job.original_key, 0)
        log.info("job_redriven", job_id=job.job_id, status=job.status.value)
        return "redriven"


def check_idempotency_key(key: Optional[str]) -> None:
    if key is not None and not _IDEMPOTENCY_KEY.match(key):
        raise InvalidRequest("Idempotency-Key must be 1-255 printable ASCII characters")


def _fingerprint(operation: bytes, payload: bytes) -> str:
    return hashlib.sha256(operation + b"\n" + payload).hexdigest()
