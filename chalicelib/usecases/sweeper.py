"""The sweeper: leases that ran out, lost notifications, upload deadlines, retention, and
objects left without a job. Idempotent: safe to run twice, concurrently, or after a crash
half-way. Every write is conditional on the job as the sweep read it."""
from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Callable, Optional, Sequence

from chalicelib.errors import ConditionFailed, TransientError
from chalicelib.events import ObjectCreated
from chalicelib.jobs import SWEEP_SHARDS, TERMINAL, Job, JobStatus
from chalicelib.logs import get_logger
from chalicelib.usecases import lifecycle
from chalicelib.usecases.context import Context
from chalicelib.vocabulary import ErrorCode

log = get_logger("sweeper")


# What a sweep does with one batch of due jobs of one status: a count per outcome.
ActOnBatch = Callable[[list[Job]], Counter]


class Sweeper:
    def __init__(self, ctx: Context):
        self._ctx = ctx
        # The shard the next run starts at: where the last one ran out of time. A new
        # process starts anywhere, so that no shard always comes last.
        self._start = random.randrange(SWEEP_SHARDS)
        self._start_lock = threading.Lock()

    def sweep(self, batch: int = 100, max_batches: int = 100) -> Counter:
        """One pass over the jobs that are due: every shard of the sweep index, each shard
        status by status, the shards in a thread pool (docs/scale.md §6.1, §6.2).

        At most max_batches batches of a status per shard; the time budget binds first:
        takes no new shard, nor a shard's next batch, once the run's budget is spent:
        what is left stays due, and the next run starts at the first shard this one left.
        Two runs at once act once per job: every action is a conditional write."""
        ctx, s = self._ctx, self._ctx.settings
        report: Counter = Counter()
        now = ctx.clock()
        acts = (
            (JobStatus.PROCESSING, self._each(lambda j: self._processing(j, now))),
            (JobStatus.QUEUED, self._each(lambda j: self._queued(j, now))),
            (JobStatus.AWAITING_UPLOAD, self._each(lambda j: self._awaiting(j, now))),
            *((t, lambda jobs: self._expired(jobs, now)) for t in TERMINAL),
        )
        stop_at = now + timedelta(seconds=s.sweep_budget_seconds)
        with self._start_lock:
            start = self._start
        order: list[Optional[int]] = [(start + i) % SWEEP_SHARDS for i in range(SWEEP_SHARDS)]
        if s.sweep_legacy_index:
            order.insert(0, None)  # jobs written before sweep_key, from the old index
        with ThreadPoolExecutor(max_workers=s.sweep_threads, thread_name_prefix="sweep") as pool:
            parts = list(pool.map(lambda shard: self._sweep_shard(shard, acts, now, stop_at, batch, max_batches),
                                  order))
        for part in parts:
            report.update(part)
        left = [shard for shard, part in zip(order, parts) if part["shards_left"] and shard is not None]
        if left:
            with self._start_lock:
                self._start = left[0]
        report.pop("skipped", None)
        if report:
            log.info("sweep_done", **report)
        return report

    def _sweep_shard(self, shard: Optional[int], acts: Sequence[tuple[JobStatus, ActOnBatch]], now: datetime,
                     stop_at: datetime, batch: int, max_batches: int) -> Counter:
        """One shard, status by status, in batches; stops at the run's time budget."""
        ctx = self._ctx
        report: Counter = Counter()
        try:
            for status, act in acts:
                for _ in range(max_batches):
                    if ctx.clock() >= stop_at:
                        report["shards_left"] = 1  # the next run starts here
                        return report
                    jobs = ctx.jobs.due(status, now, batch, shard=shard)
                    report.update(act(jobs))
                    if len(jobs) < batch:
                        break
        except TransientError:  # the table, for this shard's query: the others go on
            log.exception("sweep_shard_failed", shard=shard)
            report["errors"] += 1
        return report

    @staticmethod
    def _each(act: Callable[[Job], str]) -> ActOnBatch:
        """One job after another; a job whose step fails is counted and the next one taken."""
        def on_batch(jobs: list[Job]) -> Counter:
            report: Counter = Counter()
            for job in jobs:
                try:
                    report[act(job)] += 1
                except TransientError:
                    log.exception("sweep_step_failed", job_id=job.job_id)
                    report["errors"] += 1
            return report

        return on_batch

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
            return Counter(errors=1)
        return Counter(expired_deleted=len(expired))

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
