"""A conditional write that committed, whose answer was lost, and whose re-send by botocore
then failed its own condition: on DynamoDB (moto's server, behind tests/dynamo_stub.py,
which lets the write commit and then drops or delays its answer), every conditional write of
the job store, and of the webhook, slot, rate and push stores, is this call's own, and the use
cases go on as if the answer had arrived.

Clocks have microseconds, as real requests' do (`expires_at` is stored in whole seconds)."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import ConditionFailed
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.vocabulary import ErrorCode, Outcome
from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.usecases import UseCases
from tests.dynamo_stub import DynamoStub
from tests.fakes import FakeJobStore, FakeObjectStore, ListMetrics, fake_context
from tests.images import jpeg

NOW = datetime(2026, 7, 15, 10, 0, 30, 449514, tzinfo=timezone.utc)
WEEK = timedelta(days=7)
LEASE = timedelta(seconds=120)
# Short enough for a delayed answer to time out quickly; retries as production's.
FAST = {"connect_timeout_seconds": 2, "read_timeout_seconds": 1, "max_retry_attempts": 2}
JOB_ID = "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds, microseconds=123457)


@pytest.fixture
def stub(stack):
    settings, _, _ = stack
    stub = DynamoStub(settings.endpoint_url)
    stub.delay_seconds = 1.6
    yield stub
    stub.close()


@pytest.fixture
def store(stack, stub):
    settings, _, _ = stack
    return DynamoJobStore(DynamoTable(settings.table, settings.region, stub.url, connection=FAST))


def job_key(job_id: str = JOB_ID):
    return lambda request: f"job#{job_id}" in str(request.get("Key") or request.get("Item") or request)


def new_job(job_id: str = JOB_ID, now: datetime = NOW) -> Job:
    return Job(job_id=job_id, owner="alice", status=JobStatus.QUEUED, created_at=now, updated_at=now,
               expires_at=now + WEEK, original_key=f"originals/{job_id}", sweep_at=now)


# -- the store: each conditional write, its answer lost after it committed -------------------
@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_create_whose_answer_was_lost_is_this_calls_own(store, stub, how):
    stub.lose_answer("TransactWriteItems", how=how)
    store.create(new_job(), 20)
    assert stub.lost == 1
    assert stub.operations["GetItem"] == 0, "the refusal carries the job: no read needed"
    assert store.get(JOB_ID).created_at == NOW and store.active_jobs("alice") == {JOB_ID}


def test_a_second_create_of_the_same_id_is_refused(store):
    """Not a re-send: another call, though of an identical job."""
    store.create(new_job(), 20)
    with pytest.raises(ConditionFailed):
        store.create(new_job(), 20)


def test_a_keyed_create_whose_answer_was_lost_is_this_calls_own(store, stub):
    """The re-send finds the key held by this very call's job: answered as the create it is
    (so what follows a create, such as the push fan-out's first message, follows it too)."""
    record = IdempotencyRecord("scope-1", "fp", JOB_ID, NOW + timedelta(hours=24))
    stub.lose_answer("TransactWriteItems")
    store.create_with_key(new_job(), record, NOW, 20)
    assert stub.lost == 1
    assert stub.operations["GetItem"] == 0, "the refusal carries the job: no read needed"
    assert store.get_idempotency("scope-1").job_id == JOB_ID
    assert store.get(JOB_ID).created_at == NOW and store.active_jobs("alice") == {JOB_ID}


def test_a_keyed_create_of_another_call_finds_the_key_taken(store, stub):
    """Not a re-send: another request with the key, its own new job, reads the key again."""
    from chalicelib.domain.errors import IdempotencyKeyTaken

    record = IdempotencyRecord("scope-1", "fp", JOB_ID, NOW + timedelta(hours=24))
    store.create_with_key(new_job(), record, NOW, 20)
    other = "6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1"
    with pytest.raises(IdempotencyKeyTaken):
        store.create_with_key(new_job(other), IdempotencyRecord("scope-1", "fp", other, record.expires_at), NOW, 20)
    assert stub.operations["GetItem"] == 0, "the refusal says the new job was not there: no read"
    assert store.get(other) is None and store.get_idempotency("scope-1").job_id == JOB_ID


def test_a_claim_whose_answer_was_lost_is_this_workers_claim(store, stub):
    store.create(new_job(), 20)
    stub.lose_answer("UpdateItem", job_key())
    claimed = store.claim(JOB_ID, NOW, LEASE, 3)
    assert (claimed.status, claimed.attempt, claimed.lease_expires_at) == (JobStatus.PROCESSING, 1, NOW + LEASE)


@pytest.mark.parametrize("write", ["move", "finish_attempt", "update_if_unchanged", "release_lease"])
def test_each_write_whose_answer_was_lost_is_this_calls_own(store, stub, write):
    store.create(new_job(), 20)
    later = NOW + timedelta(seconds=3, microseconds=7)
    if write == "move":
        call = lambda: store.move(new_job().cancelled(later, WEEK), JobStatus.QUEUED)  # noqa: E731
        expected = JobStatus.CANCELLED
    else:
        claimed = store.claim(JOB_ID, NOW, LEASE, 3)
        expected = {"finish_attempt": JobStatus.FAILED, "update_if_unchanged": JobStatus.FAILED,
                    "release_lease": JobStatus.PROCESSING}[write]
        failed = claimed.failed(later, ErrorCode.INVALID_IMAGE, WEEK)
        call = {"finish_attempt": lambda: store.finish_attempt(failed, 1),
                "update_if_unchanged": lambda: store.update_if_unchanged(failed, seen=claimed),
                "release_lease": lambda: store.release_lease(JOB_ID, 1, later)}[write]
    operation = "UpdateItem" if write == "release_lease" else "PutItem"
    stub.lose_answer(operation, job_key())
    call()
    assert stub.lost == 1
    assert store.get(JOB_ID).status is expected


def test_a_write_that_lost_to_another_still_fails_its_condition(store):
    """The write id tells: a claim that never landed is not taken for this call's own."""
    store.create(new_job(), 20)
    store.claim(JOB_ID, NOW, LEASE, 3)
    with pytest.raises(ConditionFailed):
        store.claim(JOB_ID, NOW, LEASE, 3)


# -- the use cases over it: claim, fail, cancel, upload ----------------------------------------
@pytest.fixture
def use_cases(stack, store):
    settings, _, _ = stack
    objects = FakeObjectStore()
    return UseCases(fake_context(settings=settings, jobs=store, objects=objects, clock=Clock(NOW)))


def test_an_upload_whose_create_answer_was_lost_is_accepted(use_cases, stub):
    """Issue 32 item 9: the job read back differs from the one in hand (expires_at whole
    seconds; the worker may have claimed it): it was 500."""
    stub.lose_answer("TransactWriteItems")
    accepted = use_cases.uploads.accept_upload("alice", jpeg(64, 48))
    assert stub.lost == 1 and not accepted.replayed
    assert use_cases.ctx.jobs.get(accepted.job.job_id).status is JobStatus.QUEUED


def _uploaded(use_cases, data: bytes) -> str:
    job_id = use_cases.uploads.accept_upload("alice", data).job.job_id
    return job_id


def _event(use_cases, job_id: str) -> ObjectCreated:
    ctx = use_cases.ctx
    key = ctx.object_keys.original(job_id)
    return ObjectCreated(bucket=ctx.settings.bucket, key=key, size=len(ctx.objects.objects[key][0]))


def test_a_claim_whose_answer_was_lost_processes_the_job_at_once(use_cases, stub):
    """Issue 32 item 12: the worker took its own live lease for another's (JobBusy)."""
    job_id = _uploaded(use_cases, jpeg(64, 48))
    stub.lose_answer("UpdateItem", job_key(job_id))
    assert use_cases.worker.handle_object_created(_event(use_cases, job_id)) is Outcome.READY
    job = use_cases.ctx.jobs.get(job_id)
    assert (job.status, job.attempt) == (JobStatus.READY, 1)
    assert use_cases.ctx.jobs.active_jobs("alice") == set()


def test_a_failing_write_whose_answer_was_lost_concludes_the_job(use_cases, stub):
    """lifecycle.fail: the job failed, so its slot is given back (and its owner told)."""
    job_id = _uploaded(use_cases, jpeg(64, 48))
    ctx = use_cases.ctx
    ctx.objects.objects[ctx.object_keys.original(job_id)] = (b"not an image at all", "image/jpeg")
    stub.lose_answer("PutItem", job_key(job_id))
    assert use_cases.worker.handle_object_created(_event(use_cases, job_id)) is Outcome.FAILED
    assert ctx.jobs.get(job_id).status is JobStatus.FAILED
    assert ctx.jobs.active_jobs("alice") == set()


def test_a_cancel_whose_answer_was_lost_concludes_the_job(use_cases, stub):
    """Cancel: the slot is given back and the multipart upload aborted."""
    accepted = use_cases.direct_uploads.create_direct_upload(
        "alice", "image/jpeg", 20 * 1024 * 1024, method="multipart")
    job_id = accepted.job.job_id
    objects = use_cases.ctx.objects
    assert objects.uploads
    stub.lose_answer("PutItem", job_key(job_id))
    assert use_cases.manage.cancel("alice", job_id).status is JobStatus.CANCELLED
    assert stub.lost == 1
    assert use_cases.ctx.jobs.active_jobs("alice") == set()
    assert objects.uploads == {}, "the multipart upload was not aborted"


def test_a_completion_whose_queueing_answer_was_lost_answers_the_job_queued(use_cases, stub):
    """The multipart completion queues its job (lifecycle.mark_arrived): its own landed write
    is not another's, and the answer is the job queued, never awaiting_upload."""
    size = 20 * 1024 * 1024
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", size, method="multipart")
    objects, upload = use_cases.ctx.objects, accepted.upload
    for part in upload.parts:
        objects.put_part(accepted.job.multipart_upload_id, part.number, b"\0" * part.size)
    stub.lose_answer("PutItem", job_key(accepted.job.job_id))
    answer = use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None)
    assert stub.lost == 1 and answer.status is JobStatus.QUEUED
    assert use_cases.ctx.jobs.get(accepted.job.job_id).status is JobStatus.QUEUED


def test_a_job_stored_before_write_ids_is_written_as_before(stack, store):
    """Items written by the release before carry no write_id: every write still works on
    them, and a refused one is never taken for this call's own."""
    settings, _, clients = stack
    store.create(new_job(), 20)
    clients["dynamodb"].update_item(TableName=settings.table, Key={"pk": {"S": f"job#{JOB_ID}"}},
                                    UpdateExpression="REMOVE write_id")
    assert store.get(JOB_ID).created_at == NOW  # reads as before
    claimed = store.claim(JOB_ID, NOW, LEASE, 3)
    clients["dynamodb"].update_item(TableName=settings.table, Key={"pk": {"S": f"job#{JOB_ID}"}},
                                    UpdateExpression="REMOVE write_id")
    with pytest.raises(ConditionFailed):
        store.claim(JOB_ID, NOW, LEASE, 3)
    store.move(claimed.cancelled(NOW + timedelta(seconds=1), WEEK), JobStatus.PROCESSING)
    assert store.get(JOB_ID).status is JobStatus.CANCELLED


def test_every_status_of_a_keyed_upload_whose_answers_were_lost_reaches_the_push_fanout(use_cases, stub):
    """Where the table has no stream (the local runner) the fan-out hears of a status only
    from the write that made it: each write that landed on a re-send is offered like any."""
    from chalicelib.usecases.push import Fanout, PushingJobStore

    published: list[tuple[str, JobStatus]] = []
    fanout = Fanout(lambda job: published.append((job.job_id, job.status)) or 1, ListMetrics())
    ctx = use_cases.ctx
    ctx.jobs = PushingJobStore(ctx.jobs, fanout)
    stub.lose_answer("TransactWriteItems")
    job_id = use_cases.uploads.accept_upload("alice", jpeg(64, 48), "key-1").job.job_id
    stub.lose_answer("UpdateItem", job_key(job_id))
    assert use_cases.worker.handle_object_created(_event(use_cases, job_id)) is Outcome.READY
    assert stub.lost == 2 and fanout.drain()
    assert published == [(job_id, JobStatus.QUEUED), (job_id, JobStatus.PROCESSING), (job_id, JobStatus.READY)]


# -- the other stores: webhooks, delivery and wait slots, rates, push connections -------------
# Each conditional write, its answer lost after it committed: the re-send is this call's own.
HOOK_URL = "https://hooks.example.com/images"
UNTIL = NOW + timedelta(seconds=30)


def item_key(pk: str):
    return lambda request: (request.get("Key") or request.get("Item") or {}).get("pk", {}).get("S") == pk


@pytest.fixture
def table(stack, stub):
    settings, _, _ = stack
    return DynamoTable(settings.table, settings.region, stub.url, connection=FAST)


@pytest.fixture
def webhook_use_cases(stack, table):
    from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore

    settings, _, _ = stack
    resolve = lambda host, port: ["93.184.215.14"]  # noqa: E731: a public address
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(),
                                 webhooks=DynamoWebhookStore(table), clock=Clock(NOW), resolve=resolve))


@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_webhook_registration_whose_answer_was_lost_shows_its_secret(webhook_use_cases, stub, how):
    """Taken for another's create, the registration looked again, found its own webhook and
    answered as a change of URL: the secret was never shown, so no receiver could verify."""
    stub.lose_answer("PutItem", item_key("webhook#alice"), how=how)
    registration = webhook_use_cases.webhooks.register("alice", HOOK_URL)
    assert stub.lost == 1
    assert registration.show_secret
    assert webhook_use_cases.webhooks.show("alice").secret == registration.webhook.secret


def test_a_rotation_whose_answer_was_lost_keeps_the_old_secret_signing(webhook_use_cases, stub):
    """Taken for another's change, the rotation rotated again: the secret the receiver holds
    was no longer the previous one, and every delivery failed its signature."""
    old = webhook_use_cases.webhooks.register("alice", HOOK_URL).webhook.secret
    stub.lose_answer("PutItem", item_key("webhook#alice"))
    rotated = webhook_use_cases.webhooks.rotate("alice")
    assert stub.lost == 1
    stored = webhook_use_cases.webhooks.show("alice")
    assert (stored.secret, stored.previous_secret) == (rotated.secret, old)


def test_a_webhook_write_that_lost_to_another_still_fails_its_condition(table):
    from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore
    from chalicelib.domain.webhooks import Webhook

    store = DynamoWebhookStore(table)
    hook = Webhook(owner="alice", url=HOOK_URL, secret="whsec_MDEyMzQ1Njc4OQ==", created_at=NOW)
    store.create_webhook(hook)
    with pytest.raises(ConditionFailed):
        store.create_webhook(hook)
    store.update_webhook(dataclasses.replace(hook, secret="whsec_bmV3"), seen=hook)
    with pytest.raises(ConditionFailed):
        store.update_webhook(dataclasses.replace(hook, url=HOOK_URL + "/x"), seen=hook)


def test_a_webhook_stored_before_write_ids_is_written_as_before(stack, table):
    """Items written by the release before carry no write_id: read and written as before, and
    a refused write is never taken for this call's own."""
    from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore
    from chalicelib.domain.webhooks import Webhook

    settings, _, clients = stack
    store = DynamoWebhookStore(table)
    hook = Webhook(owner="alice", url=HOOK_URL, secret="whsec_MDEyMzQ1Njc4OQ==", created_at=NOW)
    store.create_webhook(hook)
    clients["dynamodb"].update_item(TableName=settings.table, Key={"pk": {"S": "webhook#alice"}},
                                    UpdateExpression="REMOVE write_id")
    assert store.get_webhook("alice") == hook
    with pytest.raises(ConditionFailed):
        store.create_webhook(hook)
    rotated = dataclasses.replace(hook, secret="whsec_bmV3", previous_secret=hook.secret)
    store.update_webhook(rotated, seen=hook)
    assert store.get_webhook("alice") == rotated


def test_a_breaker_saved_whose_answer_was_lost_is_saved(table, stub):
    from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore
    from chalicelib.domain.webhooks import Breaker, Webhook

    store = DynamoWebhookStore(table)
    store.create_webhook(Webhook(owner="alice", url=HOOK_URL, secret="whsec_MDEyMzQ1Njc4OQ==", created_at=NOW))
    breaker = Breaker(failing_until=UNTIL, failures=3, suspect_event="msg_1")
    stub.lose_answer("UpdateItem", item_key("webhook#alice"))
    store.save_breaker("alice", breaker)
    assert stub.lost == 1 and store.get_webhook("alice").breaker == breaker


@pytest.fixture(params=["wait", "delivery"])
def slots(request, table):
    from chalicelib.adapters.dynamo_waits import DynamoWaitSlots
    from chalicelib.adapters.dynamo_webhooks import DynamoDeliverySlots

    return {"wait": DynamoWaitSlots, "delivery": DynamoDeliverySlots}[request.param](table)


@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_slot_taken_whose_answer_was_lost_is_this_holders(slots, stub, how):
    """Taken for another's, the holder went on to the next slot (two held, or none left: a
    held request refused, a delivery deferred) and the first stayed held until its time."""
    stub.lose_answer("UpdateItem", item_key(slots.PREFIX + "alice#0"), how=how)
    assert slots.take("alice", "h1", UNTIL, NOW, 1) == 0
    assert stub.lost == 1
    assert slots.take("alice", "h2", UNTIL, NOW, 1) is None  # held by h1, as it should be
    slots.give_back("alice", 0, "h1")
    assert slots.take("alice", "h2", UNTIL, NOW, 1) == 0


def test_a_slot_given_back_whose_answer_was_lost_is_free(slots, stub):
    slots.take("alice", "h1", UNTIL, NOW, 1)
    operation = "DeleteItem" if slots.PREFIX == "wait#" else "UpdateItem"
    stub.lose_answer(operation, item_key(slots.PREFIX + "alice#0"))
    slots.give_back("alice", 0, "h1")
    assert stub.lost == 1
    assert slots.take("alice", "h2", UNTIL, NOW, 1) == 0


@pytest.fixture
def rates(table):
    from chalicelib.adapters.dynamo_rates import DynamoRateStore

    return DynamoRateStore(table)


RATE_NOW, COST, DEPTH = 1_784_109_600.0, 0.5, 2.0


@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_lease_from_a_full_bucket_whose_answer_was_lost_is_this_calls(rates, stub, how):
    """Taken for a refusal, the admission read the bucket and leased again: the owner paid
    twice for one lease, and a burst was refused early."""
    stub.lose_answer("UpdateItem", item_key("rate#alice"), how=how)
    assert rates.take_from_full("alice", RATE_NOW, COST, DEPTH) == RATE_NOW + COST
    assert stub.lost == 1 and rates.full_at("alice") == RATE_NOW + COST


def test_a_lease_whose_answer_was_lost_is_this_calls_and_taken_once(rates, stub):
    rates.take_from_full("alice", RATE_NOW, COST, DEPTH)
    stub.lose_answer("UpdateItem", item_key("rate#alice"))
    assert rates.take("alice", RATE_NOW, COST, DEPTH) == RATE_NOW + 2 * COST
    assert stub.lost == 1 and rates.full_at("alice") == RATE_NOW + 2 * COST


def test_a_lease_refused_is_still_refused_and_an_old_item_leases_as_before(stack, rates):
    settings, _, clients = stack
    rates.take_from_full("alice", RATE_NOW, COST, DEPTH)
    clients["dynamodb"].update_item(TableName=settings.table, Key={"pk": {"S": "rate#alice"}},
                                    UpdateExpression="REMOVE write_id")
    with pytest.raises(ConditionFailed):
        rates.take_from_full("alice", RATE_NOW, COST, DEPTH)
    assert rates.take("alice", RATE_NOW, 3 * COST, DEPTH) == RATE_NOW + 4 * COST
    with pytest.raises(ConditionFailed):
        rates.take("alice", RATE_NOW, COST, DEPTH)  # empty


@pytest.fixture
def connections(table):
    from chalicelib.adapters.dynamo_push import DynamoPushConnections

    return DynamoPushConnections(table)


@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_connection_added_whose_answer_was_lost_is_added_within_the_cap(connections, stub, how):
    """The owner's set already holds it on the re-send, which the condition lets through: a
    last free place is not read as the cap reached."""
    connections.add("alice", "c0", UNTIL, 2)
    stub.lose_answer("UpdateItem", item_key("push#alice"), how=how)
    connections.add("alice", "c1", UNTIL, 2)
    assert stub.lost == 1 and connections.of_owner("alice") == ["c0", "c1"]


def test_a_connection_removed_whose_answer_was_lost_is_gone(connections, stub):
    connections.add("alice", "c0", UNTIL, 2)
    stub.lose_answer("UpdateItem", item_key("push#alice"))
    connections.remove("c0")
    assert stub.lost == 1 and connections.of_owner("alice") == []
