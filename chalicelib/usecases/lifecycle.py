"""The few steps that several use cases share: ending a job failed, removing a job and its
objects, and best-effort clean-up."""
from __future__ import annotations

from typing import Callable, Optional

from chalicelib.errors import ConditionFailed, TransientError
from chalicelib.jobs import Job
from chalicelib.logs import get_logger
from chalicelib.usecases.context import Context
from chalicelib.vocabulary import ErrorCode

log = get_logger("lifecycle")


def fail(ctx: Context, job: Job, code: ErrorCode, write: Callable[[Job], None]) -> Optional[Job]:
    """End `job` failed with `code` through `write`, the caller's guarded store operation.
    Returns the failed job, or None when the write lost (the job moved on meanwhile)."""
    failed = job.failed(ctx.clock(), code, ctx.retention)
    try:
        write(failed)
    except ConditionFailed:
        log.warning("job_fail_lost", job_id=job.job_id, code=code.value)
        return None
    log.info("job_failed", job_id=job.job_id, code=code.value)
    finished(ctx, failed)
    return failed


def finished(ctx: Context, job: Job) -> None:
    """The job is terminal (or gone): it no longer counts toward its owner's quota. Best
    effort; reconcile_slots gives back any slot whose release was lost."""
    quietly(ctx.jobs.release_slot, job.owner, job.job_id)


def reconcile_slots(ctx: Context, owner: str) -> bool:
    """Give back the slots of the owner's jobs that have finished or are gone; True if any
    was freed. Reads at most the quota's number of jobs."""
    freed = False
    for job_id in ctx.jobs.active_jobs(owner):
        job = ctx.jobs.get(job_id)
        if job is None or job.status.terminal or job.owner != owner:
            ctx.jobs.release_slot(owner, job_id)
            log.info("quota_slot_reconciled", job_id=job_id)
            freed = True
    return freed


def delete_renditions(ctx: Context, job_id: str) -> None:
    for key in ctx.keys.renditions(job_id):
        ctx.objects.delete(key)


def remove(ctx: Context, job: Job) -> None:
    """Objects first, then the key, then the record: a crash half-way leaves a record that
    the next attempt (or the sweeper) finishes removing."""
    ctx.objects.delete(job.original_key)
    delete_renditions(ctx, job.job_id)
    if job.idempotency_scope:
        ctx.jobs.release_idempotency(job.idempotency_scope, job.job_id)
    ctx.jobs.delete(job.job_id)
    finished(ctx, job)


def remove_many(ctx: Context, jobs: list[Job]) -> None:
    """remove() for a batch, in the same order: every object (DeleteObjects), then the keys
    (each conditional, as remove's), then the records (BatchWriteItem), then the slots."""
    ctx.objects.delete_many([key for job in jobs
                             for key in (job.original_key, *ctx.keys.renditions(job.job_id))])
    for job in jobs:
        if job.idempotency_scope:
            ctx.jobs.release_idempotency(job.idempotency_scope, job.job_id)
    ctx.jobs.delete_many([job.job_id for job in jobs])
    for job in jobs:
        finished(ctx, job)


def quietly(call: Callable, *args) -> None:
    """Best effort: a later sweep or lease expiry covers what this does not."""
    try:
        call(*args)
    except (ConditionFailed, TransientError):
        pass
