"""The RateStore contract, run against the in-memory fake and against DynamoDB on moto's server."""
import pytest

from chalicelib.adapters.dynamo_rates import RATE_PREFIX, DynamoRateStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import BucketMoved, ConditionFailed
from tests.fakes import FakeRateStore

NOW = 1_784_109_600.0  # 2026-07-15T10:00:00Z
COST, DEPTH = 0.5, 2.0  # 2 a second, bursts of 4


@pytest.fixture(params=["fake", "dynamo"])
def rates(request):
    if request.param == "fake":
        return FakeRateStore()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoRateStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def test_a_full_bucket_takes_from_full_only(rates):
    with pytest.raises(ConditionFailed):
        rates.take("alice", NOW, COST, DEPTH)
    assert rates.take_from_full("alice", NOW, COST, DEPTH) == NOW + COST
    with pytest.raises(ConditionFailed):
        rates.take_from_full("alice", NOW, COST, DEPTH)


def test_take_stops_at_an_empty_bucket(rates):
    rates.take_from_full("alice", NOW, COST, DEPTH)
    assert [rates.take("alice", NOW, COST, DEPTH) for _ in range(3)] == [NOW + 1.0, NOW + 1.5, NOW + 2.0]
    with pytest.raises(ConditionFailed):
        rates.take("alice", NOW, COST, DEPTH)
    assert rates.take("alice", NOW + COST, COST, DEPTH) == NOW + 2.5  # a token came back


def test_a_bucket_full_again_takes_from_full(rates):
    rates.take_from_full("alice", NOW, COST, DEPTH)
    with pytest.raises(ConditionFailed):
        rates.take("alice", NOW + COST, COST, DEPTH)
    assert rates.take_from_full("alice", NOW + COST, COST, DEPTH) == NOW + 2 * COST


def test_a_refusal_says_what_the_bucket_holds(rates):
    with pytest.raises(BucketMoved) as full:
        rates.take("alice", NOW, COST, DEPTH)
    assert full.value.full_at is None  # nothing stored: full
    rates.take_from_full("alice", NOW, 4 * COST, DEPTH)
    with pytest.raises(BucketMoved) as empty:
        rates.take("alice", NOW, COST, DEPTH)
    assert empty.value.full_at == NOW + 4 * COST
    with pytest.raises(BucketMoved) as taken:
        rates.take_from_full("alice", NOW, COST, DEPTH)
    assert taken.value.full_at == NOW + 4 * COST


def test_owners_have_their_own_buckets(rates):
    rates.take_from_full("alice", NOW, COST, DEPTH)
    assert rates.take_from_full("bob", NOW, COST, DEPTH) == NOW + COST


def test_a_lease_expired_unspent_is_given_back_with_the_next_take(rates):
    rates.take_from_full("alice", NOW, 4 * COST, DEPTH)  # a lease of 4 at NOW: 3 left unspent
    assert rates.take("alice", NOW + COST, COST, DEPTH, 3 * COST, NOW) == NOW + 2 * COST


def test_a_fill_since_the_lease_forgave_its_unspent_tokens(rates):
    rates.take_from_full("alice", NOW, 4 * COST, DEPTH)
    rates.take_from_full("alice", NOW + 3.0, COST, DEPTH)  # full again, taken from full
    with pytest.raises(ConditionFailed):
        rates.take("alice", NOW + 3.0, COST, DEPTH, 3 * COST, NOW)
    assert rates.take("alice", NOW + 3.0, COST, DEPTH) == NOW + 3.0 + 2 * COST


def test_an_item_of_the_release_before_gives_no_tokens_back(stack):
    """Its takes from full marked no fill: a fill may have forgiven the tokens already."""
    settings, _, clients = stack
    rates = DynamoRateStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    clients["dynamodb"].put_item(TableName=settings.table, Item={
        "pk": {"S": RATE_PREFIX + "alice"}, "full_at": {"N": str(NOW + 4 * COST)},
        "expires_at": {"N": str(int(NOW + 120))}})
    with pytest.raises(ConditionFailed):
        rates.take("alice", NOW + COST, COST, DEPTH, 3 * COST, NOW)
    assert rates.take("alice", NOW + COST, COST, DEPTH) == NOW + 5 * COST


def test_a_store_with_its_own_prefix_reads_its_own_bucket(stack):
    """A webhook receiver's turns (another prefix, one table) are not the owner's requests."""
    from chalicelib.adapters.dynamo_webhooks import TURN_PREFIX

    settings, _, _ = stack
    table = DynamoTable(settings.table, settings.region, settings.endpoint_url)
    requests, turns = DynamoRateStore(table), DynamoRateStore(table, prefix=TURN_PREFIX)
    requests.take_from_full("alice", NOW, 4 * COST, DEPTH)
    assert turns.full_at("alice") is None
    turns.take_from_full("alice", NOW, COST, DEPTH)
    assert turns.full_at("alice") == NOW + COST
    assert requests.full_at("alice") == NOW + 4 * COST


def test_a_rate_item_expires_and_the_due_index_never_sees_it(stack):
    settings, _, clients = stack
    rates = DynamoRateStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    rates.take_from_full("alice", NOW, COST, DEPTH)
    rates.take("alice", NOW, COST, DEPTH)
    dynamodb = clients["dynamodb"]
    item = dynamodb.get_item(TableName=settings.table, Key={"pk": {"S": RATE_PREFIX + "alice"}})["Item"]
    ttl = dynamodb.describe_time_to_live(TableName=settings.table)["TimeToLiveDescription"]
    # Expires once the bucket is full again (a full bucket is no item), never before.
    assert float(item[ttl["AttributeName"]]["N"]) >= NOW + DEPTH
    assert float(item[ttl["AttributeName"]]["N"]) <= NOW + DEPTH + 120
    indexes = dynamodb.describe_table(TableName=settings.table)["Table"]["GlobalSecondaryIndexes"]
    assert indexes
    for index in (i["IndexName"] for i in indexes):
        assert dynamodb.scan(TableName=settings.table, IndexName=index)["Items"] == []


class Counted:
    """The store, counting the writes (each a write unit, a failed condition too) and reads."""

    def __init__(self, rates):
        self.rates, self.writes, self.reads = rates, 0, 0

    def take_from_full(self, *args):
        self.writes += 1
        return self.rates.take_from_full(*args)

    def take(self, *args):
        self.writes += 1
        return self.rates.take(*args)

    def full_at(self, owner):
        self.reads += 1
        return self.rates.full_at(owner)


def test_the_full_at_read_sees_what_the_leases_wrote(rates):
    assert rates.full_at("alice") is None
    rates.take_from_full("alice", NOW, 4 * COST, DEPTH)  # a lease of four tokens
    assert rates.full_at("alice") == NOW + 4 * COST


def test_instances_leasing_from_dynamodb_hold_the_owners_limit_in_few_writes(stack):
    """Three API instances on one table, one owner far past its rate on all of them, another
    owner now and then: the limit holds within 10 %, a write serves more than one accepted
    request, and the other owner is never refused."""
    from datetime import datetime, timezone

    from chalicelib.config import Settings
    from chalicelib.domain.errors import RateLimited
    from chalicelib.usecases.admission import Admission
    from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context

    settings, _, _ = stack
    table = Counted(DynamoRateStore(DynamoTable(settings.table, settings.region, settings.endpoint_url)))
    clock = Clock(datetime(2026, 7, 15, 10, 0, 0, 123456, tzinfo=timezone.utc))
    start = clock.now.timestamp()
    limits = Settings(owner_requests_per_second=10, owner_burst=40)
    slept = []
    instances = [Admission(fake_context(settings=limits, jobs=FakeJobStore(), objects=FakeObjectStore(),
                                        rates=table, clock=clock),
                           monotonic=lambda: clock.now.timestamp() - start, sleep=slept.append)
                 for _ in range(3)]

    def accepted(instance, owner):
        """Answered inside the 10 s: a request given a token due later waits for it."""
        slept.clear()
        try:
            instance.check_rate(owner)
        except RateLimited:
            return False
        return clock.now.timestamp() + sum(slept) <= start + 10

    taken = sent = 0
    for step in range(200):  # 10 s, each instance asked 4 times each 50 ms: 24x the rate
        for instance in instances:
            for _ in range(4):
                sent += 1
                taken += accepted(instance, "alice")
        if step % 20 == 0:
            assert accepted(instances[step // 20 % 3], "bob")
        clock.advance(0.05)
    limit = 40 + 10 * 10
    assert 0.9 * limit <= taken <= limit
    # Three instances waking for the same tokens cost failed writes: still under one write an
    # accepted request (the write a request before leases: 1.2-1.5 here), one per 10 sent.
    assert table.writes <= taken
    assert table.writes * 10 <= sent
