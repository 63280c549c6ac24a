"""WaitSlots on DynamoDB through PynamoDB: one item per slot, `wait#<owner>#<n>`, in the jobs
table (no status or sweep_at, so the due index never sees it; TTL removes idle ones).

A slot is taken by one conditional write (nobody holds it, or its holder's time is over) and
given back by one conditional delete (only by its holder): two writes per held request, and
no count that a crashed instance could leave wrong.
"""
from __future__ import annotations

import zlib
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Optional

from pynamodb.attributes import TTLAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.models import Model

from chalicelib.adapters.dynamo_table import DynamoTable, dynamo_errors
from chalicelib.domain.errors import ConditionFailed

WAIT_PREFIX = "wait#"
# An idle slot's item stays this long past its holder's time, then TTL deletes it.
_KEEP = timedelta(hours=1)


class WaitSlotItem(Model):
    """Unbound: DynamoWaitSlots binds a subclass to the table."""

    pk = UnicodeAttribute(hash_key=True)
    holder = UnicodeAttribute()
    held_until = UTCDateTimeAttribute()
    expires_at = TTLAttribute()


class DynamoWaitSlots:
    # A subclass counts something else in the same way (adapters/dynamo_webhooks.py).
    PREFIX = WAIT_PREFIX
    ITEM: type[Model] = WaitSlotItem
    ERROR = "wait slots unavailable"

    def __init__(self, table: DynamoTable):
        self._model = table.model(self.ITEM)
        table.connect(self._model)

    def _key(self, owner: str, slot: int) -> str:
        return self.PREFIX + f"{owner}#{slot}"

    def take(self, owner: str, holder: str, until: datetime, now: datetime, slots: int) -> Optional[int]:
        m = self._model
        # Start at a slot of the holder's own, so concurrent requests rarely try the same one.
        first = zlib.crc32(holder.encode()) % slots
        for step in range(slots):
            slot = (first + step) % slots
            item = m(self._key(owner, slot))
            try:
                with dynamo_errors(self.ERROR, conditional=True):
                    item.update(
                        actions=[m.holder.set(holder), m.held_until.set(until), m.expires_at.set(until + _KEEP)],
                        # Or already this holder's: its own earlier send landed, and
                        # botocore sent it again after a lost answer (holders are unique).
                        condition=m.pk.does_not_exist() | (m.held_until < now) | (m.holder == holder),
                    )
                return slot
            except ConditionFailed:
                continue
        return None

    def give_back(self, owner: str, slot: int, holder: str) -> None:
        m = self._model
        # Refused: taken over after its time ran out, or already given back.
        with suppress(ConditionFailed), dynamo_errors(self.ERROR, conditional=True):
            m(self._key(owner, slot)).delete(condition=m.holder == holder)
