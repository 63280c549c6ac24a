"""The sweeper: leases that ran out, lost messages, upload deadlines, retention, and
objects left without a job. Idempotent: safe to run twice, concurrently, or after a crash
half-way. Every write is conditional on the job as the sweep read it.

A job is never failed, nor its event sent again, merely because it waited: a message is
re-sent only once it is known lost, that is when the queue holds no message sent before
the job's own could have been (BacklogGauge.drained_before). Re-sending publishes first and
marks the job after, so a crash in between costs a duplicate message (which the worker
treats as one), never a job with no message at all.
"""
from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Callable, Optional, Sequence

from chalicelib.domain.errors import ConditionFailed, TransientError
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import DUE_SHARDS, Job, JobStatus
from chalicelib.domain.storage import StoredObject
from chalicelib.domain.vocabulary import ErrorCode, SweepOutcome
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric
from chalicelib.usecases import announce, lifecycle
from chalicelib.usecases.context import Context

log = get_logger("sweeper")

# The most calls one job's step makes (a head, the queue's state, a publish, a write):
# the sweep takes the next job only while the invocation has time for them.
_CALLS_PER_STEP = 4


# What a sweep does with one batch of due jobs of one status: a count per outcome.
ActOnBatch = Callable[[list[Job]], Counter]


class Sweeper:
    def __init__(self, ctx: Context):
        self._ctx = ctx
        # The shard the next run starts at: where the last one ran out of time. A new
        # process starts where the clock's minute says, so that no shard always comes last
        # (and a run's order follows from its inputs: the crash harness replays it).
        self._start: Optional[int] = None
        self._start_lock = threading.Lock()

    def sweep(self, batch: int = 100, max_batches: int = 100) -> Counter:
        """One pass over the jobs that are due: every shard of the due index, each shard
        status by status, the shards in a thread pool (docs/scale.md §6.1, §6.2).

        At most max_batches batches of a status per shard; the time budget binds first:
        takes no new shard, nor a shard's next batch, once the run's budget is spent:
        what is left stays due, and the next run starts at the first shard this one left.
        Two runs at once act once per job: every action is a conditional write."""
        ctx, s = self._ctx, self._ctx.settings
        report: Counter = Counter()
        now = ctx.clock()
        drained = _Drained(ctx, now)
        acts = (
            (JobStatus.PROCESSING, self._each(lambda j: self._processing(j, now, drained))),
            (JobStatus.QUEUED, self._each(lambda j: self._queued(j, now, drained))),
            (JobStatus.AWAITING_UPLOAD, self._each(lambda j: self._awaiting(j, now, drained))),
            # In the order JobStatus declares them, not a set's: the same calls in every process.
            *((t, lambda jobs: self._expired(jobs, now)) for t in JobStatus if t.terminal),
        )
        stop_at = now + timedelta(seconds=s.sweep_budget_seconds)
        with self._start_lock:
            start = self._start if self._start is not None else int(now.timestamp() // 60) % DUE_SHARDS
        order = [(start + i) % DUE_SHARDS for i in range(DUE_SHARDS)]
        parts = deadline.run_in_pool(
            lambda shard: self._sweep_shard(shard, acts, now, stop_at, batch, max_batches),
            order, s.sweep_threads, "sweep")
        for part in parts:
            report.update(part)
        left = [shard for shard, part in zip(order, parts) if part[SweepOutcome.SHARDS_LEFT]]
        if left:
            with self._start_lock:
                self._start = left[0]
        report.pop(SweepOutcome.SKIPPED, None)
        if report:
            log.info("sweep_done", **report)
        if report[SweepOutcome.RESENT]:
            self._ctx.metrics.emit({Metric.RESENDS: report[SweepOutcome.RESENT]})
        self._report_queues()
        return report

    def _report_queues(self) -> None:
        """Queue and dead-letter depths as metrics: every minute in the cloud, and locally."""
        for (metric, queue), gauge in self._ctx.gauges.items():
            try:
                self._ctx.metrics.emit({metric: gauge.depth()}, {Dimension.QUEUE: queue})
            except TransientError:
                log.warning("queue_depth_unavailable", queue=queue.value)

    def _sweep_shard(self, shard: int, acts: Sequence[tuple[JobStatus, ActOnBatch]], now: datetime,
                     stop_at: datetime, batch: int, max_batches: int) -> Counter:
        """One shard, status by status, in batches; stops at the run's time budget."""
        ctx = self._ctx
        report: Counter = Counter()
        try:
            for status, act in acts:
                for _ in range(max_batches):
                    if ctx.clock() >= stop_at or not deadline.has_time_for(_CALLS_PER_STEP):
                        report[SweepOutcome.SHARDS_LEFT] = 1  # the next run starts here
                        return report
                    jobs = ctx.jobs.due(status, now, batch, shard=shard)
                    try:
                        report.update(act(jobs))
                    except _OutOfTime as stopped:
                        report.update(stopped.report)
                        report[SweepOutcome.SHARDS_LEFT] = 1
                        return report
                    if len(jobs) < batch:
                        break
        except TransientError:  # the table, for this shard's query: the others go on
            log.exception("sweep_shard_failed", shard=shard)
            report[SweepOutcome.ERRORS] += 1
        return report

    @staticmethod
    def _each(act: Callable[[Job], SweepOutcome]) -> ActOnBatch:
        """One job after another; a job whose step fails is counted and the next one taken."""
        def on_batch(jobs: list[Job]) -> Counter:
            report: Counter = Counter()
            for job in jobs:
                if not deadline.has_time_for(_CALLS_PER_STEP):
                    raise _OutOfTime(report)
                try:
                    report[act(job)] += 1
                except TransientError:
                    log.exception("sweep_step_failed", job_id=job.job_id)
                    report[SweepOutcome.ERRORS] += 1
            return report

        return on_batch

    # -- per status ------------------------------------------------------------------------
    def _processing(self, job: Job, now: datetime, drained: "_Drained") -> SweepOutcome:
        s = self._ctx.settings
        if job.lease_active(now):
            return SweepOutcome.SKIPPED
        # No claim left for a worker (the claim rule's own clause), or resent this often.
        if not job.attempt_left(s.max_attempts) or job.resends >= s.max_attempts:
            return self._fail(job, ErrorCode.PROCESSING_FAILED, SweepOutcome.FAILED)
        # The lease ran out: the worker died or gave the job back, and its message comes
        # back on its own (visibility timeout, nack) unless it was lost. It was sent before
        # the claim or the last resend, both of which set updated_at.
        return self._resend_if_lost(job, now, drained, sent_by=job.updated_at,
                                    look_again_after=self._ctx.lease)

    def _queued(self, job: Job, now: datetime, drained: "_Drained") -> SweepOutcome:
        ctx, s = self._ctx, self._ctx.settings
        stored = ctx.objects.head(job.original_key)
        if stored is None:
            # The upload died before storing the original, and so did its compensation: no
            # event will ever come. End it, and free its key for the client's retry.
            return self._fail(job, ErrorCode.STORAGE_UNAVAILABLE, SweepOutcome.NEVER_STORED)
        if job.resends >= s.max_attempts:
            # Its event was re-sent and lost this often: something drops it every time.
            return self._fail(job, ErrorCode.PROCESSING_FAILED, SweepOutcome.FAILED)
        # Storage sent the event after the write; whoever queued the job (a multipart
        # completion, a worker, a resend) set updated_at after (or when) it was sent.
        return self._resend_if_lost(job, now, drained, sent_by=max(job.updated_at, stored.last_modified),
                                    look_again_after=ctx.queue_timeout)

    def _awaiting(self, job: Job, now: datetime, drained: "_Drained") -> SweepOutcome:
        ctx = self._ctx
        # The URLs expire at upload_expires_at, and a transfer begun just before may still be
        # arriving: wait as long as the largest one takes at the slowest uplink planned for.
        if job.upload_expires_at is not None and now < job.upload_expires_at + ctx.upload_grace:
            return SweepOutcome.SKIPPED
        # A multipart upload is aborted before storage is asked, so that a completion racing
        # this sweep either lands first (its object is found below and the job goes on) or
        # finds the upload gone: never an object stored for a job failed here.
        lifecycle.abort_upload(ctx, job)
        stored = ctx.objects.head(job.original_key)
        if stored is None:
            return self._fail(job, ErrorCode.UPLOAD_MISSING, SweepOutcome.UPLOAD_MISSING)
        # The file arrived but no event moved the job: queue it as the event would have,
        # and send the event again if it is known lost.
        queued = job.queued(now, ctx.queue_timeout)
        if drained.lost(self._arrived_by(job, stored, now)):
            self._publish(job)
            queued = queued.resent(now, ctx.queue_timeout)
        try:
            ctx.jobs.update_if_unchanged(queued, seen=job)
        except ConditionFailed:
            return SweepOutcome.SKIPPED  # the event came meanwhile, or the client cancelled
        # This field and the job_redriven/job_redrive_raced events keep their older names:
        # operators search logs by them (docs/observability.md).
        log.info("upload_found", job_id=job.job_id, redriven=queued.resends > job.resends)
        announce.job_moved(ctx, queued)
        return SweepOutcome.UPLOAD_FOUND

    def _arrived_by(self, job: Job, stored: StoredObject, now: datetime) -> datetime:
        """The latest moment the file can have arrived, so its event been sent. Not
        Last-Modified alone: S3 stamps it when the write began ("the object creation date";
        for a multipart upload, "the date of initiation of the multipart upload"), not when
        it ended. A multipart upload may be completed until the abort above, however long
        after its initiation: its event is never judged lost at this look, and the queued
        job's own look (queue_timeout after this write) re-sends it if it is. A single POST
        or PUT began by its deadline and took at most the grace (at the planned uplink)."""
        if job.multipart_upload_id is not None:
            return now
        return min(now, stored.last_modified + self._ctx.upload_grace)

    def _expired(self, jobs: list[Job], now: datetime) -> Counter:
        """A batch at once (docs/scale.md 6.2): one DeleteObjects for all their objects, the
        records in BatchWriteItems, objects first and records last as remove() does, so a
        failure half-way leaves records that the next run finishes."""
        expired = [job for job in jobs if job.is_expired(now)]
        if not expired:
            return Counter()
        try:
            lifecycle.remove_many(self._ctx, expired)
        except TransientError:
            log.exception("sweep_step_failed", job_ids=len(expired))
            return Counter({SweepOutcome.ERRORS: 1})
        return Counter({SweepOutcome.EXPIRED_DELETED: len(expired)})

    # -- steps -----------------------------------------------------------------------------
    def _fail(self, job: Job, code: ErrorCode, outcome: SweepOutcome) -> SweepOutcome:
        ctx = self._ctx
        failed = lifecycle.fail(ctx, job, code, lambda f: ctx.jobs.update_if_unchanged(f, seen=job))
        if failed is None:
            return SweepOutcome.SKIPPED
        if code in lifecycle.NEVER_STORED and job.idempotency_scope:
            # A retry with the same key must make a new job, not replay this one.
            ctx.jobs.release_idempotency(job.idempotency_scope, job.job_id)
        return outcome

    def _resend_if_lost(self, job: Job, now: datetime, drained: "_Drained", sent_by: datetime,
                        look_again_after: timedelta) -> SweepOutcome:
        ctx = self._ctx
        if not drained.lost(sent_by):
            # Its message may still be waiting its turn behind a backlog: look again later,
            # without touching updated_at (the bound on when its message was sent).
            lifecycle.call_best_effort(ctx.jobs.update_if_unchanged,
                              dataclasses.replace(job, sweep_at=now + look_again_after), job)
            return SweepOutcome.WAITING
        self._publish(job)
        try:
            ctx.jobs.update_if_unchanged(job.resent(now, look_again_after), seen=job)
        except ConditionFailed:
            # A worker (or another sweeper) moved it meanwhile: the extra message finds it
            # busy or done, which the worker treats as a duplicate.
            log.info("job_redrive_raced", job_id=job.job_id)
            return SweepOutcome.RESEND_RACED
        log.info("job_redriven", job_id=job.job_id, status=job.status.value)
        return SweepOutcome.RESENT

    def _publish(self, job: Job) -> None:
        ctx = self._ctx
        ctx.publisher.publish_object_created(ObjectCreated(ctx.settings.bucket, job.original_key, 0))


class _OutOfTime(Exception):
    """The invocation has no time for another job's step: what this batch did so far."""

    def __init__(self, report: Counter):
        super().__init__()
        self.report = report


class _Drained:
    """The queue's state, read at most once per sweep (by whichever shard's thread first
    needs it) and only when a job needs it."""

    def __init__(self, ctx: Context, now: datetime):
        self._ctx = ctx
        self._now = now
        self._read = False
        self._before: Optional[datetime] = None
        self._lock = threading.Lock()

    def lost(self, sent_by: datetime) -> bool:
        """Whether a message sent by `sent_by` (at the latest) has certainly left the queue."""
        with self._lock:
            if not self._read:
                self._before = self._ctx.backlog.drained_before(self._now)
                self._read = True
        if self._before is None:
            return False
        # Storage may deliver late, and the queue's counts lag: allow for both.
        delay = timedelta(seconds=self._ctx.settings.event_delay_seconds)
        return sent_by + delay < self._before
