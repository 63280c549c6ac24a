"""WebhookStore on DynamoDB through PynamoDB: one item per owner, `webhook#<owner>`, in the
jobs table (it has no status or sweep_at, so the due index never sees it). DeliverySlots
beside it: one item per slot, `deliver#<receiver>#<n>`, taken and given back as the wait
slots are (adapters/dynamo_waits.py), and TTL removes idle ones. DynamoDeliveryLog: each
receiver's last attempts, a ring of DELIVERY_LOG_SIZE items `attempt#<receiver>#<n>` turned
by a counter item `attempts#<receiver>`: two small writes per attempt, one batch read per
GET, and TTL removes all of it a week after the last attempt.

The signing secret is stored as it is, because signing needs it: the table is encrypted
at rest (SSESpecification in infra/template.yaml), only the delivery and the registration
routes read it, and the API shows it only when it is created or rotated.
"""
from __future__ import annotations

from contextlib import suppress
from datetime import datetime, timedelta, timezone
from collections.abc import Sequence
from typing import Any, Optional

from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.models import Model

from chalicelib.adapters.dynamo_table import DynamoTable, dynamo_errors, find, written_once
from chalicelib.adapters.dynamo_waits import DynamoWaitSlots
from chalicelib.domain.errors import ConditionFailed
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.webhooks import DELIVERY_LOG_SIZE, Attempt, Breaker, Webhook

WEBHOOK_PREFIX = "webhook#"
DELIVER_PREFIX = "deliver#"
ATTEMPT_PREFIX = "attempt#"    # one kept attempt: attempt#<receiver>#<n>
ATTEMPTS_PREFIX = "attempts#"  # the receiver's counter: which n is next
TURN_PREFIX = "turn#"  # a receiver's deferred events' turns, kept by a DynamoRateStore
UNAVAILABLE = "webhook store unavailable"
# A given-back slot: free to anyone, whatever their clock says.
_FREE = datetime(1970, 1, 1, tzinfo=timezone.utc)
_KEEP = timedelta(hours=1)  # an idle slot's item, then TTL deletes it


class WebhookItem(Model):
    """Unbound: DynamoWebhookStore binds a subclass to the table."""

    pk = UnicodeAttribute(hash_key=True)
    url = UnicodeAttribute()
    secret = UnicodeAttribute()
    created_at = UTCDateTimeAttribute()
    previous_secret = UnicodeAttribute(null=True)
    previous_until = UTCDateTimeAttribute(null=True)
    # The breaker (domain/webhooks.py's Breaker); absent when it is closed.
    failing_until = UTCDateTimeAttribute(null=True)
    failures = NumberAttribute(null=True)
    suspect_event = UnicodeAttribute(null=True)
    # The service webhook's statuses, comma-separated; absent on an owner's (and older items).
    events = UnicodeAttribute(null=True)
    # A fresh id from each create or update (absent on items written before it): a write
    # botocore re-sent after a lost answer, refused by its own landing, finds its id here.
    write_id = UnicodeAttribute(null=True)


def _webhook(owner: str, item: WebhookItem) -> Webhook:
    return Webhook(owner=owner, url=item.url, secret=item.secret, created_at=item.created_at,
                   previous_secret=item.previous_secret, previous_until=item.previous_until,
                   breaker=Breaker(failing_until=item.failing_until, failures=int(item.failures or 0),
                                   suspect_event=item.suspect_event),
                   events=tuple(JobStatus(s) for s in (item.events or "").split(",") if s))


class DynamoWebhookStore:
    def __init__(self, table: DynamoTable):
        self._model = table.model(WebhookItem)
        table.connect(self._model)

    def get_webhook(self, owner: str) -> Optional[Webhook]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._model, WEBHOOK_PREFIX + owner)
        return None if item is None else _webhook(owner, item)

    def get_webhooks(self, owners: Sequence[str]) -> dict[str, Webhook]:
        with dynamo_errors(UNAVAILABLE):
            items = list(self._model.batch_get([WEBHOOK_PREFIX + owner for owner in dict.fromkeys(owners)],
                                               consistent_read=True))
        return {item.pk[len(WEBHOOK_PREFIX):]: _webhook(item.pk[len(WEBHOOK_PREFIX):], item) for item in items}


    def create_webhook(self, webhook: Webhook) -> None:
        self._save(webhook, self._model.pk.does_not_exist())

    def update_webhook(self, webhook: Webhook, seen: Webhook) -> None:
        m = self._model
        self._save(webhook, m.pk.exists() & (m.secret == seen.secret))

    def _save(self, webhook: Webhook, condition) -> None:
        key = WEBHOOK_PREFIX + webhook.owner
        item = self._model(key, url=webhook.url, secret=webhook.secret,
                           created_at=webhook.created_at, previous_secret=webhook.previous_secret,
                           previous_until=webhook.previous_until,
                           events=",".join(s.value for s in webhook.events) or None,
                           **_breaker_fields(webhook.breaker))

        def save(write_id: str) -> None:
            item.write_id = write_id
            with dynamo_errors(UNAVAILABLE, conditional=True):
                item.save(condition=condition)

        def read() -> Optional[WebhookItem]:
            with dynamo_errors(UNAVAILABLE):
                return find(self._model, key, attributes_to_get=["write_id"])

        # A create or a rotation whose answer was lost is this call's, not another's: taken
        # for another's, the caller would look again and show no secret, or rotate twice.
        written_once(save, read)

    def delete_webhook(self, owner: str) -> None:
        with dynamo_errors(UNAVAILABLE):
            self._model(WEBHOOK_PREFIX + owner).delete()

    def save_breaker(self, owner: str, breaker: Breaker) -> None:
        m = self._model
        actions = [getattr(m, name).remove() if value is None else getattr(m, name).set(value)
                   for name, value in _breaker_fields(breaker).items()]
        # Refused: deleted meanwhile, nothing to mark.
        with suppress(ConditionFailed), dynamo_errors(UNAVAILABLE, conditional=True):
            m(WEBHOOK_PREFIX + owner).update(actions=actions, condition=m.pk.exists())


def _breaker_fields(breaker: Breaker) -> dict[str, Any]:
    """The item's breaker attributes, None for each one a closed breaker leaves out."""
    return {"failing_until": breaker.failing_until, "failures": breaker.failures or None,
            "suspect_event": breaker.suspect_event}


class DeliverySlotItem(Model):
    """Unbound: DynamoDeliverySlots binds a subclass to the table."""

    pk = UnicodeAttribute(hash_key=True)
    holder = UnicodeAttribute(null=True)
    held_until = UTCDateTimeAttribute()
    last_held = NumberAttribute(null=True)  # seconds the last holder held it
    expires_at = TTLAttribute()


class DynamoDeliverySlots(DynamoWaitSlots):
    """DeliverySlots: a slot given back stays as an item marked free, with how long it was
    held, which paces the receiver's deferred events (usecases/webhooks.py)."""

    PREFIX = DELIVER_PREFIX
    ITEM = DeliverySlotItem
    ERROR = "delivery slots unavailable"

    def give_back(self, owner: str, slot: int, holder: str, held_seconds: float = 0.0) -> None:
        m = self._model
        # Refused: taken over after its time ran out, or already given back.
        with suppress(ConditionFailed), dynamo_errors(self.ERROR, conditional=True):
            m(self._key(owner, slot)).update(
                actions=[m.holder.remove(), m.held_until.set(_FREE), m.last_held.set(round(held_seconds, 3)),
                         m.expires_at.set(datetime.now(timezone.utc) + _KEEP)],
                condition=m.holder == holder)

    def recent_hold(self, owner: str, slots: int) -> Optional[float]:
        with dynamo_errors(self.ERROR):
            items = list(self._model.batch_get([self._key(owner, slot) for slot in range(slots)],
                                               consistent_read=True))
        held = [float(item.last_held) for item in items if item.last_held is not None]
        return sum(held) / len(held) if held else None


class AttemptItem(Model):
    """Unbound: DynamoDeliveryLog binds a subclass to the table. The counter item has `count`
    and `expires_at` only; each kept attempt the rest."""

    pk = UnicodeAttribute(hash_key=True)
    count = NumberAttribute(null=True)
    at = UTCDateTimeAttribute(null=True)
    webhook_id = UnicodeAttribute(null=True)
    event = UnicodeAttribute(null=True)
    job_id = UnicodeAttribute(null=True)
    attempt = NumberAttribute(null=True)
    ms = NumberAttribute(null=True)
    outcome = UnicodeAttribute(null=True)
    status_code = NumberAttribute(null=True)
    reason = UnicodeAttribute(null=True)
    breaker = UnicodeAttribute(null=True)
    next_attempt_at = UTCDateTimeAttribute(null=True)
    expires_at = TTLAttribute()


class DynamoDeliveryLog:
    """DeliveryLog. `table` should be one with short timeouts and no retries (bootstrap.py):
    the log's writes come after a delivery and must not hold its function for long."""

    KEEP = timedelta(days=7)
    ERROR = "delivery log unavailable"

    def __init__(self, table: DynamoTable):
        self._model = table.model(AttemptItem)
        table.connect(self._model)

    def record(self, receiver: str, attempt: Attempt) -> None:
        m = self._model
        expires = attempt.at + self.KEEP
        with dynamo_errors(self.ERROR):
            counter = m(ATTEMPTS_PREFIX + receiver)
            # A re-sent ADD after a lost answer skips a place in the ring: one attempt less shown.
            counter.update(actions=[m.count.add(1), m.expires_at.set(expires)])
            slot = int(counter.count) % DELIVERY_LOG_SIZE
            m(f"{ATTEMPT_PREFIX}{receiver}#{slot}", at=attempt.at, webhook_id=attempt.webhook_id,
              event=attempt.event, job_id=attempt.job_id, attempt=attempt.attempt, ms=attempt.ms,
              outcome=attempt.outcome, status_code=attempt.status_code, reason=attempt.reason,
              breaker=attempt.breaker, next_attempt_at=attempt.next_attempt_at,
              expires_at=expires).save()

    def recent(self, receiver: str) -> list[Attempt]:
        keys = [f"{ATTEMPT_PREFIX}{receiver}#{slot}" for slot in range(DELIVERY_LOG_SIZE)]
        with dynamo_errors(self.ERROR):
            items = list(self._model.batch_get(keys))
        now = datetime.now(timezone.utc)
        # TTL deletes late: an item past its time is gone to the reader already.
        attempts = [_attempt(item) for item in items if item.at is not None and item.expires_at > now]
        return sorted(attempts, key=lambda a: a.at, reverse=True)


def _attempt(item: AttemptItem) -> Attempt:
    return Attempt(at=item.at, webhook_id=item.webhook_id, event=item.event, job_id=item.job_id,
                   attempt=int(item.attempt), ms=int(item.ms), outcome=item.outcome,
                   status_code=None if item.status_code is None else int(item.status_code),
                   reason=item.reason, breaker=item.breaker or "closed",
                   next_attempt_at=item.next_attempt_at)
