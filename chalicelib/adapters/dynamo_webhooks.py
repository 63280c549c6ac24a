"""WebhookStore on DynamoDB through PynamoDB: one item per owner, `webhook#<owner>`, in the
jobs table (it has no status or sweep_at, so the due index never sees it). DeliverySlots
beside it: one item per slot, `deliver#<receiver>#<n>`, taken and given back as the wait
slots are (adapters/dynamo_waits.py), and TTL removes idle ones.

The signing secret is stored as it is, because signing needs it: the table is encrypted
at rest (SSESpecification in infra/template.yaml), only the delivery and the registration
routes read it, and the API shows it only when it is created or rotated.
"""
from __future__ import annotations

from contextlib import suppress
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.models import Model

from chalicelib.adapters.dynamo_table import DynamoTable, dynamo_errors, find, written_once
from chalicelib.adapters.dynamo_waits import DynamoWaitSlots
from chalicelib.domain.errors import ConditionFailed
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.webhooks import Breaker, Webhook

WEBHOOK_PREFIX = "webhook#"
DELIVER_PREFIX = "deliver#"
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


class DynamoWebhookStore:
    def __init__(self, table: DynamoTable):
        self._model = table.model(WebhookItem)
        table.connect(self._model)

    def get_webhook(self, owner: str) -> Optional[Webhook]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._model, WEBHOOK_PREFIX + owner)
        if item is None:
            return None
        return Webhook(owner=owner, url=item.url, secret=item.secret, created_at=item.created_at,
                       previous_secret=item.previous_secret, previous_until=item.previous_until,
                       breaker=Breaker(failing_until=item.failing_until, failures=int(item.failures or 0),
                                       suspect_event=item.suspect_event),
                       events=tuple(JobStatus(s) for s in (item.events or "").split(",") if s))

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
