"""Push on DynamoDB: the connection registry, and the job changes read from the table's stream.

The registry is two kinds of item in the jobs table, neither with a status or sweep_at, so
the due index never sees them: `push#<owner>`, the set of the owner's connection ids (one
read finds them all), and `push-connection#<id>`, its owner (what a disconnect, which names
only the connection, needs). Both carry a TTL past API Gateway's 2-hour limit, so an entry
whose disconnect never came goes by itself, if no send has found it gone first.
"""
from __future__ import annotations

from contextlib import suppress
from datetime import datetime
from typing import Optional

from pynamodb.attributes import TTLAttribute, UnicodeAttribute, UnicodeSetAttribute, UTCDateTimeAttribute
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.condition import size
from pynamodb.models import Model

from chalicelib.adapters.dynamo_jobs import JOB_PREFIX, DynamoJobStore, JobItem
from chalicelib.adapters.dynamo_table import DynamoTable, dynamo_errors, find
from chalicelib.domain.errors import ConditionFailed, PushConnectionsFull
from chalicelib.domain.jobs import Job

OWNER_PUSH_PREFIX = "push#"
CONNECTION_PREFIX = "push-connection#"
UNAVAILABLE = "push connections unavailable"


class OwnerConnectionsItem(Model):
    pk = UnicodeAttribute(hash_key=True)
    connections = UnicodeSetAttribute(null=True)  # DynamoDB drops an empty set
    expires_at = TTLAttribute()


class ConnectionItem(Model):
    pk = UnicodeAttribute(hash_key=True)
    owner = UnicodeAttribute()
    opened_at = UTCDateTimeAttribute(null=True)  # null: recorded before it was kept
    expires_at = TTLAttribute()


class DynamoPushConnections:
    def __init__(self, table: DynamoTable):
        self._owners = table.model(OwnerConnectionsItem)
        self._connections = table.model(ConnectionItem)
        table.connect(self._owners, self._connections)

    def add(self, owner: str, connection_id: str, until: datetime, limit: int,
            opened_at: Optional[datetime] = None) -> None:
        o = self._owners
        item = self._connections(CONNECTION_PREFIX + connection_id, owner=owner, opened_at=opened_at,
                                 expires_at=until)
        try:
            with dynamo_errors(UNAVAILABLE, conditional=True):
                # The owner's entry last: a connection the set names always has its owner item.
                item.save()
                # The cap is the set's size, checked in the same write that grows it, so it holds
                # across every instance; a retried connect is already in the set.
                o(OWNER_PUSH_PREFIX + owner).update(
                    actions=[o.connections.add({connection_id}), o.expires_at.set(until)],
                    condition=(o.connections.does_not_exist() | (size(o.connections) < limit)
                               | o.connections.contains(connection_id)))
        except ConditionFailed:
            self._forget_item(item)
            raise PushConnectionsFull(owner) from None

    def remove(self, connection_id: str, owner: Optional[str] = None,
               opened_before: Optional[datetime] = None) -> None:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._connections, CONNECTION_PREFIX + connection_id)
            if (item is not None and opened_before is not None and item.opened_at is not None
                    and item.opened_at >= opened_before):
                return  # still opening
            owner = item.owner if item is not None else owner
            if owner is not None:
                self._leave_set(owner, connection_id)
            if item is not None:
                item.delete()

    def _leave_set(self, owner: str, connection_id: str) -> None:
        o = self._owners
        # Only an existing entry: an update would otherwise create one with no time to go.
        with suppress(ConditionFailed), dynamo_errors(UNAVAILABLE, conditional=True):
            o(OWNER_PUSH_PREFIX + owner).update(actions=[o.connections.delete({connection_id})],
                                                condition=o.pk.exists())

    @staticmethod
    def _forget_item(item) -> None:
        with suppress(PynamoDBException):  # its time removes it; the owner's set never named it
            item.delete()

    def of_owner(self, owner: str) -> list[str]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._owners, OWNER_PUSH_PREFIX + owner)
        return [] if item is None else sorted(item.connections or ())


class DynamoJobChanges:
    """JobChanges from the jobs table's stream (NEW_AND_OLD_IMAGES), as Lambda hands it over."""

    def changed_jobs(self, records: list[dict]) -> list[Job]:
        changed = []
        for record in records:
            if record.get("eventName") not in ("INSERT", "MODIFY"):
                continue
            images = record.get("dynamodb", {})
            new = _job(images.get("NewImage"))
            if new is None:
                continue
            old = _job(images.get("OldImage"))
            if old is None or old.version != new.version:
                changed.append(new)
        return changed


def _job(image: Optional[dict]) -> Optional[Job]:
    if not image or not image.get("pk", {}).get("S", "").startswith(JOB_PREFIX):
        return None
    return DynamoJobStore._to_job(JobItem.from_raw_data(image))
