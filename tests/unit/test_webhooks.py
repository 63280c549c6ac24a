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
from chalicelib.domain.webhooks import Breaker, WebhookEvent
from chalicelib.usecases import UseCases
from chalicelib.usecases.announce import event_id
from chalicelib.usecases.webhooks import Delivery
from tests.fakes import (
    Clock,
    FakeJobStore,
    FakeObjectStore,
    FakeSender,
    FakeWebhookQueue,
    FakeWebhookStore,
    ListMetrics,
    fake_context,
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
    ctx = fake_context(settings=Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(), clock=clock,
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

def deliver(world, event, receipt="r-1"):
    return world.webhooks.deliver(event.to_json(), receipt)


def test_a_delivery_posts_the_job_as_get_shows_it_signed_per_standard_webhooks(world):
    secret = world.webhooks.register("alice", URL).webhook.secret
    job = ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    assert deliver(world, event) is Delivery.DELIVERED
    (call,) = world.ctx.webhook_sender.calls
    assert call["url"] == URL and [a.ip for a in call["addresses"]] == [PUBLIC]
    assert call["timeout"] == world.ctx.settings.webhook_attempt_seconds
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


def requeued(world):
    """The copy the last failure or deferral queued, with the delay it was sent with."""
    queue = world.ctx.webhook_queue
    return queue.sent[-1], queue.sent_delays[-1]


def test_a_failed_attempt_queues_a_copy_due_after_the_schedules_delay_with_the_same_id(world):
    world.webhooks.register("alice", URL)
    world.ctx.webhook_sender.answers = [500, DeliveryFailed("timeout"), 200]
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    delays = world.ctx.settings.webhook_delays
    assert deliver(world, event) is Delivery.RETRYING
    first, sent_delay = requeued(world)
    assert (first.attempts, sent_delay) == (1, delays[0])
    assert first.not_before == world.ctx.clock() + timedelta(seconds=delays[0])
    # A copy that comes before it is due is set to come back then, without a call.
    with pytest.raises(RetryLater) as early:
        deliver(world, first, receipt="r-2")
    assert early.value.retry_in == delays[0] and world.ctx.webhook_queue.delays == [("r-2", delays[0])]
    assert len(world.ctx.webhook_sender.calls) == 1
    world.ctx.clock.advance(delays[0])
    assert deliver(world, first) is Delivery.RETRYING
    second, sent_delay = requeued(world)
    assert (second.attempts, sent_delay) == (2, delays[1])
    world.ctx.clock.advance(delays[1])
    assert deliver(world, second) is Delivery.DELIVERED
    ids = {c["headers"]["webhook-id"] for c in world.ctx.webhook_sender.calls}
    assert ids == {event.event_id} and len(world.ctx.webhook_sender.calls) == 3
    assert world.ctx.webhooks.hooks["alice"].breaker == Breaker()  # mended: no more waiting
    metrics = world.ctx.metrics
    assert metrics.total("WebhookFailures", Reason="status") == 1
    assert metrics.total("WebhookFailures", Reason="timeout") == 1
    assert metrics.total("WebhookDeliveries") == 1


def test_the_last_attempt_hands_the_event_to_the_dead_letter_queue(world):
    world.webhooks.register("alice", URL)
    world.ctx.webhook_sender.answers = [503]
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    last = dataclasses.replace(event, attempts=world.ctx.settings.webhook_attempts - 1)
    assert deliver(world, last) is Delivery.DEAD_LETTERED
    (dead,) = world.ctx.webhook_queue.dead_letters
    assert dead.event_id == event.event_id and dead.attempts == world.ctx.settings.webhook_attempts
    assert len(world.ctx.webhook_queue.sent) == 1  # no copy queued


def owners_events(world, count):
    """`count` ready jobs of alice's, the events they queued."""
    for _ in range(count):
        ready_job(world)
    return list(world.ctx.webhook_queue.sent)


class RejectsOne(FakeSender):
    """A receiver that refuses one job's body with `status` and takes every other."""

    def __init__(self, job_id, status):
        super().__init__(200)
        self.job_id, self.status = job_id, status

    def post(self, url, addresses, headers, body, timeout):
        super().post(url, addresses, headers, body, timeout)
        return self.status if json.loads(body)["job_id"] == self.job_id else 200


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_receiver_rejecting_one_event_holds_back_none_of_the_others(world, status):
    world.webhooks.register("alice", URL)
    bad, *good = owners_events(world, 4)
    world.ctx.webhook_sender = RejectsOne(bad.job_id, status)
    assert deliver(world, bad) is Delivery.RETRYING
    for event in good:
        assert deliver(world, event) is Delivery.DELIVERED
    # Its retry is refused again, and still holds back nobody.
    retry, _ = requeued(world)
    world.ctx.clock.advance(world.ctx.settings.webhook_delays[0])
    assert deliver(world, retry) is Delivery.RETRYING
    assert not world.ctx.webhooks.hooks["alice"].breaker.is_open(world.ctx.clock())
    assert world.ctx.metrics.total("WebhooksDeferred") == 0


@pytest.mark.parametrize("failure", [DeliveryFailed("connection"), DeliveryFailed("timeout")])
def test_an_endpoint_that_is_down_defers_the_owners_other_events_without_spending_attempts(world, failure):
    world.webhooks.register("alice", URL)
    first, *others = owners_events(world, 3)
    world.ctx.webhook_sender.answers = [failure]
    assert deliver(world, first) is Delivery.RETRYING
    breaker = world.ctx.webhooks.hooks["alice"].breaker
    window = world.ctx.settings.webhook_delays[0]
    assert breaker.failing_until == world.ctx.clock() + timedelta(seconds=window)
    for event in others:
        assert deliver(world, event) is Delivery.DEFERRED
        copy, sent_delay = requeued(world)
        assert copy.attempts == 0 and copy.not_before == breaker.failing_until and sent_delay == window
    assert len(world.ctx.webhook_sender.calls) == 1
    assert world.ctx.metrics.total("WebhooksDeferred") == 2
    # The breaker's window over and the endpoint back: the deferred copies go out at once.
    world.ctx.clock.advance(window)
    world.ctx.webhook_sender.answers = [200]
    for copy in world.ctx.webhook_queue.sent[-2:]:
        assert deliver(world, copy) is Delivery.DELIVERED
    assert world.ctx.webhooks.hooks["alice"].breaker == Breaker()


def test_the_breakers_window_grows_with_the_endpoints_failures_not_with_an_events_attempts(world):
    world.webhooks.register("alice", URL)
    first, second = owners_events(world, 2)
    delays = world.ctx.settings.webhook_delays
    world.ctx.webhook_sender.answers = [DeliveryFailed("connection")]
    # An event on its sixth attempt opens the breaker only for the endpoint's first step.
    deliver(world, dataclasses.replace(first, attempts=5))
    assert requeued(world)[0].attempts == 6 and requeued(world)[1] == delays[5]
    assert world.ctx.webhooks.hooks["alice"].breaker.failing_until == world.ctx.clock() + timedelta(seconds=delays[0])
    world.ctx.clock.advance(delays[0])
    deliver(world, second)
    breaker = world.ctx.webhooks.hooks["alice"].breaker
    assert breaker.failures == 2
    assert breaker.failing_until == world.ctx.clock() + timedelta(seconds=delays[1])


def test_5xx_to_two_different_events_in_a_row_is_an_endpoint_that_is_down(world):
    world.webhooks.register("alice", URL)
    first, second, third = owners_events(world, 3)
    world.ctx.webhook_sender.answers = [503]
    assert deliver(world, first) is Delivery.RETRYING
    assert not world.ctx.webhooks.hooks["alice"].breaker.is_open(world.ctx.clock())
    assert deliver(world, second) is Delivery.RETRYING
    assert world.ctx.webhooks.hooks["alice"].breaker.is_open(world.ctx.clock())
    assert deliver(world, third) is Delivery.DEFERRED


@pytest.mark.parametrize("error", [UnicodeEncodeError("ascii", "ü", 0, 1, "no"), RuntimeError("bug"),
                                   KeyError("x")])
def test_any_exception_of_an_attempt_is_a_counted_backed_off_attempt(world, error):
    world.webhooks.register("alice", URL)
    (event,) = owners_events(world, 1)
    world.ctx.webhook_sender.answers = [error]
    assert deliver(world, event) is Delivery.RETRYING
    copy, sent_delay = requeued(world)
    assert copy.attempts == 1 and sent_delay == world.ctx.settings.webhook_delays[0]
    assert world.ctx.metrics.total("WebhookFailures", Reason="error") == 1
    assert world.ctx.webhooks.hooks["alice"].breaker == Breaker()  # ours: the endpoint is not blamed


def test_an_event_carries_its_attempts_and_due_time_through_the_queue():
    due = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    event = WebhookEvent("msg_1", "alice", "job-1", attempts=3, not_before=due)
    assert WebhookEvent.from_json(event.to_json()) == event
    assert WebhookEvent.from_json('{"event_id": "m", "owner": "o", "job_id": "j"}').attempts == 0
    for body in ('{"event_id": "m", "owner": "o", "job_id": "j", "attempts": -1}',
                 '{"event_id": "m", "owner": "o", "job_id": "j", "attempts": "2"}',
                 '{"event_id": "m", "owner": "o", "job_id": "j", "not_before": 5}',
                 '{"event_id": "m", "owner": "o", "job_id": "j", "not_before": "2030-01-02T03:04:05"}'):
        with pytest.raises(ValueError):
            WebhookEvent.from_json(body)


def test_the_schedule_spans_about_a_day():
    delays = Settings().webhook_delays
    assert 20 * 3600 <= sum(delays) <= 36 * 3600
    assert list(delays) == sorted(delays) and max(delays) <= 43200


def test_a_name_that_now_resolves_inside_is_refused_at_delivery_without_a_call(world):
    world.webhooks.register("alice", URL)
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.ctx.resolve = lambda host, port: ["169.254.169.254"]  # DNS changed after registration
    assert deliver(world, event) is Delivery.RETRYING
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
        world.webhooks.deliver(body, "r")


def test_event_ids_are_fixed_by_the_job_and_its_terminal_status(world):
    world.webhooks.register("alice", URL)
    job = ready_job(world)
    assert event_id(job) == event_id(job) and event_id(job).startswith("msg_")
    failed = dataclasses.replace(job, status=JobStatus.FAILED, error_code=ErrorCode.INVALID_IMAGE)
    assert event_id(failed) != event_id(job)


def test_a_url_is_stored_as_it_will_be_sent_and_an_invalid_idna_host_is_a_clear_400(world):
    world.ctx.resolve = lambda host, port: [PUBLIC]
    hook = world.webhooks.register("alice", "https://Bücher.example/straße?q=ü").webhook
    assert hook.url == "https://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC"
    with pytest.raises(InvalidRequest, match="internationalised domain name"):
        world.webhooks.register("alice", "https://a\u200db.example/hook")


def test_a_url_stored_before_normalisation_is_sent_in_its_ascii_form(world):
    world.webhooks.register("alice", URL)
    hook = world.ctx.webhooks.hooks["alice"]
    world.ctx.webhooks.hooks["alice"] = dataclasses.replace(hook, url=URL + "/straße")
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    assert deliver(world, event) is Delivery.DELIVERED
    assert world.ctx.webhook_sender.calls[-1]["url"] == URL + "/stra%C3%9Fe"


# -- what happened: the receiver's log and the test event (issue 52) -------------------------

def test_every_attempt_is_shown_newest_first_with_its_answer_or_why_none_came(world):
    world.webhooks.register("alice", URL)
    job = ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.ctx.webhook_sender.answers = [DeliveryFailed("timeout"), 503, 200]
    assert deliver(world, event) is Delivery.RETRYING
    first_retry = world.ctx.clock() + timedelta(seconds=world.ctx.settings.webhook_delays[0])
    world.ctx.clock.advance(world.ctx.settings.webhook_delays[0])
    deliver(world, requeued(world)[0])
    world.ctx.clock.advance(world.ctx.settings.webhook_delays[1])
    assert deliver(world, requeued(world)[0]) is Delivery.DELIVERED
    shown = world.webhooks.shown("alice")
    delivered, answered_503, timed_out = shown.deliveries
    assert (timed_out.reason, timed_out.status_code, timed_out.outcome) == ("timeout", None, "retrying")
    assert timed_out.breaker == "open" and timed_out.next_attempt_at == first_retry
    assert (answered_503.status_code, answered_503.reason, answered_503.attempt) == (503, None, 2)
    assert (delivered.status_code, delivered.outcome, delivered.next_attempt_at) == (200, "delivered", None)
    assert {a.webhook_id for a in shown.deliveries} == {event.event_id}
    assert {(a.event, a.job_id) for a in shown.deliveries} == {("ready", job.job_id)}
    assert world.webhooks.shown("bob").deliveries is None  # no webhook: nothing to show


@pytest.mark.parametrize("resolve, failure, reason", [
    (lambda host, port: [], None, "dns"),
    (lambda host, port: ["10.0.0.7"], None, "blocked"),
    (names, DeliveryFailed("connection"), "refused"),
    (names, DeliveryFailed("tls"), "tls"),
])
def test_an_attempt_that_got_no_answer_says_why(world, resolve, failure, reason):
    world.webhooks.register("alice", URL)
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.ctx.resolve = resolve
    world.ctx.webhook_sender.answers = [failure or 200]
    assert deliver(world, event) is Delivery.RETRYING
    (attempt,) = world.webhooks.shown("alice").deliveries
    assert attempt.reason == reason and attempt.status_code is None


def test_a_log_that_is_down_fails_no_delivery_and_no_get(world):
    world.webhooks.register("alice", URL)
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.ctx.delivery_log.down = True
    assert deliver(world, event) is Delivery.DELIVERED
    assert len(world.ctx.webhook_sender.calls) == 1
    shown = world.webhooks.shown("alice")
    assert shown.webhook.url == URL and shown.deliveries is None


def test_the_log_is_written_after_the_receivers_slot_is_given_back(world):
    world.webhooks.register("alice", URL)
    ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    slots, held_while_logging = world.ctx.delivery_slots, []

    class Watching(type(world.ctx.delivery_log)):
        def record(self, receiver, attempt):
            held_while_logging.append(sum(len(h) for h in slots.held.values()))
            super().record(receiver, attempt)

    world.ctx.delivery_log = Watching()
    assert deliver(world, event) is Delivery.DELIVERED
    assert held_while_logging == [0]


def test_the_test_event_is_signed_vetted_and_answers_what_the_receiver_did(world):
    secret = world.webhooks.register("alice", URL).webhook.secret
    world.ctx.webhook_sender.answers = [204]
    attempt = world.webhooks.send_test("alice")
    (call,) = world.ctx.webhook_sender.calls
    body = StandardWebhook(secret).verify(call["body"], call["headers"])
    assert body["type"] == "webhook.test" and call["headers"]["webhook-id"] == attempt.webhook_id
    assert (attempt.event, attempt.status_code, attempt.outcome, attempt.job_id) == ("webhook.test", 204, "delivered", None)
    assert world.webhooks.shown("alice").deliveries == [attempt]
    world.ctx.resolve = lambda host, port: ["169.254.169.254"]
    blocked = world.webhooks.send_test("alice")
    assert (blocked.reason, blocked.outcome) == ("blocked", "failed")
    assert len(world.ctx.webhook_sender.calls) == 1  # never dialled
    assert world.ctx.webhooks.hooks["alice"].breaker == Breaker()  # a test opens no breaker
    with pytest.raises(WebhookNotFound):
        world.webhooks.send_test("bob")


def test_a_webhook_deleted_and_registered_again_starts_with_an_empty_log(world):
    world.webhooks.register("alice", URL)
    world.ctx.webhook_sender.answers = [500]
    world.webhooks.send_test("alice")
    assert len(world.webhooks.shown("alice").deliveries) == 1
    world.webhooks.remove("alice")
    world.ctx.clock.advance(0.000001)
    world.webhooks.register("alice", URL)
    assert world.webhooks.shown("alice").deliveries == []
    world.ctx.webhook_sender.answers = [204]
    attempt = world.webhooks.send_test("alice")
    assert world.webhooks.shown("alice").deliveries == [attempt]


def test_the_test_events_timestamp_is_the_apis_time_format(world):
    secret = world.webhooks.register("alice", URL).webhook.secret
    world.ctx.clock.advance(0.123456)  # microseconds, as a real clock has them
    world.ctx.webhook_sender.answers = [204]
    world.webhooks.send_test("alice")
    (call,) = world.ctx.webhook_sender.calls
    body = StandardWebhook(secret).verify(call["body"], call["headers"])
    stamp = datetime.strptime(body["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert int(stamp.timestamp()) == int(call["headers"]["webhook-timestamp"])


def test_test_events_are_bounded_per_receiver(world):
    from chalicelib.domain.errors import RateLimited
    from chalicelib.usecases.webhooks import TEST_BURST, TEST_EVERY_SECONDS

    world.webhooks.register("alice", URL)
    world.webhooks.register("bob", URL)
    for _ in range(TEST_BURST):
        world.webhooks.send_test("alice")
    with pytest.raises(RateLimited) as refused:
        world.webhooks.send_test("alice")
    assert 0 < refused.value.retry_after <= TEST_EVERY_SECONDS
    world.webhooks.send_test("bob")  # another receiver's bound is its own
    world.ctx.clock.advance(refused.value.retry_after)
    world.webhooks.send_test("alice")
    assert len(world.ctx.webhook_sender.calls) == TEST_BURST + 2


def test_get_shows_the_breaker_open_until_its_window_ends_and_each_attempts_fields(world):
    from chalicelib.http.views import webhook_shown_body

    world.webhooks.register("alice", URL)
    job = ready_job(world)
    (event,) = world.ctx.webhook_queue.sent
    world.ctx.webhook_sender.answers = [DeliveryFailed("tls")]
    deliver(world, event)
    body = webhook_shown_body(world.webhooks.shown("alice"))
    until = world.ctx.webhooks.hooks["alice"].breaker.failing_until
    assert body["breaker"] == {"state": "open", "until": until.strftime("%Y-%m-%dT%H:%M:%SZ")}
    (attempt,) = body["deliveries"]
    assert set(attempt) == {"at", "webhook_id", "event", "job_id", "attempt", "outcome", "reason", "ms",
                            "breaker", "next_attempt_at"}
    assert (attempt["reason"], attempt["breaker"], attempt["job_id"]) == ("tls", "open", job.job_id)
    world.ctx.clock.advance(world.ctx.settings.webhook_delays[0])
    assert webhook_shown_body(world.webhooks.shown("alice"))["breaker"] == {"state": "closed"}
    assert webhook_shown_body(world.webhooks.shown("bob")) == {"url": None}
