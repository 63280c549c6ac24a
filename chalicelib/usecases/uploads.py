"""Accepting work through the API: POST /images, the file's bytes in the request, behind
the Idempotency-Key rules (chalicelib/usecases/idempotency.py). Direct uploads are
chalicelib/usecases/direct_uploads.py."""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Iterable, Optional

from chalicelib.domain import metadata as job_metadata
from chalicelib.domain.delivery import ORIGINAL_CACHE_CONTROL
from chalicelib.domain.errors import FileTooLarge, StorageUnavailable, TransientError
from chalicelib.domain.focus import Focus
from chalicelib.domain.idempotency import check_idempotency_key
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.renditions import asked_renditions, extra_formats
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.imaging import render
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric, Route
from chalicelib.usecases import announce, lifecycle
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from chalicelib.usecases.idempotency import Idempotency, fingerprint_of, never_stored
from chalicelib.usecases.results import Accepted

log = get_logger("uploads")


class Uploads:
    def __init__(self, ctx: Context, admission: Admission, idempotency: Idempotency):
        self._ctx = ctx
        self._admission = admission
        self._idempotency = idempotency

    # -- POST /images ------------------------------------------------------------------------
    def accept_upload(self, owner: str, data: bytes, idempotency_key: Optional[str] = None,
                      formats: Iterable[str] = (), renditions: Optional[Iterable[str]] = None,
                      metadata: object = None, focus: Optional[Focus] = None) -> Accepted:
        """`focus`: the client's (chalicelib/domain/focus.py, parsed at the edge), or None."""
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        asked = extra_formats(formats, s.enabled_formats)
        sizes = asked_renditions(renditions, ctx.renditions)
        given = job_metadata.check(metadata)
        self._admission.check_backlog()
        if len(data) > s.max_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_upload_bytes} bytes")
        info = render.inspect(data, s.max_pixels, ctx.decode_limits)
        fingerprint = fingerprint_of(b"images", hashlib.sha256(data).digest(), asked, sizes, ctx.renditions,
                                     given, focus)
        now = ctx.clock()
        job = self._idempotency.new_job(owner, JobStatus.QUEUED, now, formats=asked, sizes=sizes,
                                        metadata=given, source=info.source, focus=focus)
        accepted = self._idempotency.create(job, "images", idempotency_key, fingerprint, now)
        if accepted.replayed:
            return self._repair(accepted, data, info.content_type)
        job = accepted.job
        try:
            ctx.objects.put(job.original_key, data, info.content_type, ORIGINAL_CACHE_CONTROL)
        except TransientError:
            log.warning("original_store_failed", job_id=job.job_id)
            with deadline.compensating():
                going_on = self._compensate(job)
            if going_on is not None:
                return dataclasses.replace(accepted, job=going_on)
            raise StorageUnavailable(retry_after=s.retry_after_seconds) from None
        log.info("upload_accepted", job_id=job.job_id, content_type=info.content_type,
                 width=info.width, height=info.height, bytes=len(data))
        announce.job_moved(ctx, job)
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
            if current is not None and not never_stored(current):
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
            ctx.objects.put(job.original_key, data, content_type, ORIGINAL_CACHE_CONTROL)
        except TransientError:
            # The job keeps waiting for its bytes: the next retry, or the sweeper, ends it.
            raise StorageUnavailable(retry_after=ctx.settings.retry_after_seconds) from None
        log.info("original_stored_by_replay", job_id=job.job_id)
        return accepted
