"""The sweeper: leases that ran out, lost notifications, upload deadlines, retention, and
objects left without a job. Idempotent: safe to run twice, concurrently, or after a crash
half-way. Every write is conditional on the job as the sweep read it."""
from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime, timedelta

from chalicelib.errors import ConditionFailed, TransientError
from chalicelib.events import ObjectCreated
from chalicelib.jobs import TERMINAL, Job, JobStatus
from chalicelib.logs import get_logger
from chalicelib.metrics import Dimension, Metric
from chalicelib.usecases import lifecycle
from chalicelib.usecases.context import Context
from chalicelib.vocabulary import ErrorCode

log = get_logger("sweeper")


class Sweeper:
    def __init__(self, ctx: Context):
        self._ctx = ctx

    def sweep(self, batch: int = 100, max_batches: int = 10) -> Counter:
        """One pass over the jobs that are due, status by status."""
        ctx = self._ctx
        report: Counter = Counter()
        now = ctx.clock()
        for status, act in (
            (JobStatus.PROCESSING, lambda j: self._processing(j, now)),
            (JobStatus.QUEUED, lambda j: self._queued(j, now)),
            (JobStatus.AWAITING_UPLOAD, lambda j: self._awaiting(j, now)),
            *((t, lambda j: self._expired(j, now)) for t in TERMINAL),
        ):
            for _ in range(max_batches):
                jobs = ctx.jobs.due(status, now, batch)
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
        if report["redriven"]:
            ctx.metrics.emit({Metric.REDRIVES: report["redriven"]})
        self._report_queues()
        return report

    def _report_queues(self) -> None:
        """Queue and dead-letter depths as metrics: every minute in the cloud, and locally."""
        for (metric, queue), gauge in self._ctx.gauges.items():
            try:
                self._ctx.metrics.emit({metric: gauge.depth()}, {Dimension.QUEUE: queue})
            except TransientError:
                log.warning("queue_depth_unavailable", queue=queue.value)

    def sweep_orphans(self) -> Counter:
        """Objects whose job is gone (deleted by TTL, say) and older than the grace period.

        Streams the listing (keys come sorted, so a job's objects are neighbours) and reads
        each job once per prefix: run it rarely (daily), since its cost grows with the
        bucket, not with the work.
        """
        ctx, s = self._ctx, self._ctx.settings
        report: Counter = Counter()
        grace = ctx.clock() - timedelta(seconds=s.orphan_grace_seconds)
        for prefix in (s.originals_prefix, s.renditions_prefix):
            listed = ctx.objects.list_keys(prefix, grace)
            for job_id, keys in itertools.groupby(listed, ctx.keys.job_id_of):
                if job_id is not None and ctx.jobs.get(job_id) is not None:
                    continue
                for key in keys:
                    ctx.objects.delete(key)
                    report["orphans_deleted"] += 1
        if report:
            log.info("orphan_sweep_done", **report)
        return report

    def _processing(self, job: Job, now: datetime) -> str:
        s = self._ctx.settings
        if job.lease_active(now):
            return "skipped"
        if job.attempt >= s.max_attempts or job.redrives >= s.max_attempts:
            return self._fail(job, ErrorCode.PROCESSING_FAILED, "failed")
        return self._redrive(job, now, self._ctx.lease)

    def _queued(self, job: Job, now: datetime) -> str:
        if job.redrives >= 1:  # re-driven once already, and still nobody claimed it
            return self._fail(job, ErrorCode.PROCESSING_FAILED, "failed")
        return self._redrive(job, now, self._ctx.queue_timeout)

    def _awaiting(self, job: Job, now: datetime) -> str:
        if job.upload_expires_at is not None and now < job.upload_expires_at:
            return "skipped"
        return self._fail(job, ErrorCode.UPLOAD_MISSING, "upload_missing")

    def _expired(self, job: Job, now: datetime) -> str:
        if not job.is_expired(now):
            return "skipped"
        lifecycle.remove(self._ctx, job)
        return "expired_deleted"

    def _fail(self, job: Job, code: ErrorCode, outcome: str) -> str:
        jobs = self._ctx.jobs
        failed = lifecycle.fail(self._ctx, job, code, lambda f: jobs.update_if_unchanged(f, seen=job))
        return outcome if failed else "skipped"

    def _redrive(self, job: Job, now: datetime, look_again_after: timedelta) -> str:
        ctx = self._ctx
        if ctx.publisher is None:
            return "skipped"
        try:
            # Mark first: of two sweepers racing, only the one whose write lands re-sends.
            ctx.jobs.update_if_unchanged(job.redriven(now, look_again_after), seen=job)
        except ConditionFailed:
            return "skipped"
        ctx.publisher.publish_object_created(ObjectCreated(ctx.settings.bucket, job.original_key, 0))
        log.info("job_redriven", job_id=job.job_id, status=job.status.value)
        return "redriven"
