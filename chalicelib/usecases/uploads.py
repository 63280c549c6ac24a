"""Accepting work: POST /images (bytes through the API) and POST /uploads (a presigned form
straight to storage), both behind the same Idempotency-Key rules."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from datetime import datetime, timedelta
from typing import Optional

from chalicelib import imaging, sniff
from chalicelib.errors import (
    FileTooLarge,
    IdempotencyKeyReused,
    InvalidRequest,
    JobNotFound,
    KeyTaken,
    QuotaFull,
    RateLimited,
    StorageUnavailable,
    TransientError,
    UnsupportedFormat,
)
from chalicelib.jobs import Job, JobStatus
from chalicelib.logs import get_logger
from chalicelib.metrics import Dimension, Metric, Route
from chalicelib.ports import IdempotencyRecord
from chalicelib.usecases import lifecycle
from chalicelib.usecases.capacity import Capacity
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Accepted, UploadForm
from chalicelib.vocabulary import ErrorCode

log = get_logger("uploads")

_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")


class Uploads:
    def __init__(self, ctx: Context, capacity: Capacity):
        self._ctx = ctx
        self._capacity = capacity

    # -- POST /images ------------------------------------------------------------------------
    def accept_upload(self, owner: str, data: bytes, idempotency_key: Optional[str] = None) -> Accepted:
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        self._capacity.check_backlog()
        if len(data) > s.max_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_upload_bytes} bytes")
        info = imaging.inspect(data, s.max_pixels, ctx.budget)
        fingerprint = _fingerprint(b"images", hashlib.sha256(data).digest())
        now = ctx.clock()
        job = self._new_job(owner, JobStatus.QUEUED, now)
        accepted = self._create(job, "images", idempotency_key, fingerprint, now)
        if accepted.replayed:
            return accepted
        job = accepted.job
        try:
            ctx.objects.put(job.original_key, data, info.content_type)
        except TransientError:
            log.warning("original_store_failed", job_id=job.job_id)
            lifecycle.fail(ctx, job, ErrorCode.STORAGE_UNAVAILABLE,
                           lambda failed: ctx.jobs.move(failed, JobStatus.QUEUED))
            if job.idempotency_scope:
                lifecycle.quietly(ctx.jobs.release_idempotency, job.idempotency_scope, job.job_id)
            raise StorageUnavailable(retry_after=s.retry_after_seconds) from None
        log.info("upload_accepted", job_id=job.job_id, content_type=info.content_type,
                 width=info.width, height=info.height, bytes=len(data))
        ctx.metrics.emit({Metric.JOBS_ACCEPTED: 1}, {Dimension.ROUTE: Route.IMAGES})
        return accepted

    # -- POST /uploads -----------------------------------------------------------------------
    def create_direct_upload(self, owner: str, content_type: object, size: object,
                             idempotency_key: Optional[str] = None) -> Accepted:
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        self._capacity.check_backlog()
        if not isinstance(content_type, str) or not isinstance(size, int) or isinstance(size, bool):
            raise InvalidRequest('Send {"content_type": "image/...", "size": <bytes>}')
        if content_type not in sniff.ALLOWED_TYPES:
            raise UnsupportedFormat("content_type must be one of " + ", ".join(sorted(sniff.ALLOWED_TYPES)))
        if size < 1:
            raise InvalidRequest("size must be a positive number of bytes")
        if size > s.max_direct_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_direct_upload_bytes} bytes")
        now = ctx.clock()
        upload_expires_at = now + timedelta(seconds=s.upload_url_ttl_seconds)
        job = self._new_job(owner, JobStatus.AWAITING_UPLOAD, now, declared_type=content_type,
                            declared_size=size, upload_expires_at=upload_expires_at,
                            sweep_at=upload_expires_at)
        fingerprint = _fingerprint(b"uploads", f"{content_type}\n{size}".encode())
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
                   expires_at=now + ctx.retention, original_key=ctx.keys.original(job_id), **fields)

    def _create(self, job: Job, operation: str, key: Optional[str], fingerprint: str,
                now: datetime) -> Accepted:
        jobs = self._ctx.jobs
        if key is None:
            self._within_quota(lambda quota: jobs.create(job, quota), job.owner)
            return Accepted(job)
        scope = hashlib.sha256(f"{job.owner}\n{operation}\n{key}".encode()).hexdigest()
        held = jobs.get_idempotency(scope)
        if held is not None and now < held.expires_at:
            return self._replay(held, fingerprint, job.owner)
        job = dataclasses.replace(job, idempotency_scope=scope)
        ttl = timedelta(seconds=self._ctx.settings.idempotency_ttl_seconds)
        record = IdempotencyRecord(scope=scope, fingerprint=fingerprint, job_id=job.job_id,
                                   expires_at=now + ttl)
        try:
            self._within_quota(lambda quota: jobs.create_with_key(job, record, now, quota), job.owner)
        except KeyTaken:
            # A concurrent identical request won the race: answer with its job.
            held = jobs.get_idempotency(scope)
            if held is None:
                raise TransientError("idempotency record vanished") from None
            return self._replay(held, fingerprint, job.owner)
        return Accepted(job)

    def _within_quota(self, create, owner: str) -> None:
        """Create within the owner's quota of unfinished jobs (429 rate_limited past it).
        A slot still held by a job that finished (its release was lost in a crash) is
        given back here, so a quota never leaks for good."""
        s = self._ctx.settings
        for first_try in (True, False):
            try:
                return create(s.max_active_jobs)
            except QuotaFull:
                if not (first_try and self._capacity.may_reconcile(owner)
                        and lifecycle.reconcile_slots(self._ctx, owner)):
                    break
        log.warning("upload_rate_limited", reason="active_jobs", limit=s.max_active_jobs)
        raise RateLimited(f"You already have {s.max_active_jobs} unfinished jobs; try again when "
                          "one has finished", retry_after=max(s.retry_after_seconds, 5))

    def _replay(self, held: IdempotencyRecord, fingerprint: str, owner: str) -> Accepted:
        if held.fingerprint != fingerprint:
            raise IdempotencyKeyReused("This Idempotency-Key was used for a different request")
        job = self._ctx.jobs.get(held.job_id)
        if job is None or job.owner != owner:
            raise JobNotFound()
        log.info("idempotent_replay", job_id=job.job_id)
        return Accepted(job, replayed=True)


def check_idempotency_key(key: Optional[str]) -> None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidRequest("Idempotency-Key must be 1-255 printable ASCII characters")


def _fingerprint(operation: bytes, payload: bytes) -> str:
    return hashlib.sha256(operation + b"\n" + payload).hexdigest()
