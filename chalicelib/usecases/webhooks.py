"""Webhooks: an owner registers one endpoint; when one of their jobs reaches a terminal status,
the job, exactly as GET shows it, is POSTed there, signed per Standard Webhooks. The service
principal registers one more, the service webhook (its receiver SERVICE_RECEIVER): every
owner's jobs, of the statuses its `events` name, as the service's GET shows them (with the
owner). Each receiver has its own breaker; an event's `receiver` keys it.

  register / show / remove / rotate   PUT, GET, DELETE /webhook, POST /webhook/rotate-secret
  register_service                    PUT /service/webhook (show, remove, rotate as above)
  enqueue(ctx, job)                   a job became terminal: queue one event (best effort)
  Webhooks.deliver                    one attempt at one queued event
  shown / send_test                   GET with its last attempts, POST /webhook/test

Every attempt that calls the receiver (not a deferral) goes into the receiver's log
(ports.DeliveryLog), after the event's fate is stored and its slot given back, and never
failing it: the log is for people, the queue is what delivers.

Delivery is at least once from its own queue, never in the worker's way. The webhook-id is
fixed when the event is queued, so every retry carries the same one. The event counts its
own attempts: a failed one (whatever it raised) queues a new copy with one more, due after
the next delay of Settings.webhook_delays (about a day in all); after the last one it goes
to the dead-letter queue. The queue's receive count is only the safety net for a handler
that keeps crashing.

The owner's breaker (domain/webhooks.py's Breaker) holds their other events back only while the endpoint
is down: no answer at all, or 5xx to two different events in a row (Verdict). Deferred
events are queued again for the moment it closes, with their attempts untouched; its
window grows by the same schedule with each failure in a row, and a delivery closes it.
So a dead endpoint costs one short attempt per step, not one per event, a receiver that
refuses one event holds back none of the others, and other owners' deliveries never queue
behind either. The body is made at delivery, so its URLs are fresh.

A receiver that answers, however slowly, is bounded too: at most
Settings.receiver_slots deliveries to it are in flight at once across every delivery
function (ports.DeliverySlots, in the table), fewer than the functions, so the others stay
free for other receivers whatever one of them does. An event that finds every slot held is
deferred, without calling and without spending an attempt, to the receiver's next turn:
turns are spaced by how long its slots were last held over the slots (ctx.webhook_turns),
so a backlog comes back about as fast as the receiver takes it, not all at once.
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
    RateLimited,
    RetryLater,
    TransientError,
    WebhookNotFound,
)
from chalicelib.domain.jobs import TERMINAL, Job, JobStatus
from chalicelib.domain.vocabulary import rfc3339
from chalicelib.domain.webhooks import SERVICE_RECEIVER, TEST_EVENT, Attempt, Breaker, Webhook, WebhookEvent
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric
from chalicelib.usecases import webhook_urls
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Shown, Urls

log = get_logger("webhooks")

SECRET_PREFIX = "whsec_"
# After a rotation the old secret signs too, for this long: receivers switch over in peace.
ROTATION_GRACE = timedelta(hours=24)
USER_AGENT = "image-jobs-webhooks/1"
# A slot outlives its attempt's timeout by this, for the writes after the answer; then a
# crashed function's slot frees itself.
SLOT_MARGIN = timedelta(seconds=5)
# How far ahead a receiver's turns may be handed out (SQS holds a message back 12 h at most).
TURNS_AHEAD_SECONDS = 43200
# A receiver's hold before any was measured: if it is slower, its events come back early and
# are deferred again at the pace measured by then.
UNKNOWN_HOLD_SECONDS = 1.0


def receiver_key(hook: Webhook) -> str:
    """What a receiver's slots and turns are counted under. An owner's endpoint is theirs
    alone, and the service webhook's the service's; an endpoint shared by owners would be
    counted under its own key, once."""
    return "service" if hook.owner == SERVICE_RECEIVER else "owner/" + hook.owner


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
    SUPERSEDED = "superseded"            # a progress event whose job has a later status now
    ERROR = "error"                      # the attempt raised something unexpected here


class Delivery(StrEnum):
    """What became of a received event: in every case its message may be deleted."""

    DELIVERED = "delivered"
    DROPPED = "dropped"
    RETRYING = "retrying"            # the attempt failed: a copy comes back after its backoff
    DEFERRED = "deferred"            # the breaker is open: a copy comes back when it closes
    DEAD_LETTERED = "dead_lettered"  # that was its last attempt


class Verdict(StrEnum):
    """What a failed attempt says about the owner's endpoint (usecases/webhooks.py)."""

    DOWN = "down"          # no answer, or refused address: every event would fail
    SUSPECT = "suspect"    # 5xx, 408 or 429: down if another event fails so next
    REJECTED = "rejected"  # another non-2xx: the receiver refused this event
    OURS = "ours"          # the attempt crashed here: the endpoint is not to blame


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
    def register(self, owner: str, url: object, events: tuple[JobStatus, ...] = ()) -> Registration:
        store = self._ctx.webhooks
        target = self._check(url)
        for _ in range(3):  # a lost race means another request changed it: look again
            now = self._ctx.clock()
            current = store.get_webhook(owner)
            try:
                if current is None:
                    hook = Webhook(owner=owner, url=target.url, secret=new_secret(), created_at=now,
                                   events=events)
                    store.create_webhook(hook)
                    log.info("webhook_registered", host=target.host)
                    return Registration(hook, show_secret=True)
                # A new URL may be a mended endpoint: let deliveries try it at once.
                hook = dataclasses.replace(current, url=target.url, breaker=Breaker(), events=events)
                store.update_webhook(hook, seen=current)
                log.info("webhook_changed", host=target.host)
                return Registration(hook, show_secret=False)
            except ConditionFailed:
                continue
        raise TransientError("the webhook kept changing")

    def register_service(self, url: object, events: Optional[list] = None) -> Registration:
        """The service webhook: every owner's job events, of the statuses in `events`
        (default the terminal ones). As an owner's otherwise; a new `events` list replaces
        the old one, and PUT without one sets the default again."""
        chosen = service_events(events)
        registration = self.register(SERVICE_RECEIVER, url, chosen)
        return registration

    def show(self, owner: str) -> Optional[Webhook]:
        return self._ctx.webhooks.get_webhook(owner)

    def remove(self, owner: str) -> None:
        self._ctx.webhooks.delete_webhook(owner)
        log.info("webhook_removed")

    def rotate(self, owner: str) -> Webhook:
        store = self._ctx.webhooks
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

    def _check(self, url: object) -> webhook_urls.Target:
        try:
            return webhook_urls.check(url, self._ctx.settings.webhook_allow_loopback, self._ctx.resolve)
        except webhook_urls.UrlRefused as refused:
            raise InvalidRequest(str(refused)) from None

    # -- delivery ------------------------------------------------------------------------
    def deliver(self, body: str, receipt: Optional[str]) -> Delivery:
        """One attempt at the event in `body`, or its deferral.

        Returns when the message is done with: delivered, dropped, or queued again as a new
        copy that carries its attempts (then the received one may be deleted). Raises
        RetryLater for a copy that arrived before it was due (it is set to come back then),
        and PoisonMessage for a body that is no event of ours."""
        ctx = self._ctx
        try:
            event = WebhookEvent.from_json(body)
        except ValueError:
            raise PoisonMessage("not a webhook event") from None
        now = ctx.clock()
        if event.not_before is not None and now < event.not_before:
            self._retry(receipt, (event.not_before - now).total_seconds())
        hook = self._ctx.webhooks.get_webhook(event.receiver)
        if hook is None:
            return self._drop(event, Reason.NO_WEBHOOK)
        job = ctx.jobs.get(event.job_id)
        if job is None or job.owner != event.owner:
            return self._drop(event, Reason.JOB_GONE)
        if (job.status.value != event.status) if event.status else not job.status.terminal:
            # A queued or processing event of a job that has moved on since: the body would
            # contradict it, and the later status has its own event.
            return self._drop(event, Reason.SUPERSEDED)
        if hook.breaker.is_open(now):
            # The endpoint is down: wait for the breaker, without spending an attempt.
            return self._defer(event, hook.breaker.failing_until, now, why="breaker")
        receiver = receiver_key(hook)
        holder = f"{event.event_id}/{secrets.token_hex(8)}"
        slot = self._take_slot(receiver, holder, now)
        if slot is None:
            # The receiver has its share in flight: its turn comes when one of them is done.
            return self._defer(event, self._next_turn(receiver, now), now, why="busy")
        started = time.monotonic()
        try:
            delivery, attempt = self._attempt(hook, event, job, now, started)
        finally:
            self._give_back(receiver, slot, holder, (ctx.clock() - now).total_seconds())
        # Only now, with the event's fate stored and the slot given back: a slow or failed
        # write of the log costs this function a moment, never the delivery itself.
        self._log(hook.owner, attempt)
        return delivery

    def _attempt(self, hook: Webhook, event: WebhookEvent, job: Job, now: datetime,
                 started: float) -> tuple[Delivery, Attempt]:
        ctx = self._ctx
        seen = _Seen(event.event_id, job.status.value, job.job_id, event.attempts + 1, now, started)
        try:
            payload = json.dumps(ctx.job_body(job, self._urls(job), event.service),
                                 separators=(",", ":")).encode()
            status = self._post(hook, event.event_id, now, payload)
        except webhook_urls.UrlRefused as refused:
            return self._failed(hook, event, job, seen.unanswered(refused), Reason.REFUSED_ADDRESS,
                                Verdict.DOWN)
        except DeliveryFailed as failed:
            return self._failed(hook, event, job, seen.unanswered(failed), Reason(failed.reason),
                                Verdict.DOWN)
        except Exception as error:
            # Ours, not the receiver's (a URL stored before it was normalised, say): the
            # event backs off like any failure, and the endpoint is not blamed for it.
            log.exception("webhook_attempt_crashed", job_id=job.job_id, event_id=event.event_id)
            return self._failed(hook, event, job, seen.unanswered(error), Reason.ERROR, Verdict.OURS)
        elapsed_ms = (time.monotonic() - started) * 1000
        if not 200 <= status < 300:
            return self._failed(hook, event, job, seen.answered(status), Reason.STATUS,
                                verdict_of(status), status=status)
        ctx.metrics.emit({Metric.WEBHOOK_DELIVERIES: 1, Metric.WEBHOOK_LATENCY: elapsed_ms})
        log.info("webhook_delivered", job_id=job.job_id, event_id=event.event_id,
                 attempt=event.attempts + 1, status=status, ms=round(elapsed_ms))
        if hook.breaker != Breaker():
            self._save_breaker(hook.owner, Breaker())
        return Delivery.DELIVERED, seen.answered(status).made(Delivery.DELIVERED)

    def _post(self, hook: Webhook, webhook_id: str, now: datetime, payload: bytes) -> int:
        """The one call to the receiver, at the addresses the guard vets again right now:
        UrlRefused, DeliveryFailed, or the status it answered."""
        ctx = self._ctx
        target = webhook_urls.check(hook.url, ctx.settings.webhook_allow_loopback, ctx.resolve)
        headers = signature_headers(hook, webhook_id, now, payload)
        return ctx.webhook_sender.post(target.url, target.addresses, headers, payload,
                                       ctx.settings.webhook_attempt_seconds)

    # -- what happened: the receiver's log, and the test event ---------------------------
    def shown(self, owner: str) -> Shown:
        """The webhook and its last attempts, newest first; those None when the log cannot
        be read (GET /webhook still answers with the rest)."""
        hook = self._ctx.webhooks.get_webhook(owner)
        deliveries = None
        if hook is not None:
            try:
                # A webhook deleted and registered again starts with an empty log.
                deliveries = [a for a in self._ctx.delivery_log.recent(owner)
                              if a.at >= hook.created_at]
            except TransientError:
                log.warning("webhook_log_unavailable")
        return Shown(hook, deliveries, self._ctx.clock())

    def send_test(self, owner: str) -> Attempt:
        """A signed TEST_EVENT to the registered URL at once, vetted as any delivery, and what
        the receiver did. At most TEST_BURST in a row, then one per TEST_EVERY_SECONDS, per
        receiver (RateLimited): it cannot be made to hammer a receiver or to probe a network
        faster than that. It neither opens nor closes the breaker and is never retried."""
        hook = self._ctx.webhooks.get_webhook(owner)
        if hook is None:
            raise WebhookNotFound("No webhook is registered: PUT /webhook first")
        self._take_test_turn(receiver_key(hook))
        now, started = self._ctx.clock(), time.monotonic()
        seen = _Seen("msg_" + secrets.token_hex(12), TEST_EVENT, None, 1, now, started,
                     "open" if hook.breaker.is_open(now) else "closed")
        payload = json.dumps({"type": TEST_EVENT, "timestamp": rfc3339(now)},
                             separators=(",", ":")).encode()
        try:
            status = self._post(hook, seen.webhook_id, now, payload)
        except (webhook_urls.UrlRefused, DeliveryFailed) as error:
            attempt = seen.unanswered(error).made("failed")
        else:
            attempt = seen.answered(status).made("delivered" if 200 <= status < 300 else "failed")
        log.info("webhook_test_sent", event_id=seen.webhook_id, status=attempt.status_code,
                 reason=attempt.reason, ms=attempt.ms)
        self._log(owner, attempt)
        return attempt

    def _take_test_turn(self, receiver: str) -> None:
        """One token of the receiver's test bucket (kept beside its turns, under its own key)."""
        turns, key = self._ctx.webhook_turns, "test/" + receiver
        cost, depth = TEST_EVERY_SECONDS, TEST_EVERY_SECONDS * TEST_BURST
        for _ in range(3):  # a lost race: another test took a token meanwhile
            now = self._ctx.clock().timestamp()
            full_at = turns.full_at(key)
            try:
                if full_at is None or full_at <= now:
                    turns.take_from_full(key, now, cost, depth)
                elif full_at <= now + depth - cost:
                    turns.take(key, now, cost, depth)
                else:
                    wait = int(full_at - (now + depth - cost) + 0.999)
                    raise RateLimited(f"Test events to this receiver: {TEST_BURST} in a row, then one "
                                      f"every {TEST_EVERY_SECONDS} s; try again in {wait} s",
                                      retry_after=max(1, wait))
                return
            except ConditionFailed:
                continue
        raise TransientError("the receiver's test events kept changing")

    def _log(self, owner: str, attempt: Attempt) -> None:
        """Best effort, always: whatever the log's store does, the caller goes on."""
        try:
            self._ctx.delivery_log.record(owner, attempt)
        except Exception:  # noqa: BLE001 - the log must never fail a delivery
            log.warning("webhook_log_not_written", event_id=attempt.webhook_id)

    def _defer(self, event: WebhookEvent, until: datetime, now: datetime, why: str) -> Delivery:
        self._ctx.metrics.emit({Metric.WEBHOOKS_DEFERRED: 1})
        log.info("webhook_deferred", job_id=event.job_id, event_id=event.event_id, why=why,
                 attempt=event.attempts + 1, retry_in=int((until - now).total_seconds() + 0.999))
        self._queue_again(dataclasses.replace(event, not_before=until), now)
        return Delivery.DEFERRED

    # -- the receiver's share: slots in flight, and turns for the rest -------------------
    def _take_slot(self, receiver: str, holder: str, now: datetime) -> Optional[int]:
        ctx, s = self._ctx, self._ctx.settings
        until = now + timedelta(seconds=s.webhook_attempt_seconds) + SLOT_MARGIN
        return ctx.delivery_slots.take(receiver, holder, until, now, s.receiver_slots)

    def _give_back(self, receiver: str, slot: int, holder: str, held_seconds: float) -> None:
        try:
            self._ctx.delivery_slots.give_back(receiver, slot, holder, held_seconds)
        except TransientError:
            log.warning("webhook_slot_not_given_back", receiver_slot=slot)  # its time frees it

    def _next_turn(self, receiver: str, now: datetime) -> datetime:
        """When a deferred event of the receiver is due: no sooner than a slot held now is
        likely free (its last hold), and one step after the turns handed out already, a step
        being a hold over the slots, so its backlog comes back at the pace it is taken."""
        ctx, s = self._ctx, self._ctx.settings
        slots = s.receiver_slots
        try:
            hold = ctx.delivery_slots.recent_hold(receiver, slots)
        except TransientError:
            hold = None
        cap = s.webhook_attempt_seconds + SLOT_MARGIN.total_seconds()
        hold = min(cap, max(0.05, hold if hold is not None else UNKNOWN_HOLD_SECONDS))
        step = hold / slots
        # A token bucket read as a line of turns: its full_at is the last turn handed out.
        start = now.timestamp() + hold - step
        for _ in range(3):  # a lost race: another function took the turn meanwhile
            for take in (ctx.webhook_turns.take, ctx.webhook_turns.take_from_full):
                try:
                    turn = take(receiver, start, step, TURNS_AHEAD_SECONDS)
                except ConditionFailed:
                    continue
                except TransientError:
                    return now + timedelta(seconds=hold)
                return datetime.fromtimestamp(turn, tz=now.tzinfo)
        return now + timedelta(seconds=hold)

    def _failed(self, hook: Webhook, event: WebhookEvent, job: Job, seen: "_Seen", reason: Reason,
                verdict: Verdict, **details) -> tuple[Delivery, Attempt]:
        ctx = self._ctx
        now = ctx.clock()
        attempts = event.attempts + 1
        last = attempts >= ctx.settings.webhook_attempts
        delay = None if last else self._delay(attempts)
        ctx.metrics.emit({Metric.WEBHOOK_FAILURES: 1}, {Dimension.REASON: reason})
        log.warning("webhook_attempt_failed", job_id=job.job_id, event_id=event.event_id,
                    attempt=attempts, reason=reason.value, verdict=verdict.value,
                    dead_letter=last, retry_in=delay, **details)
        breaker = self._next_breaker(hook.breaker, event, verdict, now)
        if breaker != hook.breaker:
            self._save_breaker(hook.owner, breaker)
        seen = dataclasses.replace(seen, breaker="open" if breaker.is_open(now) else "closed")
        if last:
            ctx.webhook_queue.dead_letter(dataclasses.replace(event, attempts=attempts, not_before=None))
            return Delivery.DEAD_LETTERED, seen.made(Delivery.DEAD_LETTERED)
        due = now + timedelta(seconds=delay)
        self._queue_again(dataclasses.replace(event, attempts=attempts, not_before=due), now)
        return Delivery.RETRYING, seen.made(Delivery.RETRYING, next_attempt_at=due)

    def _next_breaker(self, breaker: Breaker, event: WebhookEvent, verdict: Verdict,
                      now: datetime) -> Breaker:
        """Only an endpoint that is down opens the breaker: one that gave no answer, or that
        answered 5xx to two different events in a row. A receiver refusing one event's
        body (a 4xx, or a 5xx on that event alone) holds back none of the others."""
        if verdict is Verdict.SUSPECT and breaker.suspect_event in (None, event.event_id):
            return dataclasses.replace(breaker, suspect_event=event.event_id)
        if verdict in (Verdict.DOWN, Verdict.SUSPECT):
            failures = breaker.failures + 1
            step = self._delay(min(failures, len(self._ctx.settings.webhook_delays)))
            return Breaker(failing_until=now + timedelta(seconds=step), failures=failures)
        return breaker

    def _delay(self, attempts: int) -> int:
        """The wait after the `attempts`-th failure in a row."""
        return self._ctx.settings.webhook_delays[attempts - 1]

    def _queue_again(self, event: WebhookEvent, now: datetime) -> None:
        """A new copy of the event, due at its `not_before`; the received one is then done."""
        self._ctx.webhook_queue.send(event, int((event.not_before - now).total_seconds() + 0.999))

    def _drop(self, event: WebhookEvent, reason: Reason) -> Delivery:
        self._ctx.metrics.emit({Metric.WEBHOOKS_DROPPED: 1}, {Dimension.REASON: reason})
        log.info("webhook_dropped", job_id=event.job_id, event_id=event.event_id, reason=reason.value)
        return Delivery.DROPPED

    def _retry(self, receipt: Optional[str], seconds: float) -> NoReturn:
        seconds = int(seconds + 0.999)
        if receipt is not None:
            self._ctx.webhook_queue.retry_later(receipt, seconds)
        raise RetryLater("webhook delivery is not due yet", retry_in=seconds)

    def _save_breaker(self, owner: str, breaker: Breaker) -> None:
        """A store outage skips it: only the breaker's timing, the event's own backoff holds."""
        try:
            self._ctx.webhooks.save_breaker(owner, breaker)
        except TransientError:
            pass


# The test event's bound per receiver: TEST_BURST at once, then one per TEST_EVERY_SECONDS.
TEST_BURST = 3
TEST_EVERY_SECONDS = 20


@dataclass(frozen=True)
class _Seen:
    """What an attempt is becoming, for the receiver's log (Attempt): filled in as it goes."""

    webhook_id: str
    event: str
    job_id: Optional[str]
    attempt: int
    at: datetime
    started: float  # time.monotonic() when it began
    breaker: str = "closed"
    status_code: Optional[int] = None
    reason: Optional[str] = None

    def answered(self, status: int) -> "_Seen":
        return dataclasses.replace(self, status_code=status)

    def unanswered(self, error: BaseException) -> "_Seen":
        return dataclasses.replace(self, reason=unanswered_reason(error))

    def made(self, outcome: str, next_attempt_at: Optional[datetime] = None) -> Attempt:
        return Attempt(at=self.at, webhook_id=self.webhook_id, event=self.event, job_id=self.job_id,
                       attempt=self.attempt, ms=round((time.monotonic() - self.started) * 1000),
                       outcome=str(outcome), status_code=self.status_code, reason=self.reason,
                       breaker=self.breaker, next_attempt_at=next_attempt_at)


# The sender's words (adapters/http_webhooks.py) as clients read them (domain UNANSWERED).
_UNANSWERED_OF_SENDER = {"connection": "refused", "tls": "tls", "timeout": "timeout", "protocol": "protocol"}


def unanswered_reason(error: BaseException) -> str:
    """Why an attempt got no answer, in the words of domain/webhooks.py's UNANSWERED."""
    if isinstance(error, webhook_urls.NameNotResolved):
        return "dns"
    if isinstance(error, webhook_urls.UrlRefused):
        return "blocked"
    if isinstance(error, DeliveryFailed):
        return _UNANSWERED_OF_SENDER.get(error.reason, "error")
    return "error"


# What the service webhook may be sent: every status a job has after its upload arrived.
SERVICE_EVENTS = (JobStatus.QUEUED, JobStatus.PROCESSING, *sorted(TERMINAL, key=lambda s: s.value))


def service_events(names: Optional[list]) -> tuple[JobStatus, ...]:
    """The statuses of PUT /service/webhook's `events`, in SERVICE_EVENTS' order; the terminal
    ones when absent. InvalidRequest for an empty list or a name not offered."""
    if names is None:
        return tuple(s for s in SERVICE_EVENTS if s.terminal)
    chosen = set()
    for name in names:
        try:
            status = JobStatus(name)
        except ValueError:
            status = None
        if status not in SERVICE_EVENTS:
            raise InvalidRequest("events may name " + ", ".join(s.value for s in SERVICE_EVENTS))
        chosen.add(status)
    if not chosen:
        raise InvalidRequest("events must name at least one status (omit it for the terminal ones)")
    return tuple(s for s in SERVICE_EVENTS if s in chosen)


def verdict_of(status: int) -> Verdict:
    """What a non-2xx answer says about the endpoint."""
    if status in (408, 429) or status >= 500:
        return Verdict.SUSPECT
    return Verdict.REJECTED
