"""Webhooks as a use case, over the in-memory stores (chalicelib/usecases/webhooks.py): the
registration rules, which events are queued, and how one delivery attempt goes."""
import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook as StandardWebhook
from standardwebhooks import WebhookVerificationError

from chalicelib.config import Settings
from chalicelib.domain.errors import DeliveryFailed, InvalidRequest, PoisonMessage, RetryLater, WebhookNotFound
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.vocabulary import ErrorCode, Outcome
from chalicelib.http.views import job_body
from chalicelib.ports import WebhookEvent
from chalicelib.usecases import UseCases
from chalicelib.usecases.announce import event_id
from chalicelib.usecases.context import Context
from chalicelib.usecases.webhooks import Delivery
from tests.fakes import (
    Clock,
    FakeJobStore,
    FakeObjectStore,
    FakeSender,
    FakeWebhookQueue,
    FakeWebhookStore,
    ListMetrics,
)
from tests.images import jpeg

PUBLIC = "93.184.215.14"
URL = "https://hooks.example.com/images"


def names(host, port):
    return {"hooks.example.com": [PUBLIC], "moved.example.com": ["10.0.0.9"], "127.0.0.1": ["127.0.0.1"]}[host]


@pytest.fixture
def world():
    # A real clock: receivers check the signature's timestamp against theirs.
    clock = Clock(datetime.now(timezone.utc))
    ctx = Context(settings=Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(), clock=clock,
                  metrics=ListMetrics(), webhooks=FakeWebhookStore(), webhook_queue=FakeWebhookQueue(),
                  webhook_sender=FakeSender(200), resolve=names)
    return UseCases(ctx)


def ready_job(uc, owner="alice"):
    accepted = uc.uploads.accept_upload(owner, jpeg())
    from chalicelib.domain.events import ObjectCreated

    uc.worker.handle_object_created(ObjectCreated(uc.ctx.settings.bucket, accepted.job.original_key, 1))
    job = uc.ctx.jobs.get(accepted.job.job_id)
    assert job.status is JobStatus.READY
    return job


# -- registration --------------------------------------------------------------------------

def test_the_first_put_shows_a_new_secret_later_ones_keep_it_hidden(world):
    first = world.webhooks.register("alice", URL)
    assert first.show_secret and first.webhook.secret.startswith("whsec_")
    StandardWebhook(first.webhook.secret)  # a secret the library accepts
    again = world.webhooks.register("alice", "https://hooks.example.com/other")
    assert not again.show_secret
    assert again.webhook.secret == first.webhook.secret
    assert world.webhooks.show("alice").url == "https://hooks.example.com/other"
    assert world.webhooks.show("bob") is None


def test_registration_refuses_what_the_guard_refuses(world):
    for url in ("https://moved.example.com/h", "http://hooks.example.com/h", "https://127.0.0.1/h"):
        with pytest.raises(InvalidRequest):
            world.webhooks.register("alice", url)
    assert world.webhooks.show("alice") is None


def test_rotation_gives_a_new_secret_and_keeps_the_old_one_signing_for_a_day(world):
    old = world.webhooks.register("alice", URL).webhook
    new = world.webhooks.rotate("alice")
    assert new.secret != old.secret and new.previous_secret == old.secret
    assert new.previous_until == world.ctx.clock() + timedelta(hours=24)
    with pytest.raises(WebhookNotFound):
        world.webhooks.rotate("bob")  # nothing to rotate: the resource is missing, not the request wrong


def test_remove_is_idempotent(world):
    world.webhooks.register("alice", URL)
    world.webhooks.remove("alice")
    world.webhooks.remove("alice")
    assert world.webhooks.show("alice") is None


# -- queuing -------------------------------------------------------------------------------

def test_a_terminal_job_is_queued_once_only_for_an_owner_with_a_webhook(world):
    world.webhooks.register("alice", URL)
    job = ready_job(world)
    ready_job(world, owner="bob")  # no webhook: nothing queued
    assert world.ctx.webhook_queue.sent == [WebhookEvent(event_id(job), "alice", job.job_id)]


def test_cancel_and_failure_are_announced_too(world):
    world.webhooks.register("alice", URL)
    queued = world.uploads.accept_upload("alice", jpeg()).job
    world.manage.cancel("alice", queued.job_id)
    world.manage.cancel("alice", queued.job_id)  # already cancelled: no second event
    failing = world.uploads.accept_upload("alice", jpeg()).job
    world.ctx.objects.objects.pop(failing.original_key)
    from chalicelib.domain.events import ObjectCreated

    outcome = world.worker.handle_object_created(ObjectCreated(world.ctx.settings.bucket, failing.original_key, 1))
    assert outcome is Outcome.FAILED
    assert [e.job_id for e in world.ctx.webhook_queue.sent] == [queued.job_id, failing.job_id]


def test_a_queue_that_is_down_never_fails_the_job(world):
    world.webhooks.register("alice", URL)
    world.ctx.webhook_queue.down = True
    job = ready_job(world)
    assert job.status is JobStatus.READY and world.ctx.webhook_queue.sent == []


# -- delivery ------------------------------------------------------------------------------

def deliver(world, event, count=1, receipt="r-1"):
    return world.webhooks.deliver(event.to_json(), count, receipt)


def test_a_delivery_posts_the_job_as_get_shows_it_signed_per_standard_webhooks(world):
    secret = world.webhooks.register("alice", URL).webhook.secret
    job = ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    assert deliver(world, event) is Delivery.DELIVERED
    (call,) = world.ctx.webhook_sender.calls
    assert call["url"] == URL and [a.ip for a in call["addresses"]] == [PUBLIC]
    assert call["timeout"] == world.ctx.settings.webhook_timeout_seconds
    body = StandardWebhook(secret).verify(call["body"], call["headers"])
    assert body == job_body(job, world.manage.urls(job))
    assert call["headers"]["webhook-id"] == event.event_id
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(world.webhooks.rotate("alice").secret + "x").verify(call["body"], call["headers"])


def test_after_a_rotation_both_secrets_verify_until_the_grace_ends(world):
    old = world.webhooks.register("alice", URL).webhook.secret
    new = world.webhooks.rotate("alice").secret
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    deliver(world, event)
    call = world.ctx.webhook_sender.calls[-1]
    assert len(call["headers"]["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        StandardWebhook(secret).verify(call["body"], call["headers"])
    hook = world.ctx.webhooks.hooks["alice"]
    world.ctx.webhooks.hooks["alice"] = dataclasses.replace(
        hook, previous_until=world.ctx.clock() - timedelta(seconds=1))
    deliver(world, event)
    call = world.ctx.webhook_sender.calls[-1]
    StandardWebhook(new).verify(call["body"], call["headers"])
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(old).verify(call["body"], call["headers"])


def test_a_failed_attempt_comes_back_after_the_schedules_delay_with_the_same_id(world):
    world.webhooks.register("alice", URL)
    world.ctx.webhook_sender.answers = [500, DeliveryFailed("timeout"), 200]
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    delays = world.ctx.settings.webhook_delays
    with pytest.raises(RetryLater) as first:
        deliver(world, event, count=1, receipt="r-1")
    assert first.value.retry_in == delays[0]
    # The owner's endpoint is failing: an attempt before the delay is up waits without a call.
    with pytest.raises(RetryLater):
        deliver(world, event, count=2, receipt="r-2")
    assert len(world.ctx.webhook_sender.calls) == 1
    world.ctx.clock.advance(delays[0])
    with pytest.raises(RetryLater) as second:
        deliver(world, event, count=3, receipt="r-3")
    assert second.value.retry_in == delays[2]
    world.ctx.clock.advance(delays[2])
    assert deliver(world, event, count=4, receipt="r-4") is Delivery.DELIVERED
    assert world.ctx.webhook_queue.delays[0] == ("r-1", delays[0])
    assert [d for _, d in world.ctx.webhook_queue.delays][2] == delays[2]
    ids = {c["headers"]["webhook-id"] for c in world.ctx.webhook_sender.calls}
    assert ids == {event.event_id} and len(world.ctx.webhook_sender.calls) == 3
    assert world.ctx.webhooks.hooks["alice"].failing_until is None  # mended: no more waiting
    metrics = world.ctx.metrics
    assert metrics.total("WebhookFailures", Reason="status") == 1
    assert metrics.total("WebhookFailures", Reason="timeout") == 1
    assert metrics.total("WebhookDeliveries") == 1 and metrics.total("WebhooksDeferred") == 1


def test_the_last_attempt_hands_the_event_to_the_dead_letter_queue_at_once(world):
    world.webhooks.register("alice", URL)
    world.ctx.webhook_sender.answers = [503]
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    with pytest.raises(RetryLater) as last:
        deliver(world, event, count=world.ctx.settings.webhook_attempts)
    assert last.value.retry_in == 1


def test_the_schedule_spans_about_a_day():
    delays = Settings().webhook_delays
    assert 20 * 3600 <= sum(delays) <= 36 * 3600
    assert list(delays) == sorted(delays) and max(delays) <= 43200


def test_a_name_that_now_resolves_inside_is_refused_at_delivery_without_a_call(world):
    world.webhooks.register("alice", URL)
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.ctx.resolve = lambda host, port: ["169.254.169.254"]  # DNS changed after registration
    with pytest.raises(RetryLater):
        deliver(world, event)
    assert world.ctx.webhook_sender.calls == []
    assert world.ctx.metrics.total("WebhookFailures", Reason="refused_address") == 1


def test_events_of_a_removed_webhook_or_a_deleted_job_are_dropped(world):
    world.webhooks.register("alice", URL)
    job = ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.manage.delete("alice", job.job_id)
    assert deliver(world, event) is Delivery.DROPPED
    world.webhooks.remove("alice")
    assert deliver(world, event) is Delivery.DROPPED
    assert world.ctx.webhook_sender.calls == []
    assert world.ctx.metrics.total("WebhooksDropped", Reason="job_gone") == 1
    assert world.ctx.metrics.total("WebhooksDropped", Reason="no_webhook") == 1


def test_an_event_for_someone_elses_job_is_never_sent(world):
    world.webhooks.register("mallory", URL)
    job = ready_job(world, owner="alice")
    forged = WebhookEvent("msg_forged", "mallory", job.job_id)
    assert deliver(world, forged) is Delivery.DROPPED
    assert world.ctx.webhook_sender.calls == []


@pytest.mark.parametrize("body", ["", "[]", "{}", json.dumps({"event_id": "x", "owner": "a"}), "\x00"])
def test_a_body_that_is_no_event_is_poison(world, body):
    world.webhooks.register("alice", URL)
    with pytest.raises(PoisonMessage):
        world.webhooks.deliver(body, 1, "r")


def test_event_ids_are_fixed_by_the_job_and_its_terminal_status(world):
    world.webhooks.register("alice", URL)
    job = ready_job(world)
    assert event_id(job) == event_id(job) and event_id(job).startswith("msg_")
    failed = dataclasses.replace(job, status=JobStatus.FAILED, error_code=ErrorCode.INVALID_IMAGE)
    assert event_id(failed) != event_id(job)
