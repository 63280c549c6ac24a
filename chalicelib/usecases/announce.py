"""What follows a job's change of status, besides the write that made it so: for a terminal
one its metrics and its owner's webhook (job_finished, called once per job from
lifecycle.conclude); for every one, the service webhook's event when it asks for that status
(job_moved for queued and processing). Best effort: none of it may fail the job."""
from __future__ import annotations

import uuid

from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.domain.webhooks import SERVICE_RECEIVER, Webhook, WebhookEvent
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric
from chalicelib.usecases.context import Context

log = get_logger("webhooks")
# Event ids are uuid5s in this namespace: the same for the same job and status.
_EVENT_IDS = uuid.UUID("8f0c4a52-3c2e-4d0e-9a51-6c1f2b7d9e43")


def job_finished(ctx: Context, job: Job) -> None:
    measure(ctx, job)
    try:
        # Both receivers' webhooks in one read: every finished job looks both up.
        hooks = ctx.webhooks.get_webhooks((job.owner, SERVICE_RECEIVER))
    except Exception:
        log.exception("webhook_enqueue_failed", job_id=job.job_id)
        return
    enqueue_webhook(ctx, job, hooks.get(job.owner))
    enqueue_service_webhook(ctx, job, hooks.get(SERVICE_RECEIVER))


def job_moved(ctx: Context, job: Job) -> None:
    """A job has just become queued or processing, by the write that made it so."""
    try:
        hook = ctx.webhooks.get_webhook(SERVICE_RECEIVER)
    except Exception:
        log.exception("webhook_enqueue_failed", job_id=job.job_id, receiver=SERVICE_RECEIVER)
        return
    enqueue_service_webhook(ctx, job, hook)


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


def event_id(job: Job) -> str:
    """Fixed by the job and its terminal status: queuing the same event twice (a retried
    write, say) still gives receivers one id to de-duplicate on."""
    return "msg_" + uuid.uuid5(_EVENT_IDS, f"{job.job_id}/{job.status.value}").hex


def service_event_id(job: Job) -> str:
    """Fixed by the job, its status and (for processing, which a re-claim repeats) its
    attempt; never an id of the owner's webhook, whose receiver is another."""
    attempt = f"/{job.attempt}" if job.status is JobStatus.PROCESSING else ""
    return "msg_" + uuid.uuid5(_EVENT_IDS, f"{job.job_id}/{job.status.value}{attempt}/service").hex


def enqueue_service_webhook(ctx: Context, job: Job, hook: Webhook | None) -> None:
    """Queue the service webhook's event of the job's new status, if there is a service
    webhook (`hook`, as just read) and it asks for that status. Best effort, as enqueue_webhook."""
    try:
        if hook is None or not hook.sent(job.status):
            return
        event = WebhookEvent(event_id=service_event_id(job), owner=job.owner, job_id=job.job_id,
                             service=True, status=None if job.status.terminal else job.status.value)
        ctx.webhook_queue.send(event)
    except Exception:
        log.exception("webhook_enqueue_failed", job_id=job.job_id, receiver=SERVICE_RECEIVER)
        return
    ctx.metrics.emit({Metric.WEBHOOKS_QUEUED: 1})
    log.info("webhook_queued", job_id=job.job_id, event_id=event.event_id, receiver=SERVICE_RECEIVER)


def enqueue_webhook(ctx: Context, job: Job, hook: Webhook | None) -> None:
    """Queue the webhook event of a job that has just become terminal, if its owner has a
    webhook (`hook`, as just read). Best effort: never fails the job; a lost event is a log
    line and a metric."""
    if hook is None:
        return
    try:
        event = WebhookEvent(event_id=event_id(job), owner=job.owner, job_id=job.job_id)
        ctx.webhook_queue.send(event)
    except Exception:
        log.exception("webhook_enqueue_failed", job_id=job.job_id)
        return
    ctx.metrics.emit({Metric.WEBHOOKS_QUEUED: 1})
    log.info("webhook_queued", job_id=job.job_id, event_id=event.event_id)
