"""Accepting work: POST /images (bytes through the API) and POST /uploads (a presigned form
straight to storage), both behind the same Idempotency-Key rules."""
from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from datetime import datetime, timedelta
from typing import Iterable, Optional

from chalicelib.domain import sniff
from chalicelib.domain.errors import (
    FileTooLarge,
    IdempotencyKeyReused,
    InvalidRequest,
    JobNotFound,
    IdempotencyKeyTaken,
    QuotaFull,
    RateLimited,
    StorageUnavailable,
    TransientError,
    UnsupportedFormat,
)
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.renditions import RenditionFormat, extra_formats
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.imaging import render
from chalicelib.ports import IdempotencyRecord
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric, Route
from chalicelib.usecases import lifecycle
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Accepted, UploadForm

log = get_logger("uploads")

_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")
# Reads of a key that keeps changing hands before giving up with a 503.
_KEY_TURNS = 4
# Pauses before a key's missing job is taken for gone (seconds).
_GONE_PAUSES = (0.05, 0.1, 0.2)


class Uploads:
    def __init__(self, ctx: Context, admission: Admission):
        self._ctx = ctx
        self._admission = admission

    # -- POST /images ------------------------------------------------------------------------
    def accept_upload(self, owner: str, data: bytes, idempotency_key: Optional[str] = None,
                      formats: Iterable[str] = ()) -> Accepted:
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        asked = extra_formats(formats, s.enabled_formats)
        self._admission.check_backlog()
        if len(data) > s.max_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_upload_bytes} bytes")
        info = render.inspect(data, s.max_pixels, ctx.decode_limits)
        fingerprint = _fingerprint(b"images", hashlib.sha256(data).digest(), asked)
        now = ctx.clock()
        job = self._new_job(owner, JobStatus.QUEUED, now, formats=asked)
        accepted = self._create(job, "images", idempotency_key, fingerprint, now)
        if accepted.replayed:
            return self._repair(accepted, data, info.content_type)
        job = accepted.job
        try:
            ctx.objects.put(job.original_key, data, info.content_type)
        except TransientError:
            log.warning("original_store_failed", job_id=job.job_id)
            with deadline.compensating():
                going_on = self._compensate(job)
            if going_on is not None:
                return dataclasses.replace(accepted, job=going_on)
            raise StorageUnavailable(retry_after=s.retry_after_seconds) from None
        log.info("upload_accepted", job_id=job.job_id, content_type=info.content_type,
                 width=info.width, height=info.height, bytes=len(data))
        ctx.metrics.emit({Metric.JOBS_ACCEPTED: 1}, {Dimension.ROUTE: Route.IMAGES})
        return accepted

    def _compensate(self, job: Job) -> Optional[Job]:
        """After a failed put: end the job and free its key, unless the put landed after
        all (a timeout is ambiguous) and a worker already took the job. Then the job may
        still succeed: the key stays, and the job is returned to be answered as accepted.

        If the table is down too this raises, and the key stays with a queued job that has
        no original: a replay stores the bytes, or the sweeper ends it and frees the key."""
        ctx = self._ctx
        failed = lifecycle.fail(ctx, job, ErrorCode.STORAGE_UNAVAILABLE,
                                lambda f: ctx.jobs.move(f, JobStatus.QUEUED))
        if failed is None:
            current = ctx.jobs.get(job.job_id)
            if current is not None and not _never_stored(current):
                log.info("original_stored_after_all", job_id=job.job_id, status=current.status.value)
                return current
        if job.idempotency_scope:
            lifecycle.call_best_effort(ctx.jobs.release_idempotency, job.idempotency_scope, job.job_id)
        return None

    def _repair(self, accepted: Accepted, data: bytes, content_type: str) -> Accepted:
        """A replay whose first request died before storing the original: the fingerprint
        proves these bytes identical, so store them and the job goes on (the contract)."""
        ctx = self._ctx
        job = accepted.job
        if job.status is not JobStatus.QUEUED:
            return accepted  # a claimed job had its original: only queued ones may lack it
        try:
            if ctx.objects.head(job.original_key) is not None:
                return accepted
            ctx.objects.put(job.original_key, data, content_type)
        except TransientError:
            # The job keeps waiting for its bytes: the next retry, or the sweeper, ends it.
            raise StorageUnavailable(retry_after=ctx.settings.retry_after_seconds) from None
        log.info("original_stored_by_replay", job_id=job.job_id)
        return accepted

    # -- POST /uploads -----------------------------------------------------------------------
    def create_direct_upload(self, owner: str, content_type: object, size: object,
                             idempotency_key: Optional[str] = None,
                             formats: Iterable[str] = ()) -> Accepted:
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        self._admission.check_backlog()
        if not isinstance(content_type, str) or not isinstance(size, int) or isinstance(size, bool):
            raise InvalidRequest('Send {"content_type": "image/...", "size": <bytes>}')
        if content_type not in sniff.ALLOWED_TYPES:
            raise UnsupportedFormat("content_type must be one of " + ", ".join(sorted(sniff.ALLOWED_TYPES)))
        if size < 1:
            raise InvalidRequest("size must be a positive number of bytes")
        if size > s.max_direct_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_direct_upload_bytes} bytes")
        asked = extra_formats(formats, s.enabled_formats)
        now = ctx.clock()
        upload_expires_at = now + timedelta(seconds=s.upload_url_ttl_seconds)
        job = self._new_job(owner, JobStatus.AWAITING_UPLOAD, now, declared_type=content_type,
                            declared_size=size, upload_expires_at=upload_expires_at,
                            sweep_at=upload_expires_at, formats=asked)
        fingerprint = _fingerprint(b"uploads", f"{content_type}\n{size}".encode(), asked)
        accepted = self._create(job, "uploads", idempotency_key, fingerprint, now)
        if not accepted.replayed:
            ctx.metrics.emit({Metric.JOBS_ACCEPTED: 1}, {Dimension.ROUTE: Route.UPLOADS})
        job = accepted.job
        if job.status is not JobStatus.AWAITING_UPLOAD or job.upload_expires_at is None:
            return accepted
        seconds_left = int((job.upload_expires_at - now).total_seconds())
        if seconds_left <= 0:
            return accepted
        post = ctx.objects.presign_post(job.original_key, job.declared_type, job.declared_size,
                                        seconds_left)
        log.info("direct_upload_created", job_id=job.job_id, replayed=accepted.replayed)
        form = UploadForm(url=post.url, fields=post.fields, expires_at=job.upload_expires_at)
        return dataclasses.replace(accepted, upload=form)

    # -- shared ------------------------------------------------------------------------------
    def _new_job(self, owner: str, status: JobStatus, now: datetime, **fields) -> Job:
        ctx = self._ctx
        job_id = ctx.new_id()
        fields.setdefault("sweep_at", now + ctx.queue_timeout)
        return Job(job_id=job_id, owner=owner, status=status, created_at=now, updated_at=now,
                   expires_at=now + ctx.retention, original_key=ctx.object_keys.original(job_id), **fields)

    def _create(self, job: Job, operation: str, key: Optional[str], fingerprint: str,
                now: datetime) -> Accepted:
        jobs = self._ctx.jobs
        if key is None:
            self._within_quota(lambda quota: jobs.create(job, quota), job.owner)
            return Accepted(job)
        scope = hashlib.sha256(f"{job.owner}\n{operation}\n{key}".encode()).hexdigest()
        job = dataclasses.replace(job, idempotency_scope=scope)
        ttl = timedelta(seconds=self._ctx.settings.idempotency_ttl_seconds)
        record = IdempotencyRecord(scope=scope, fingerprint=fingerprint, job_id=job.job_id,
                                   expires_at=now + ttl)
        # Each turn either answers or sees the key change hands (a concurrent request took
        # it, or a doomed job gave it up): look again, a few times. The key is read only when
        # the write loses, so a first request costs one transaction.
        for _ in range(_KEY_TURNS):
            try:
                self._within_quota(lambda quota: jobs.create_with_key(job, record, now, quota),
                                   job.owner)
                return Accepted(job)
            except IdempotencyKeyTaken:
                pass  # held, or a concurrent identical request's transaction was in flight
            held = jobs.get_idempotency(scope)
            if held is None or now >= held.expires_at:
                continue  # freed or expired meanwhile: take it
            replayed = self._replay(held, fingerprint, job.owner)
            if replayed is not None:
                return replayed
        raise TransientError("the idempotency key kept changing hands")

    def _within_quota(self, create, owner: str) -> None:
        """Create within the owner's quota of unfinished jobs (429 rate_limited past it).
        A slot still held by a job that finished (its release was lost in a crash) is
        given back here, so a quota never leaks for good."""
        s = self._ctx.settings
        for first_try in (True, False):
            try:
                return create(s.max_active_jobs)
            except QuotaFull:
                if not (first_try and self._admission.may_reconcile(owner)
                        and lifecycle.reconcile_slots(self._ctx, owner)):
                    break
        log.warning("upload_rate_limited", reason="active_jobs", limit=s.max_active_jobs)
        raise RateLimited(f"You already have {s.max_active_jobs} unfinished jobs; try again when "
                          "one has finished", retry_after=max(s.retry_after_seconds, 5))

    def _replay(self, held: IdempotencyRecord, fingerprint: str, owner: str) -> Optional[Accepted]:
        """The held key's job, or None after freeing a key whose job can no longer succeed
        (it never got its original, or it is gone): the caller then takes the key."""
        if held.fingerprint != fingerprint:
            raise IdempotencyKeyReused("This Idempotency-Key was used for a different request")
        job = self._job_of(held)
        if job is not None and job.owner != owner:
            raise JobNotFound()
        if job is None or _never_stored(job):
            log.info("idempotency_key_taken_over", job_id=held.job_id)
            self._ctx.jobs.release_idempotency(held.scope, held.job_id)
            return None
        log.info("idempotent_replay", job_id=job.job_id)
        return Accepted(job, replayed=True)

    def _job_of(self, held: IdempotencyRecord) -> Optional[Job]:
        """The key's job. DynamoDB writes the key and the job in one atomic transaction, but
        an emulator may show the key a moment before the job: look again briefly before
        calling it gone."""
        for pause in _GONE_PAUSES:
            job = self._ctx.jobs.get(held.job_id)
            if job is not None:
                return job
            time.sleep(pause)
        return self._ctx.jobs.get(held.job_id)


def _never_stored(job: Job) -> bool:
    """A job that can no longer succeed because its original never arrived."""
    return job.status is JobStatus.FAILED and job.error_code in lifecycle.NEVER_STORED


def check_idempotency_key(key: Optional[str]) -> None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidRequest("Idempotency-Key must be 1-255 printable ASCII characters")


def _fingerprint(operation: bytes, payload: bytes, formats: tuple[RenditionFormat, ...] = ()) -> str:
    """The request's identity: the operation, its bytes (or declared file) and the extra
    formats in their canonical order. With none asked, it is what it was before formats
    existed, so keys held across the upgrade still replay."""
    extra = b"\nformats=" + ",".join(formats).encode() if formats else b""
    return hashlib.sha256(operation + b"\n" + payload + extra).hexdigest()
