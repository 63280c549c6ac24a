"""RateStore on DynamoDB through PynamoDB: one item per owner, `rate#<owner>`, in the jobs
table. It has no status, sweep_key or sweep_at, so the due index never sees it.

A lease of tokens is one conditional UpdateItem (one write unit: the item is tiny); DynamoDB
applies each one atomically, so every API process, on every instance, takes from the same
bucket. full_at is a strongly consistent GetItem (half a read unit), asked for only when a
lease's guess of the bucket was wrong. A refused lease reads the item back the same way, to
tell its own re-send from a refusal (dynamo_table.written_once). A take from a full bucket
marks when (`filled_at`): a lease's unspent tokens are given back only while no fill has
happened since the lease (the fill forgave them). An item of the release before has no mark,
and gets no tokens back.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Optional

from pynamodb.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from chalicelib.adapters.dynamo_table import DynamoTable, dynamo_errors, find, written_once
from chalicelib.domain.errors import BucketMoved, ConditionFailed

RATE_PREFIX = "rate#"
UNAVAILABLE = "rate store unavailable"
# A full bucket is the same as no item, so TTL may delete it once full_at has passed; the
# margin covers the clocks of two instances disagreeing.
_EXPIRY_MARGIN_SECONDS = 60


class RateItem(Model):
    """Unbound: DynamoRateStore binds a subclass to the table."""

    pk = UnicodeAttribute(hash_key=True)
    full_at = NumberAttribute()
    filled_at = NumberAttribute(null=True)
    expires_at = TTLAttribute()
    # A fresh id from each lease (absent on items written before it): a lease botocore
    # re-sent after a lost answer, refused by its own landing, finds its id here.
    write_id = UnicodeAttribute(null=True)


class DynamoRateStore:
    def __init__(self, table: DynamoTable, prefix: str = RATE_PREFIX):
        """`prefix` keeps another bucket's items apart (a webhook receiver's turns)."""
        self._prefix = prefix
        self._model = table.model(RateItem)
        table.connect(self._model)

    def full_at(self, owner: str) -> Optional[float]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._model, self._prefix + owner, attributes_to_get=["full_at"])
        return None if item is None else float(item.full_at)

    def take_from_full(self, owner: str, now: float, cost: float, depth: float) -> float:
        m = self._model
        return self._update(owner, [m.full_at.set(now + cost), m.filled_at.set(now)],
                            m.full_at.does_not_exist() | (m.full_at <= now), now + depth)

    def take(self, owner: str, now: float, cost: float, depth: float, unspent: float = 0.0,
             leased_at: float = 0.0) -> float:
        m = self._model
        condition = (m.full_at > now) & (m.full_at <= now + depth - (cost - unspent))
        if unspent:
            condition &= m.filled_at <= leased_at
        return self._update(owner, [m.full_at.add(cost - unspent)], condition, now + depth)

    def _update(self, owner: str, actions: list, condition, latest_full_at: float) -> float:
        m = self._model
        expires = datetime.fromtimestamp(math.ceil(latest_full_at) + _EXPIRY_MARGIN_SECONDS, timezone.utc)
        item = m(self._prefix + owner)

        def update(write_id: str) -> None:
            # Never applied twice: a re-send of a lease that landed could pass `take`'s
            # condition again and charge the owner twice; refused, it is recognised below.
            not_again = m.write_id.does_not_exist() | (m.write_id != write_id)
            with dynamo_errors(UNAVAILABLE, conditional=True):
                item.update(actions=[*actions, m.expires_at.set(expires), m.write_id.set(write_id)],
                            condition=condition & not_again)

        found = []

        def read() -> Optional[RateItem]:
            with dynamo_errors(UNAVAILABLE):
                found.append(find(m, self._prefix + owner, attributes_to_get=["full_at", "write_id"]))
            return found[-1]

        # A lease whose answer was lost has taken its tokens: taken for a refusal, the
        # caller would lease again and the owner pay twice.
        try:
            landed = written_once(update, read)
        except ConditionFailed:
            bucket = found[-1] if found else None
            raise BucketMoved(None if bucket is None else float(bucket.full_at)) from None
        return float((landed or item).full_at)
