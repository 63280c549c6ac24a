"""What the stores make of DynamoDB's refusals and failures (dynamo_table.dynamo_errors): the
failed condition of a write that has one is ConditionFailed (or the store's own reading of
it); any other error is TransientError with the store's message, an outage the caller may
answer 503 to or retry.

ConditionalCheckFailedException is an answer DynamoDB gives only to a write with a condition:
not to a read, nor to a transaction (whose refusal is TransactionCanceledException, read by
its reasons). Should it come to one of those anyway, it stays an outage, as each store's own
except blocks had it before issue 38 step 3, and is never taken for "the item moved on"
(which callers act on: a create would be answered 500, a read end a job).

Answers are DynamoDB's own bodies returned at botocore's `before-send`, so PynamoDB parses
them as it would from AWS; with no retries, each reaches the store."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from botocore.awsrequest import AWSResponse

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_push import DynamoPushConnections
from chalicelib.adapters.dynamo_rates import DynamoRateStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.adapters.dynamo_waits import DynamoWaitSlots
from chalicelib.adapters.dynamo_webhooks import DynamoDeliverySlots, DynamoWebhookStore
from chalicelib.domain.errors import ConditionFailed, TransientError
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.webhooks import Webhook

NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
JOB_ID = "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
HOOK = Webhook(owner="alice", url="https://hooks.example.com/h", secret="whsec_MDEyMzQ1Njc4OQ==",
               created_at=NOW)
CONDITION_FAILED = "ConditionalCheckFailedException"
THROTTLED = "ProvisionedThroughputExceededException"


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


class Answers:
    """Every call of `operation` is answered with the error `code`, until cleared."""

    def __init__(self):
        self.operation = self.code = None
        self.answered = 0

    def hook(self, client):
        client.meta.events.register_first("before-send", self._before_send)
        return client

    def _before_send(self, request, **_):
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        if self.operation is None or not target.endswith("." + self.operation):
            return None
        self.answered += 1
        body = {"__type": f"com.amazonaws.dynamodb.v20120810#{self.code}", "message": "injected"}
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.0"},
                           _Raw(json.dumps(body).encode()))


@pytest.fixture
def answers():
    return Answers()


@pytest.fixture
def table(stack, answers):
    settings, _, _ = stack
    return DynamoTable(settings.table, settings.region, settings.endpoint_url, prepare_client=answers.hook,
                       connection={"connect_timeout_seconds": 2, "read_timeout_seconds": 5,
                                   "max_retry_attempts": 0})


def new_job() -> Job:
    return Job(job_id=JOB_ID, owner="alice", status=JobStatus.QUEUED, created_at=NOW, updated_at=NOW,
               expires_at=NOW + timedelta(days=7), original_key=f"originals/{JOB_ID}", sweep_at=NOW)


# (store, operation answered, the call, the message of its TransientError): calls that have
# no condition, each answered a failed condition.
UNCONDITIONAL = [
    ("jobs", "TransactWriteItems", lambda s: s.create(new_job(), 20), "job table unavailable"),
    ("jobs", "GetItem", lambda s: s.get(JOB_ID), "job table unavailable"),
    ("jobs", "GetItem", lambda s: s.active_jobs("alice"), "job table unavailable"),
    ("jobs", "GetItem", lambda s: s.get_idempotency("scope-1"), "job table unavailable"),
    ("jobs", "BatchGetItem", lambda s: s.objects_of([JOB_ID]), "job table unavailable"),
    ("jobs", "Query", lambda s: s.owned("alice", 5), "job table unavailable"),
    ("jobs", "Query", lambda s: s.due(JobStatus.QUEUED, NOW, 5, shard=0), "job table unavailable"),
    ("webhooks", "GetItem", lambda s: s.get_webhook("alice"), "webhook store unavailable"),
    ("webhooks", "BatchGetItem", lambda s: s.get_webhooks(["alice", "@service"]), "webhook store unavailable"),
    ("webhooks", "DeleteItem", lambda s: s.delete_webhook("alice"), "webhook store unavailable"),
    ("rates", "GetItem", lambda s: s.full_at("alice"), "rate store unavailable"),
    ("push", "GetItem", lambda s: s.of_owner("alice"), "push connections unavailable"),
    ("push", "GetItem", lambda s: s.remove("c-1", owner="alice"), "push connections unavailable"),
    ("delivery", "BatchGetItem", lambda s: s.recent_hold("alice", 2), "delivery slots unavailable"),
]

STORES = {"jobs": DynamoJobStore, "webhooks": DynamoWebhookStore, "rates": DynamoRateStore,
          "push": DynamoPushConnections, "waits": DynamoWaitSlots, "delivery": DynamoDeliverySlots}


@pytest.mark.parametrize("store, operation, call, message", UNCONDITIONAL,
                         ids=[f"{s}-{o}-{i}" for i, (s, o, _, _) in enumerate(UNCONDITIONAL)])
def test_a_failed_condition_answered_to_a_call_without_one_is_an_outage(table, answers, store, operation,
                                                                        call, message):
    made = STORES[store](table)
    answers.operation, answers.code = operation, CONDITION_FAILED
    with pytest.raises(TransientError, match=message):
        call(made)
    assert answers.answered == 1


# Writes with a condition: its failure is the store's refusal; throttling is an outage.
CONDITIONAL = [
    ("jobs", "UpdateItem", lambda s: s.claim(JOB_ID, NOW, timedelta(seconds=120), 3), "job table unavailable"),
    ("webhooks", "PutItem", lambda s: s.create_webhook(HOOK), "webhook store unavailable"),
    ("rates", "UpdateItem", lambda s: s.take_from_full("alice", 1000.0, 1.0, 10.0), "rate store unavailable"),
]


@pytest.mark.parametrize("store, operation, call, message", CONDITIONAL,
                         ids=[f"{s}-{o}" for s, o, _, _ in CONDITIONAL])
def test_a_conditional_write_is_refused_by_its_condition_and_fails_by_an_outage(table, answers, store,
                                                                               operation, call, message):
    made = STORES[store](table)
    answers.operation, answers.code = operation, THROTTLED
    with pytest.raises(TransientError, match=message):
        call(made)
    answers.code = CONDITION_FAILED  # (the claim's refusal is read back: no job of this call's)
    with pytest.raises(ConditionFailed):
        call(made)


def test_refusals_that_mean_nothing_to_do_are_swallowed_and_outages_are_not(table, answers):
    """Giving back a slot that was taken over, or marking a deleted webhook's breaker."""
    slots, hooks = DynamoWaitSlots(table), DynamoWebhookStore(table)
    slots.give_back("alice", 0, "someone-else")
    hooks.save_breaker("nobody", HOOK.breaker)
    answers.operation, answers.code = "DeleteItem", THROTTLED
    with pytest.raises(TransientError, match="wait slots unavailable"):
        slots.give_back("alice", 0, "someone-else")
