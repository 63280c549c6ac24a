"""What follows a job becoming terminal, besides the write that made it so: its metrics and
its owner's webhook. Called once per job, from lifecycle.finished. Best effort: neither may
fail the job."""
from __future__ import annotations

from chalicelib.jobs import Job, JobStatus
from chalicelib.metrics import Dimension, Metric
from chalicelib.usecases import webhooks
from chalicelib.usecases.context import Context
from chalicelib.vocabulary import ErrorCode


def job_finished(ctx: Context, job: Job) -> None:
    measure(ctx, job)
    webhooks.enqueue(ctx, job)


def measure(ctx: Context, job: Job) -> None:
    if job.status is JobStatus.READY:
        values = {Metric.JOBS_READY: 1, Metric.ATTEMPTS: job.attempt}
        if job.finished_at is not None:
            values[Metric.END_TO_END] = _ms(job.finished_at - job.created_at)
        ctx.metrics.emit(values)
    elif job.status is JobStatus.FAILED:
        values = {Metric.JOBS_FAILED: 1}
        if job.attempt:
            values[Metric.ATTEMPTS] = job.attempt
        ctx.metrics.emit(values, {Dimension.CODE: job.error_code or ErrorCode.PROCESSING_FAILED})
    elif job.status is JobStatus.CANCELLED:
        ctx.metrics.emit({Metric.JOBS_CANCELLED: 1})


def _ms(delta) -> float:
    return round(delta.total_seconds() * 1000, 1)
