"""The WaitSlots contract, run against the in-memory fake and against DynamoDB on moto's
server (the jobs table, where the slots live beside the jobs): the per-owner cap of held
requests holds across processes because every instance takes its slot from the table."""
import threading
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_waits import DynamoWaitSlots
from chalicelib.adapters.dynamo_table import DynamoTable
from tests.fakes import FakeWaitSlots

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(seconds=23)


@pytest.fixture(params=["fake", "dynamo"])
def slots(request):
    if request.param == "fake":
        return FakeWaitSlots()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoWaitSlots(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def test_an_owner_gets_at_most_its_slots_and_others_are_not_counted(slots):
    taken = [slots.take("alice", f"h{i}", LATER, NOW, 3) for i in range(4)]
    assert sorted(t for t in taken if t is not None) == [0, 1, 2] and taken.count(None) == 1
    assert slots.take("bob", "b", LATER, NOW, 3) is not None


def test_a_slot_given_back_is_free_again_and_only_its_holder_gives_it_back(slots):
    first = slots.take("alice", "h1", LATER, NOW, 1)
    slots.give_back("alice", first, "someone-else")
    assert slots.take("alice", "h2", LATER, NOW, 1) is None
    slots.give_back("alice", first, "h1")
    slots.give_back("alice", first, "h1")  # idempotent
    assert slots.take("alice", "h2", LATER, NOW, 1) == first


def test_a_holder_that_never_gave_back_loses_its_slot_when_its_time_is_over(slots):
    assert slots.take("alice", "crashed", LATER, NOW, 1) is not None
    assert slots.take("alice", "next", LATER, NOW + timedelta(seconds=5), 1) is None
    assert slots.take("alice", "next", LATER + timedelta(seconds=30), LATER + timedelta(seconds=1), 1) is not None


def test_racing_holders_never_share_a_slot(slots):
    won, lock = [], threading.Lock()

    def take(i):
        slot = slots.take("alice", f"h{i}", LATER, NOW, 4)
        with lock:
            won.append(slot)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = [s for s in won if s is not None]
    assert sorted(held) == [0, 1, 2, 3]


def test_the_slots_stay_out_of_the_due_index_and_expire(stack):
    settings, _, clients = stack
    DynamoWaitSlots(DynamoTable(settings.table, settings.region, settings.endpoint_url)).take("alice", "h", LATER, NOW, 2)
    items = clients["dynamodb"].scan(TableName=settings.table)["Items"]
    slots = [item for item in items if item["pk"]["S"].startswith("wait#alice#")]
    assert len(slots) == 1
    # No sweep_key, so the due index does not hold it; a TTL attribute, so idle slots go.
    assert "sweep_key" not in slots[0] and "status" not in slots[0] and "expires_at" in slots[0]
