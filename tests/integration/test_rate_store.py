"""The RateStore contract, run against the in-memory fake and against DynamoDB on moto's server."""
import pytest

from chalicelib.adapters.dynamo_rates import RATE_PREFIX, DynamoRateStore
from chalicelib.domain.errors import ConditionFailed
from tests.fakes import FakeRateStore

NOW = 1_784_109_600.0  # 2026-07-15T10:00:00Z
COST, DEPTH = 0.5, 2.0  # 2 a second, bursts of 4


@pytest.fixture(params=["fake", "dynamo"])
def rates(request):
    if request.param == "fake":
        return FakeRateStore()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoRateStore(settings.table, settings.region, settings.endpoint_url)


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


def test_owners_have_their_own_buckets(rates):
    rates.take_from_full("alice", NOW, COST, DEPTH)
    assert rates.take_from_full("bob", NOW, COST, DEPTH) == NOW + COST


def test_a_rate_item_expires_and_no_sweep_index_sees_it(stack):
    settings, _, clients = stack
    rates = DynamoRateStore(settings.table, settings.region, settings.endpoint_url)
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
