"""The WebhookStore contract, run against the in-memory fake and against DynamoDB on moto's
server (the jobs table, where the webhook items live beside the jobs)."""
import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import ConditionFailed
from chalicelib.domain.jobs import DUE_SHARDS, JobStatus
from chalicelib.domain.webhooks import Breaker, Webhook
from tests.fakes import FakeWebhookStore

NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
HOOK = Webhook(owner="alice", url="https://hooks.example.com/h", secret="whsec_MDEyMzQ1Njc4OQ==",
               created_at=NOW)


@pytest.fixture(params=["fake", "dynamo"])
def store(request):
    if request.param == "fake":
        return FakeWebhookStore()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoWebhookStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def test_create_then_get_round_trips_every_field(store):
    store.create_webhook(HOOK)
    assert store.get_webhook("alice") == HOOK
    full = dataclasses.replace(HOOK, owner="bob", previous_secret="whsec_b2xk",
                               previous_until=NOW + timedelta(hours=24),
                               breaker=Breaker(failing_until=NOW, failures=2, suspect_event="msg_1"))
    store.create_webhook(full)
    assert store.get_webhook("bob") == full
    assert store.get_webhook("carol") is None
    # Several at once (a finished job's owner and the service): those that have one, whole.
    assert store.get_webhooks(["alice", "carol", "bob", "alice"]) == {"alice": HOOK, "bob": full}
    assert store.get_webhooks(["carol"]) == {}


def test_create_is_conditional_on_the_owner_having_none(store):
    store.create_webhook(HOOK)
    with pytest.raises(ConditionFailed):
        store.create_webhook(dataclasses.replace(HOOK, secret="whsec_other"))
    assert store.get_webhook("alice").secret == HOOK.secret


def test_update_is_conditional_on_the_secret_it_saw(store):
    store.create_webhook(HOOK)
    rotated = dataclasses.replace(HOOK, secret="whsec_new", previous_secret=HOOK.secret)
    store.update_webhook(rotated, seen=HOOK)
    # A change based on the webhook before the rotation loses: it would undo the rotation.
    with pytest.raises(ConditionFailed):
        store.update_webhook(dataclasses.replace(HOOK, url="https://hooks.example.com/x"), seen=HOOK)
    with pytest.raises(ConditionFailed):
        store.update_webhook(dataclasses.replace(HOOK, owner="nobody"), seen=HOOK)
    assert store.get_webhook("alice") == rotated


def test_the_breaker_is_saved_and_closed_and_a_removed_webhook_stays_removed(store):
    store.create_webhook(HOOK)
    open_ = Breaker(failing_until=NOW + timedelta(minutes=5), failures=3)
    store.save_breaker("alice", open_)
    assert store.get_webhook("alice").breaker == open_
    suspect = Breaker(failing_until=NOW, failures=3, suspect_event="msg_2")
    store.save_breaker("alice", suspect)
    assert store.get_webhook("alice").breaker == suspect
    store.save_breaker("alice", Breaker())
    assert store.get_webhook("alice") == HOOK
    store.delete_webhook("alice")
    store.delete_webhook("alice")
    store.save_breaker("alice", open_)  # must not bring it back
    assert store.get_webhook("alice") is None


def test_webhook_items_stay_out_of_the_sweepers_index(stack):
    from chalicelib.adapters.dynamo_jobs import DynamoJobStore

    settings, _, _ = stack
    DynamoWebhookStore(DynamoTable(settings.table, settings.region, settings.endpoint_url)).create_webhook(HOOK)
    jobs = DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    far = NOW + timedelta(days=3650)
    assert all(jobs.due(status, far, 10, shard=shard) == []
               for status in JobStatus for shard in range(DUE_SHARDS))
