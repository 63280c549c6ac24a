"""Webhooks: an owner registers one endpoint; when one of their jobs reaches a terminal status,
the job, exactly as GET shows it, is POSTed there, signed per Standard Webhooks.

  register / show / remove / rotate   PUT, GET, DELETE /webhook, POST /webhook/rotate-secret
  enqueue(ctx, job)                   a job became terminal: queue one event (best effort)
  Webhooks.deliver                    one attempt at one queued event

Delivery is at least once from its own queue, never in the worker's way. The webhook-id is
fixed when the event is queued, so every retry carries the same one. A failed attempt sets
the message to come back after the next delay of Settings.webhook_delays (about a day in
all); after the last one the queue dead-letters it. While an owner's endpoint is failing,
that owner's other events wait out the same backoff without calling it, so a slow or dead
endpoint costs one short attempt per backoff step, not one per event, and other owners'
deliveries never queue behind it. The body is made at delivery, so its URLs are fresh.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Callable, NoReturn, Optional

from chalicelib.domain.errors import (
    ConditionFailed,
    DeliveryFailed,
    InvalidRequest,
    PoisonMessage,
    RetryLater,
    StorageUnavailable,
    TransientError,
    WebhookNotFound,
)
from chalicelib.domain.jobs import Job
from chalicelib.http.views import job_body
from chalicelib.ports import Webhook, WebhookEvent
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric
from chalicelib.usecases import webhook_urls
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Urls

log = get_logger("webhooks")

SECRET_PREFIX = "whsec_"
# After a rotation the old secret signs too, for this long: receivers switch over in peace.
ROTATION_GRACE = timedelta(hours=24)
USER_AGENT = "image-jobs-webhooks/1"


class Reason(StrEnum):
    """Why an attempt failed, or why an event was dropped (a metric dimension)."""

    STATUS = "status"                    # the receiver answered, but not 2xx
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    TLS = "tls"
    PROTOCOL = "protocol"                # not HTTP
    REFUSED_ADDRESS = "refused_address"  # the name now resolves somewhere it may not go
    NO_WEBHOOK = "no_webhook"            # the owner removed it
    JOB_GONE = "job_gone"                # the job was deleted before its event went out


class Delivery(StrEnum):
    DELIVERED = "delivered"
    DROPPED = "dropped"


@dataclass(frozen=True)
class Registration:
    webhook: Webhook
    show_secret: bool  # only when the secret is new


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature_headers(hook: Webhook, event: str, now: datetime, payload: bytes) -> dict[str, str]:
    """webhook-id, webhook-timestamp and webhook-signature (one v1 signature per live secret)."""
    # Imported by the first delivery: every API process loads this module (a job's end
    # queues its event), and only the delivery function signs.
    from standardwebhooks import Webhook as StandardWebhook

    text = payload.decode()
    live = [hook.secret]
    if hook.previous_secret and hook.previous_until and now < hook.previous_until:
        live.append(hook.previous_secret)
    return {
        "webhook-id": event,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(StandardWebhook(s).sign(event, now, text) for s in live),
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }


class Webhooks:
    def __init__(self, ctx: Context, urls: Callable[[Job], Optional[Urls]]):
        self._ctx = ctx
        self._urls = urls  # ManageJobs.urls: the very URLs GET would show

    # -- registration --------------------------------------------------------------------
    def register(self, owner: str, url: object) -> Registration:
        store = self._store()
        target = self._check(url)
        for _ in range(3):  # a lost race means another request changed it: look again
            now = self._ctx.clock()
            current = store.get_webhook(owner)
            try:
                if current is None:
                    hook = Webhook(owner=owner, url=target.url, secret=new_secret(), created_at=now)
                    store.create_webhook(hook)
                    log.info("webhook_registered", host=target.host)
                    return Registration(hook, show_secret=True)
                # A new URL may be a mended endpoint: let deliveries try it at once.
                hook = dataclasses.replace(current, url=target.url, failing_until=None)
                store.update_webhook(hook, seen=current)
                log.info("webhook_changed", host=target.host)
                return Registration(hook, show_secret=False)
            except ConditionFailed:
                continue
        raise TransientError("the webhook kept changing")

    def show(self, owner: str) -> Optional[Webhook]:
        return self._store().get_webhook(owner)

    def remove(self, owner: str) -> None:
        self._store().delete_webhook(owner)
        log.info("webhook_removed")

    def rotate(self, owner: str) -> Webhook:
        store = self._store()
        for _ in range(3):
            current = store.get_webhook(owner)
            if current is None:
                raise WebhookNotFound("No webhook is registered: PUT /webhook first")
            now = self._ctx.clock()
            hook = dataclasses.replace(current, secret=new_secret(), previous_secret=current.secret,
                                       previous_until=now + ROTATION_GRACE)
            try:
                store.update_webhook(hook, seen=current)
            except ConditionFailed:
                continue
            log.info("webhook_secret_rotated")
            return hook
        raise TransientError("the webhook kept changing")

    def _store(self):
        if self._ctx.webhooks is None:
            raise StorageUnavailable("Webhooks are not available here",
                                     retry_after=self._ctx.settings.retry_after_seconds)
        return self._ctx.webhooks

    def _check(self, url: object) -> webhook_urls.Target:
        try:
            return webhook_urls.check(url, self._ctx.settings.webhook_allow_loopback, self._ctx.resolve)
        except webhook_urls.UrlRefused as refused:
            raise InvalidRequest(str(refused)) from None

    # -- delivery ------------------------------------------------------------------------
    def deliver(self, body: str, receive_count: int, receipt: Optional[str]) -> Delivery:
        """One attempt at the event in `body`, received for the `receive_count`-th time.

        Returns when the event is done with (delivered, or nothing left to send); raises
        RetryLater once the message is set to come back, and PoisonMessage for a body that
        is no event of ours."""
        ctx = self._ctx
        try:
            event = WebhookEvent.from_json(body)
        except ValueError:
            raise PoisonMessage("not a webhook event") from None
        hook = self._store().get_webhook(event.owner)
        if hook is None:
            return self._drop(event, Reason.NO_WEBHOOK)
        job = ctx.jobs.get(event.job_id)
        if job is None or job.owner != event.owner or not job.status.terminal:
            return self._drop(event, Reason.JOB_GONE)
        now = ctx.clock()
        if hook.failing_until is not None and now < hook.failing_until:
            ctx.metrics.emit({Metric.WEBHOOKS_DEFERRED: 1})
            wait = (hook.failing_until - now).total_seconds()
            log.info("webhook_deferred", job_id=job.job_id, event_id=event.event_id,
                     attempt=receive_count, retry_in=int(max(wait, self._delay(receive_count))))
            self._retry(receipt, max(wait, self._delay(receive_count)))
        try:
            target = webhook_urls.check(hook.url, ctx.settings.webhook_allow_loopback, ctx.resolve)
        except webhook_urls.UrlRefused:
            self._failed(hook, event, job, receive_count, receipt, Reason.REFUSED_ADDRESS)
        payload = json.dumps(job_body(job, self._urls(job)), separators=(",", ":")).encode()
        headers = signature_headers(hook, event.event_id, now, payload)
        started = time.monotonic()
        try:
            status = ctx.webhook_sender.post(hook.url, target.addresses, headers, payload,
                                             ctx.settings.webhook_timeout_seconds)
        except DeliveryFailed as failed:
            self._failed(hook, event, job, receive_count, receipt, Reason(failed.reason))
        elapsed_ms = (time.monotonic() - started) * 1000
        if not 200 <= status < 300:
            self._failed(hook, event, job, receive_count, receipt, Reason.STATUS, status=status)
        ctx.metrics.emit({Metric.WEBHOOK_DELIVERIES: 1, Metric.WEBHOOK_LATENCY: elapsed_ms})
        log.info("webhook_delivered", job_id=job.job_id, event_id=event.event_id,
                 attempt=receive_count, status=status, ms=round(elapsed_ms))
        if hook.failing_until is not None:
            self._mark_failing(hook.owner, None)
        return Delivery.DELIVERED

    def _delay(self, receive_count: int) -> int:
        delays = self._ctx.settings.webhook_delays
        if receive_count >= len(delays) + 1:
            return 1  # that was the last attempt: back at once, for the queue to dead-letter
        return delays[max(1, receive_count) - 1]

    def _failed(self, hook: Webhook, event: WebhookEvent, job: Job, receive_count: int,
                receipt: Optional[str], reason: Reason, **details) -> NoReturn:
        ctx = self._ctx
        delay = self._delay(receive_count)
        last = receive_count >= ctx.settings.webhook_attempts
        ctx.metrics.emit({Metric.WEBHOOK_FAILURES: 1}, {Dimension.REASON: reason})
        log.warning("webhook_attempt_failed", job_id=job.job_id, event_id=event.event_id,
                    attempt=receive_count, reason=reason.value, dead_letter=last,
                    retry_in=None if last else delay, **details)
        if not last:
            # The owner's other events wait as long as this one does.
            until = ctx.clock() + timedelta(seconds=delay)
            self._mark_failing(hook.owner, until)
        self._retry(receipt, delay)

    def _drop(self, event: WebhookEvent, reason: Reason) -> Delivery:
        self._ctx.metrics.emit({Metric.WEBHOOKS_DROPPED: 1}, {Dimension.REASON: reason})
        log.info("webhook_dropped", job_id=event.job_id, event_id=event.event_id, reason=reason.value)
        return Delivery.DROPPED

    def _retry(self, receipt: Optional[str], seconds: float) -> NoReturn:
        seconds = int(seconds + 0.999)
        if receipt is not None:
            self._ctx.webhook_queue.retry_later(receipt, seconds)
        raise RetryLater("webhook delivery will be tried again", retry_in=seconds)

    def _mark_failing(self, owner: str, until) -> None:
        """Set (or clear, with None) the owner's breaker; a store outage skips it."""
        try:
            self._ctx.webhooks.mark_failing(owner, until)
        except TransientError:
            pass  # only the breaker's timing: the backoff itself is on the message
