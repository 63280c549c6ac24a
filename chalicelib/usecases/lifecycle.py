"""The few steps that several use cases share: queueing a job whose file has arrived, ending a
job failed, removing a job and its objects (and aborting its multipart upload), and
best-effort clean-up."""
from __future__ import annotations

from typing import Callable, Optional

from chalicelib.domain.errors import ConditionFailed, JobExpired, JobNotFound, TransientError
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.objectkeys import is_job_id
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases import announce
from chalicelib.usecases.context import Context

log = get_logger("lifecycle")

# A job failed with one of these never had its original: it can no longer succeed, so its
# Idempotency-Key must not keep replaying it (the sweeper frees it; a replay takes it over).
NEVER_STORED = frozenset({ErrorCode.STORAGE_UNAVAILABLE, ErrorCode.UPLOAD_MISSING})


def owned(ctx: Context, owner: Optional[str], job_id: str, live: bool = False) -> Job:
    """The owner's job (owner None: any owner's, for the service principal). JobNotFound for
    a malformed id, no job, or another owner's (one answer, so that no one learns which ids
    exist); with `live`, JobExpired past its end."""
    job = ctx.jobs.get(job_id) if is_job_id(job_id) else None
    if job is None or (owner is not None and job.owner != owner):
        raise JobNotFound()
    if live and job.is_expired(ctx.clock()):
        raise JobExpired()
    return job


def mark_arrived(ctx: Context, job: Job) -> Job:
    """A direct upload's file is stored: `job` (read `awaiting_upload`) moves to `queued`, as
    the one conditional write that leaves `awaiting_upload`; the job as it is then. Whoever
    learns it first writes it (the multipart completion, storage's event at the worker); the
    other's write fails its condition and reads the job, already on its way."""
    try:
        queued = job.queued(ctx.clock(), ctx.queue_timeout)
        ctx.jobs.move(queued, JobStatus.AWAITING_UPLOAD)
    except ConditionFailed:
        return ctx.jobs.get(job.job_id) or job
    log.info("upload_arrived", job_id=job.job_id)
    announce.job_moved(ctx, queued)
    return queued


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
    conclude(ctx, failed)
    return failed


def conclude(ctx: Context, job: Job) -> None:
    """`job` has just become terminal, by the one write that made it so: it no longer counts
    toward its owner's quota, it is counted, and its owner's webhook is told. Best effort;
    never fails the job. Call it for that write only (not when a finished job is removed),
    or the job is counted and announced twice; reconcile_places gives back any place whose
    release was lost."""
    call_best_effort(ctx.jobs.release_place, job.owner, job.job_id)
    if job.status is not JobStatus.READY:
        # A cancel, or an upload that never arrived: its parts would cost storage until the
        # bucket's lifecycle aborts them.
        call_best_effort(abort_upload, ctx, job)
    announce.job_finished(ctx, job)


def abort_upload(ctx: Context, job: Job) -> None:
    """Drop the job's multipart upload and its parts, if it has one."""
    if job.multipart_upload_id is not None:
        ctx.objects.abort_multipart(job.original_key, job.multipart_upload_id)


def reconcile_places(ctx: Context, owner: str) -> bool:
    """Give back the quota places of the owner's jobs that have finished or are gone; True if any
    was freed. Reads the quota's number of jobs in one batch (read one by one, a loaded
    table spent the request's time on them)."""
    held = sorted(ctx.jobs.active_jobs(owner))
    found = ctx.jobs.objects_of(held) if held else {}
    freed = False
    for job_id in held:
        job = found.get(job_id)
        if job is None or job.status.terminal:
            ctx.jobs.release_place(owner, job_id)
            log.info("quota_slot_reconciled", job_id=job_id)  # its name from before places
            freed = True
    return freed


def delete_attempt_renditions(ctx: Context, job: Job, attempt: int) -> None:
    """One attempt's renditions, in every format the job asked for: all that a worker may
    ever delete, since they are fenced."""
    for key in ctx.object_keys.renditions(job.job_id, attempt, ctx.rendition_names, job.formats):
        ctx.objects.delete(key)


def rendition_keys(ctx: Context, job: Job) -> list[str]:
    """Every attempt's renditions, and those the record names. Attempts are numbered by
    their claims, so none is above `job.attempt`; one that started after this read (the job
    was not terminal yet) is the orphan scan's."""
    keys = {key for attempt in range(1, job.attempt + 1)
            for key in ctx.object_keys.renditions(job.job_id, attempt, ctx.rendition_names, job.formats)}
    keys |= {key for r in job.renditions.values() for key in r.keys}
    return sorted(keys)


def delete_renditions(ctx: Context, job: Job) -> None:
    """Only once no attempt can finish any more (the job is terminal): a live attempt would
    lose its own."""
    for key in rendition_keys(ctx, job):
        ctx.objects.delete(key)


def remove(ctx: Context, job: Job) -> None:
    """Objects first, then the key, then the record: a crash half-way leaves a record that
    the next attempt (or the sweeper) finishes removing."""
    abort_upload(ctx, job)  # a job deleted while awaiting its parts was never concluded
    ctx.objects.delete(job.original_key)
    delete_renditions(ctx, job)
    if job.idempotency_scope:
        ctx.jobs.release_idempotency(job.idempotency_scope, job.job_id)
    ctx.jobs.delete(job.job_id)
    # Gone, so no longer in the quota; not conclude() again: it was counted and announced
    # when it became terminal.
    call_best_effort(ctx.jobs.release_place, job.owner, job.job_id)


def remove_many(ctx: Context, jobs: list[Job]) -> None:
    """remove() for a batch, in the same order: every object (DeleteObjects), then the keys
    (each conditional, as remove's), then the records (BatchWriteItem), then the quota places."""
    ctx.objects.delete_many([key for job in jobs
                             for key in (job.original_key, *rendition_keys(ctx, job))])
    for job in jobs:
        if job.idempotency_scope:
            ctx.jobs.release_idempotency(job.idempotency_scope, job.job_id)
    ctx.jobs.delete_many([job.job_id for job in jobs])
    for job in jobs:  # as remove(): not conclude() again
        call_best_effort(ctx.jobs.release_place, job.owner, job.job_id)


def call_best_effort(call: Callable, *args) -> None:
    """Best effort: a later sweep or lease expiry covers what this does not."""
    try:
        call(*args)
    except (ConditionFailed, TransientError):
        pass
