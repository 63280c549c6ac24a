"""The worker: one object-created event in, a job made ready (or failed) out.

Where a job becomes ready: Worker._process. Every write it makes is fenced by its attempt
number (JobStore.claim / finish_attempt), so a duplicate delivery, a second worker or a
late cancel can never move a job backwards or produce a second result.
"""
from __future__ import annotations

import time
from typing import Optional

from chalicelib import imaging
from chalicelib.errors import ConditionFailed, DomainError, JobBusy, PoisonMessage, TransientError
from chalicelib.events import ObjectCreated
from chalicelib.jobs import Job, JobStatus, Rendition
from chalicelib.logs import get_logger
from chalicelib.metrics import Metric
from chalicelib.sandbox import run_limited
from chalicelib.usecases import lifecycle
from chalicelib.usecases.context import Context
from chalicelib.vocabulary import ErrorCode, Outcome, RenditionName

log = get_logger("worker")
# Seconds kept back from the deadline for storing the renditions and finishing the job.
_TIME_TO_FINISH = 5.0


class Worker:
    def __init__(self, ctx: Context):
        self._ctx = ctx

    def handle_object_created(self, event: ObjectCreated, deadline: Optional[float] = None) -> Outcome:
        """Process one object-created event, by `deadline` (time.monotonic()) if given: the
        time the worker function has before it is stopped.

        Returns normally when nothing is left to do for this event (done, duplicate, not
        ours); raises TransientError when the same event should be delivered again, and
        PoisonMessage when no delivery of it can ever make sense.
        """
        ctx = self._ctx
        if event.bucket != ctx.settings.bucket:
            raise PoisonMessage("event for a bucket this service does not own")
        if not ctx.keys.is_original(event.key):
            log.warning("event_ignored", reason="not_an_original")
            return Outcome.IGNORED
        job_id = ctx.keys.job_id_of(event.key)
        job = ctx.jobs.get(job_id)
        if job is None:
            log.warning("event_ignored", reason="no_job", job_id=job_id)
            return Outcome.IGNORED
        if job.status.terminal:
            log.info("event_duplicate", job_id=job_id, status=job.status.value)
            return Outcome.DUPLICATE
        if job.status is JobStatus.AWAITING_UPLOAD:
            job = self._uploaded(job)
            if job.status.terminal:
                return Outcome.DUPLICATE
        job = self._claim(job)
        if job.status is JobStatus.FAILED:
            return Outcome.FAILED
        if job.status is not JobStatus.PROCESSING:
            return Outcome.DUPLICATE
        started, timings = time.monotonic(), {}
        if job.attempt == 1:
            timings[Metric.QUEUE_WAIT] = (ctx.clock() - job.created_at).total_seconds() * 1000
        outcome = None
        try:
            outcome = self._process(job, deadline)
            return outcome
        finally:  # one metric line for both
            if outcome in (Outcome.READY, Outcome.FAILED):
                timings[Metric.PROCESSING_TIME] = (time.monotonic() - started) * 1000
            ctx.metrics.emit(timings)

    def _uploaded(self, job: Job) -> Job:
        ctx = self._ctx
        try:
            queued = job.queued(ctx.clock(), ctx.queue_timeout)
            ctx.jobs.move(queued, JobStatus.AWAITING_UPLOAD)
            log.info("upload_arrived", job_id=job.job_id)
            return queued
        except ConditionFailed:
            return ctx.jobs.get(job.job_id) or job

    def _claim(self, job: Job) -> Job:
        ctx, s = self._ctx, self._ctx.settings
        now = ctx.clock()
        try:
            return ctx.jobs.claim(job.job_id, now, ctx.lease, s.max_attempts)
        except ConditionFailed:
            pass
        current = ctx.jobs.get(job.job_id)
        if current is None or current.status.terminal:
            return current or job
        if current.lease_active(now):
            remaining = (current.lease_expires_at - now).total_seconds()
            raise JobBusy(f"job {job.job_id} is leased by another worker", retry_in=remaining)
        if current.attempt >= s.max_attempts:
            log.warning("attempts_exhausted", job_id=job.job_id, attempt=current.attempt)
            failed = lifecycle.fail(ctx, current, ErrorCode.PROCESSING_FAILED,
                                    lambda f: ctx.jobs.update_if_unchanged(f, seen=current))
            return failed or ctx.jobs.get(job.job_id) or current
        raise JobBusy(f"job {job.job_id} could not be claimed")

    def _process(self, job: Job, deadline: Optional[float]) -> Outcome:
        ctx, s = self._ctx, self._ctx.settings
        log.info("job_claimed", job_id=job.job_id, attempt=job.attempt)
        # The declared size of a direct upload: an emulator may not enforce the POST policy.
        limit = job.declared_size if job.declared_size is not None else s.max_upload_bytes
        try:
            data = ctx.objects.get(job.original_key, limit)
            if not self._still_ours(job):
                return Outcome.ABANDONED
            outputs = self._renditions(data, deadline)
            if not self._still_ours(job):
                return Outcome.ABANDONED
            stored: dict[RenditionName, Rendition] = {}
            for out in outputs:
                key = ctx.keys.rendition(job.job_id, out.name)
                ctx.objects.put(key, out.data, out.content_type)
                stored[out.name] = Rendition(key, out.width, out.height, out.content_type)
        except KeyError:
            return self._fail(job, ErrorCode.UPLOAD_MISSING)
        except DomainError as error:  # permanent: the bytes are what they are
            return self._fail(job, error.code)
        except Exception:
            # Transient or unexpected: give the lease back so a redelivery can try again;
            # the attempt count bounds how often.
            log.exception("job_attempt_failed", job_id=job.job_id, attempt=job.attempt)
            lifecycle.quietly(ctx.jobs.release_lease, job.job_id, job.attempt, ctx.clock())
            raise
        display, thumb = stored[RenditionName.DISPLAY], stored[RenditionName.THUMB]
        done = job.ready(ctx.clock(), display, thumb, ctx.retention)
        try:
            ctx.jobs.finish_attempt(done, job.attempt)
        except ConditionFailed:
            current = ctx.jobs.get(job.job_id)
            # Another attempt's ready result shares these keys; anything else must not keep them.
            if current is None or current.status is not JobStatus.READY:
                lifecycle.quietly(lifecycle.delete_renditions, ctx, job.job_id)
            log.warning("job_finish_lost", job_id=job.job_id, attempt=job.attempt)
            return Outcome.LOST
        log.info("job_ready", job_id=job.job_id, attempt=job.attempt,
                 width=display.width, height=display.height)
        lifecycle.finished(ctx, done)
        return Outcome.READY

    def _renditions(self, data: bytes, deadline: Optional[float]) -> tuple:
        """Decode in a child with a CPU limit, so that no image can hold a worker for more
        than decode_cpu_seconds; the wall clock allows for a busy machine, within the time
        the worker function has left."""
        s = self._ctx.settings
        args = (data, s.max_pixels, s.display_box, s.thumb_size, s.jpeg_quality, self._ctx.budget)
        if not s.decode_cpu_seconds:
            return imaging.make_renditions(*args)
        # A small Lambda gets a fraction of a core (1024 MB: about 0.6), and a busy machine
        # less: the wall clock only catches a child that hangs without using its CPU.
        wall = 4.0 * s.decode_cpu_seconds + 5.0
        if deadline is not None:
            wall = min(wall, deadline - time.monotonic() - _TIME_TO_FINISH)
            if wall <= 0:
                raise TransientError("no time left in this invocation to decode")
        return run_limited(imaging.make_renditions, *args, cpu_seconds=s.decode_cpu_seconds,
                           wall_seconds=wall)

    def _still_ours(self, job: Job) -> bool:
        """A safe step: stop if the job was cancelled, deleted or taken by a newer attempt."""
        current = self._ctx.jobs.get(job.job_id)
        if current is not None and current.status is JobStatus.PROCESSING and current.attempt == job.attempt:
            return True
        log.info("job_abandoned", job_id=job.job_id, attempt=job.attempt,
                 status=current.status.value if current else "deleted")
        return False

    def _fail(self, job: Job, code: ErrorCode) -> Outcome:
        failed = lifecycle.fail(self._ctx, job, code,
                                lambda f: self._ctx.jobs.finish_attempt(f, job.attempt))
        return Outcome.FAILED if failed else Outcome.LOST
