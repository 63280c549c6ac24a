"""The DeliveryLog contract (each receiver's last attempts, GET /webhook's `deliveries`), run
against the in-memory fake and against DynamoDB on moto's server (the jobs table)."""
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.adapters.dynamo_webhooks import ATTEMPT_PREFIX, ATTEMPTS_PREFIX, DynamoDeliveryLog
from chalicelib.domain.webhooks import DELIVERY_LOG_SIZE, Attempt
from tests.fakes import FakeDeliveryLog

# TTL is read against the real clock: attempts of now, not of a fixed date.
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def attempt(n: int, **fields) -> Attempt:
    return Attempt(**{"at": NOW + timedelta(seconds=n), "webhook_id": f"msg_{n}", "event": "ready",
                      "job_id": f"job-{n}", "attempt": 1, "ms": 12, "outcome": "delivered",
                      "status_code": 200, **fields})


@pytest.fixture(params=["fake", "dynamo"])
def log(request):
    if request.param == "fake":
        return FakeDeliveryLog()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoDeliveryLog(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def test_every_field_round_trips(log):
    failed = attempt(1, status_code=None, reason="tls", outcome="retrying", attempt=3, breaker="open",
                     next_attempt_at=NOW + timedelta(minutes=30))
    test = attempt(2, event="webhook.test", job_id=None, status_code=500, outcome="failed")
    log.record("alice", failed)
    log.record("alice", test)
    assert log.recent("alice") == [test, failed]
    assert log.recent("bob") == []


def test_a_receiver_keeps_only_its_last_attempts(log):
    for n in range(DELIVERY_LOG_SIZE + 5):
        log.record("alice", attempt(n))
    log.record("@service", attempt(100))
    kept = log.recent("alice")
    assert [a.webhook_id for a in kept] == [f"msg_{n}" for n in reversed(range(5, DELIVERY_LOG_SIZE + 5))]
    assert [a.webhook_id for a in log.recent("@service")] == ["msg_100"]


def test_every_item_of_the_log_expires(stack):
    settings, _, clients = stack
    dynamo_client = clients["dynamodb"]
    log = DynamoDeliveryLog(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    log.record("carol", attempt(1))
    for key in (ATTEMPTS_PREFIX + "carol", ATTEMPT_PREFIX + "carol#1"):
        item = dynamo_client.get_item(TableName=settings.table, Key={"pk": {"S": key}})["Item"]
        expires = datetime.fromtimestamp(int(item["expires_at"]["N"]), timezone.utc)
        assert expires == NOW + timedelta(seconds=1) + DynamoDeliveryLog.KEEP
