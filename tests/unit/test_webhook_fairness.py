"""One receiver's share of the deliveries (chalicelib/usecases/webhooks.py): at most
WEBHOOK_RECEIVER_SLOTS deliveries to it in flight, slow answers counted for their whole time,
the rest deferred to its turns without a call or an attempt, and other owners untouched."""
import json
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import DeliveryFailed, TransientError
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.webhooks import Webhook, WebhookEvent
from chalicelib.usecases import UseCases
from chalicelib.usecases.webhooks import SLOT_MARGIN, Delivery, receiver_key
from tests.fakes import (
    Clock,
    FakeDeliverySlots,
    FakeJobStore,
    FakeObjectStore,
    FakeRateStore,
    FakeWebhookQueue,
    FakeWebhookStore,
    ListMetrics,
    fake_context,
)
from tests.images import jpeg

URL = "https://hooks.example.com/images"


class SlowSender:
    """Answers 200 after `seconds` of the service's clock, for the owners in `slow`."""

    def __init__(self, clock, slow=(), seconds=4.9):
        self.clock, self.slow, self.seconds = clock, set(slow), seconds
        self.calls: list[str] = []

    def post(self, url, addresses, headers, body, timeout) -> int:
        self.calls.append(headers["webhook-id"])
        if url.endswith("/slow"):
            self.clock.advance(self.seconds)
        return 200


@pytest.fixture
def world():
    # Microseconds, as a real clock has them.
    clock = Clock(datetime(2030, 1, 1, 10, 0, 0, 123456, tzinfo=timezone.utc))
    ctx = fake_context(settings=Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(), clock=clock,
                       metrics=ListMetrics(), webhooks=FakeWebhookStore(), webhook_queue=FakeWebhookQueue(),
                       webhook_sender=SlowSender(clock), resolve=lambda host, port: ["93.184.215.14"],
                       delivery_slots=FakeDeliverySlots(), webhook_turns=FakeRateStore())
    uc = UseCases(ctx)
    uc.webhooks.register("alice", URL + "/slow")
    uc.webhooks.register("bob", URL)
    return uc


def event_of(uc, owner):
    accepted = uc.uploads.accept_upload(owner, jpeg())
    uc.worker.handle_object_created(ObjectCreated(uc.ctx.settings.bucket, accepted.job.original_key, 1))
    return uc.ctx.webhook_queue.sent.pop()


def hold_all_slots(uc, owner, until_in=timedelta(seconds=10)):
    """Deliveries to `owner`'s receiver in flight elsewhere: every slot taken by another holder."""
    ctx = uc.ctx
    now = ctx.clock()
    for n in range(ctx.settings.receiver_slots):
        assert ctx.delivery_slots.take(f"owner/{owner}", f"elsewhere-{n}", now + until_in, now,
                                       ctx.settings.receiver_slots) is not None


def test_a_receiver_with_its_share_in_flight_waits_and_other_owners_are_delivered_at_once(world):
    ctx = world.ctx
    alice, bob = event_of(world, "alice"), event_of(world, "bob")
    hold_all_slots(world, "alice")
    assert world.webhooks.deliver(alice.to_json(), None) is Delivery.DEFERRED
    assert world.webhooks.deliver(bob.to_json(), None) is Delivery.DELIVERED
    assert ctx.webhook_sender.calls == [bob.event_id]  # alice's receiver was not called
    again = ctx.webhook_queue.sent[-1]
    assert again.event_id == alice.event_id and again.attempts == 0  # no attempt spent
    assert again.not_before > ctx.clock()


def test_a_slow_2xx_holds_its_slot_for_its_whole_time_and_gives_it_back_after(world):
    ctx = world.ctx
    first = event_of(world, "alice")
    assert world.webhooks.deliver(first.to_json(), None) is Delivery.DELIVERED
    key = "owner/alice"
    assert ctx.delivery_slots.held[key] == {}  # given back
    assert ctx.delivery_slots.last_held[key] == {0: pytest.approx(4.9)}  # the slow answer counted


@pytest.mark.parametrize("answer", [500, DeliveryFailed("timeout"), RuntimeError("ours")])
def test_a_failed_or_crashed_attempt_gives_its_slot_back_too(world, answer):
    ctx = world.ctx
    ctx.webhook_sender.post = lambda *a, **k: (_ for _ in ()).throw(answer) if isinstance(answer, Exception) else answer
    event = event_of(world, "alice")
    assert world.webhooks.deliver(event.to_json(), None) is Delivery.RETRYING
    assert ctx.delivery_slots.held["owner/alice"] == {}


def test_a_slot_whose_function_died_frees_itself_after_the_attempts_time(world):
    ctx = world.ctx
    # A function took the slot and died: it never gives it back.
    timeout = timedelta(seconds=ctx.settings.webhook_attempt_seconds)
    hold_all_slots(world, "alice", until_in=timeout + SLOT_MARGIN)
    event = event_of(world, "alice")
    assert world.webhooks.deliver(event.to_json(), None) is Delivery.DEFERRED
    ctx.clock.advance((timeout + SLOT_MARGIN).total_seconds() + 0.001)
    assert world.webhooks.deliver(event.to_json(), None) is Delivery.DELIVERED


def test_deferred_events_come_back_in_turns_spaced_by_the_receivers_pace(world):
    ctx = world.ctx
    slots = ctx.settings.receiver_slots
    for n in range(slots):  # the receiver's last answers took 4 s each
        ctx.delivery_slots.last_held.setdefault("owner/alice", {})[n] = 4.0
    hold_all_slots(world, "alice")
    now = ctx.clock()
    events = [event_of(world, "alice") for _ in range(4)]
    for event in events:
        assert world.webhooks.deliver(event.to_json(), None) is Delivery.DEFERRED
    due = [(e.not_before - now).total_seconds() for e in ctx.webhook_queue.sent[-4:]]
    # The first when a slot held now is likely free, then one per hold over the slots.
    assert due == pytest.approx([4.0, 6.0, 8.0, 10.0], abs=0.01)


def test_turns_of_one_receiver_never_delay_another(world):
    ctx = world.ctx
    hold_all_slots(world, "alice")
    for _ in range(20):
        world.webhooks.deliver(event_of(world, "alice").to_json(), None)
    hold_all_slots(world, "bob")
    world.webhooks.deliver(event_of(world, "bob").to_json(), None)
    bob_due = ctx.webhook_queue.sent[-1].not_before - ctx.clock()
    assert bob_due <= timedelta(seconds=2)  # bob's own first turn, not after alice's twenty


def test_with_the_turns_store_down_a_deferred_event_comes_back_after_one_hold(world):
    ctx = world.ctx
    ctx.webhook_turns.down = True
    hold_all_slots(world, "alice")
    world.webhooks.deliver(event_of(world, "alice").to_json(), None)
    assert ctx.webhook_queue.sent[-1].not_before - ctx.clock() == timedelta(seconds=1)


def test_a_slot_store_that_is_down_retries_the_message_and_calls_no_one(world):
    ctx = world.ctx
    ctx.delivery_slots.down = True
    with pytest.raises(TransientError):
        world.webhooks.deliver(event_of(world, "alice").to_json(), None)
    assert ctx.webhook_sender.calls == []


def test_receivers_are_keyed_apart_by_owner():
    made = datetime(2030, 1, 1, tzinfo=timezone.utc)
    keys = {receiver_key(Webhook(owner=o, url=URL, secret="whsec_x", created_at=made))
            for o in ("alice", "bob", "service/x")}
    assert len(keys) == 3


@pytest.mark.parametrize("slots, concurrency", [(0, 5), (5, 5), (9, 5)])
def test_the_receivers_slots_must_leave_functions_for_everyone_else(slots, concurrency):
    with pytest.raises(ValueError, match="WEBHOOK_RECEIVER_SLOTS"):
        Settings.from_environ({"LOCAL_RUNNER": "1", "WEBHOOK_RECEIVER_SLOTS": str(slots),
                               "WEBHOOK_MAX_CONCURRENCY": str(concurrency)})
    assert Settings.from_environ({"LOCAL_RUNNER": "1", "WEBHOOK_RECEIVER_SLOTS": "4",
                                  "WEBHOOK_MAX_CONCURRENCY": "5"}).receiver_slots == 4
    # Unset: 2, and 1 where there are only 2 functions (the dev stage).
    assert Settings.from_environ({"LOCAL_RUNNER": "1", "WEBHOOK_MAX_CONCURRENCY": "2"}).receiver_slots == 1
    assert Settings.from_environ({"LOCAL_RUNNER": "1"}).receiver_slots == 2
