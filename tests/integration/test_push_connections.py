"""The PushConnections contract, run against the in-memory fake and against DynamoDB on moto's
server (the jobs table): the per-owner cap of open connections is one conditional write on
the owner's entry, so it holds across every instance, and a connection found gone leaves the
owner's entry even when its own has expired."""
import threading
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_push import CONNECTION_PREFIX, DynamoPushConnections
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import PushConnectionsFull
from tests.fakes import FakePushConnections

UNTIL = datetime(2026, 12, 1, 12, 10, tzinfo=timezone.utc)


@pytest.fixture(params=["fake", "dynamo"])
def registry(request):
    if request.param == "fake":
        return FakePushConnections()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoPushConnections(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def test_an_owner_opens_at_most_its_cap_and_others_are_not_counted(registry):
    for n in range(3):
        registry.add("alice", f"a{n}", UNTIL, 3)
    registry.add("alice", "a1", UNTIL, 3)  # a retried connect
    with pytest.raises(PushConnectionsFull):
        registry.add("alice", "a3", UNTIL, 3)
    assert registry.of_owner("alice") == ["a0", "a1", "a2"]
    registry.add("bob", "b0", UNTIL, 3)
    registry.remove("a0")
    registry.add("alice", "a3", UNTIL, 3)
    assert registry.of_owner("alice") == ["a1", "a2", "a3"] and registry.of_owner("bob") == ["b0"]


def test_a_refused_connection_leaves_nothing_behind(registry):
    registry.add("alice", "a0", UNTIL, 1)
    with pytest.raises(PushConnectionsFull):
        registry.add("alice", "a1", UNTIL, 1)
    registry.remove("a1")  # nothing to forget: the owner's entry is untouched
    assert registry.of_owner("alice") == ["a0"]


def test_a_connection_opened_since_the_cutoff_is_kept_and_an_older_one_forgotten(registry):
    opened = UNTIL - timedelta(hours=2)
    registry.add("alice", "new", UNTIL, 3, opened_at=opened)
    registry.add("alice", "old", UNTIL, 3, opened_at=opened - timedelta(seconds=30))
    registry.add("alice", "unknown", UNTIL, 3)  # recorded before the time was kept
    cutoff = opened - timedelta(seconds=10)
    for connection_id in ("new", "old", "unknown"):
        registry.remove(connection_id, "alice", opened_before=cutoff)
    assert registry.of_owner("alice") == ["new"]
    registry.remove("new", "alice")  # no cutoff: a disconnect forgets it whatever its age
    assert registry.of_owner("alice") == []


def test_racing_connects_never_pass_the_cap(registry):
    accepted, barrier = [], threading.Barrier(8)

    def connect(n):
        barrier.wait()
        try:
            registry.add("racer", f"r{n}", UNTIL, 3)
            accepted.append(n)
        except PushConnectionsFull:
            pass

    threads = [threading.Thread(target=connect, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) == 3 and len(registry.of_owner("racer")) == 3


def test_a_connection_whose_own_entry_expired_still_leaves_its_owners_set(stack):
    settings, _, _ = stack
    registry = DynamoPushConnections(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    registry.add("carol", "c0", UNTIL, 1)
    registry._connections.get(CONNECTION_PREFIX + "c0").delete()  # what TTL does, late
    registry.remove("c0")  # a disconnect names only the connection: it cannot find the owner
    assert registry.of_owner("carol") == ["c0"]
    registry.remove("c0", owner="carol")  # a send found it gone: the fan-out knows the owner
    assert registry.of_owner("carol") == []
    registry.add("carol", "c1", UNTIL, 1)  # its place under the cap is free again
